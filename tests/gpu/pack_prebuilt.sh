#!/usr/bin/env bash
# pack_prebuilt.sh DIR [LLAMA_DIR] — for a GPU machine whose image lacks the Debian packages a build needs
# (the lent H200's has CUDA, CMake and ninja, not oneDNN, Boost or spdlog): builds build-gpu
# here (sm_90 only) and packs it, without objects, with the shared libraries its programs and
# plugins link from the system (glibc and the compiler's runtime excepted: the device's are
# newer), into DIR/pack.tar.xz. tests/gpu/run_prebuilt.sh unpacks it there and runs
# device_check.sh. The build's absolute path goes with it (the tests find fixtures and plugins
# by the paths compiled in), so the device links that path to its copy of the repository.
# The peer goes with it too: llama.cpp's llama-bench built for CUDA sm_90 by
# bench/build_llama_cpp.sh in LLAMA_DIR (default build/llama-cpp; a build there is reused), as
# build-gpu/llama-cuda/bin. It links the CUDA runtime and cuBLAS of the device, not copies. Only
# llama-bench: with ggml linked statically each program holds every CUDA kernel of llama.cpp
# (70 MB stripped, 41 MB under xz), and the device tool carries 64 MiB in all.
set -euo pipefail

DIR=${1:?usage: tests/gpu/pack_prebuilt.sh DIR [LLAMA_DIR]}
LLAMA_DIR=${2:-build/llama-cpp}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-gpu -j "$(nproc)"
LLAMA_BIN=$(bench/build_llama_cpp.sh "$LLAMA_DIR" cuda)
rm -rf build-gpu/llama-cuda && mkdir -p build-gpu/llama-cuda/bin
cp "$LLAMA_BIN/llama-bench" build-gpu/llama-cuda/bin/
strip build-gpu/llama-cuda/bin/*

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/syslib"
# The device's own CUDA runtime, driver and cuBLAS are used, never copies of this machine's.
find build-gpu/bin build-gpu/lib build-gpu/llama-cuda -type f \( -perm -u+x -o -name '*.so' \) \
  -print0 | xargs -0 ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -vE '/lib(cuda|cudart|cublas|cublasLt|nccl)\.so' |
  grep -v "^$ROOT/" |
  while read -r lib; do cp -L "$lib" "$STAGE/syslib/"; done
echo "$ROOT" >"$STAGE/build_root"

tar -cJf "$DIR/pack.tar.xz" --exclude='*.o' --exclude='*.a' --exclude=CMakeFiles \
  --exclude='.ninja*' --exclude='smollm2-shaped*' build-gpu/bin build-gpu/lib build-gpu/tests \
  build-gpu/llama-cuda \
  -C "$STAGE" syslib build_root
echo "packed $(du -h "$DIR/pack.tar.xz" | cut -f1) into $DIR/pack.tar.xz" \
  "($(ls "$STAGE/syslib" | wc -l) shared libraries, build root $ROOT)"
