#!/usr/bin/env bash
# run_prebuilt.sh PACK OUTDIR [COMMAND...] — on the GPU machine, from the repository root:
# unpacks tests/gpu/pack_prebuilt.sh's PACK (build-gpu, and its shared libraries into
# build-gpu/syslib), links the build's absolute path to this copy of the repository, and runs
# COMMAND (default: SY_DEVICE_PREBUILT=1 tests/gpu/device_check.sh OUTDIR) with the libraries
# and the CUDA toolkit's cuBLAS on LD_LIBRARY_PATH.
set -uo pipefail

PACK=${1:?usage: tests/gpu/run_prebuilt.sh PACK OUTDIR [COMMAND...]}
OUT=${2:?usage: tests/gpu/run_prebuilt.sh PACK OUTDIR [COMMAND...]}
shift 2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
rm -rf build-gpu
STAGE=$(mktemp -d)
tar -xJf "$PACK" -C "$STAGE" || { echo "cannot unpack $PACK"; exit 1; }
mv "$STAGE/build-gpu" build-gpu && mv "$STAGE/syslib" build-gpu/syslib
BUILD_ROOT=$(cat "$STAGE/build_root")
if [ "$BUILD_ROOT" != "$ROOT" ]; then
  [ -e "$BUILD_ROOT" ] && { echo "$BUILD_ROOT exists and is not this repository"; exit 1; }
  mkdir -p "$(dirname "$BUILD_ROOT")" && ln -s "$ROOT" "$BUILD_ROOT"
fi
CUBLAS=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublas.so.1[0-9]*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$ROOT/build-gpu/syslib${CUBLAS:+:$(dirname "$CUBLAS")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "build root $BUILD_ROOT -> $ROOT; cuBLAS: ${CUBLAS:-not found}"
mkdir -p "$OUT"
if [ $# -eq 0 ]; then
  SY_DEVICE_PREBUILT=1 tests/gpu/device_check.sh "$OUT"
else
  "$@"
fi
