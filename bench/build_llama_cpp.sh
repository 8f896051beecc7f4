#!/usr/bin/env bash
# build_llama_cpp.sh DIR avx2|avx512|native|cuda — builds llama.cpp's llama-bench and
# llama-batched-bench into DIR/<version>/build-<kind> from the llama.cpp that PyPI's
# llama-cpp-python sdist vendors (pip download once into DIR/<version>/sdist, pinned below, then
# unpacked whole or not at all into DIR/<version>/src), and prints the folder of the binaries. The peer of bench/llama_cpp_compare.sh (avx2, native) and of the GPU device check
# (cuda: sm_90 only, static ggml so the programs need only the CUDA runtime and cuBLAS of the
# machine they run on; tests/gpu/pack_prebuilt.sh carries them).
#   avx2    AVX2 + FMA + F16C, no AVX-512: a CPU without AVX-512
#   avx512  AVX-512 with VNNI, BF16 and VBMI, no AMX: for an AMX CPU where the native build's
#           AMX matmul dies (seen 2026-12-07 on an Intel Xeon: SIGILL at ldtilecfg in a worker
#           thread, while Switchyard's amx tier runs there; llama.cpp PR 26954, open, reports
#           crashes of its AMX path and changes its tile setup)
#   native  as this CPU allows
#   cuda    CUDA for sm_90 (H100, H200), the CPU part at the baseline; no NCCL (one GPU; with it
#           the programs need the 218 MB libnccl, which the device may not have)
set -euo pipefail
LLAMA_PY_VERSION=0.3.36  # llama-cpp-python whose vendored llama.cpp is built
dir=${1:?usage: build_llama_cpp.sh DIR avx2|avx512|native|cuda}
kind=${2:?usage: build_llama_cpp.sh DIR avx2|avx512|native|cuda}
case "$kind" in
  native) flags=(-DGGML_NATIVE=ON -DGGML_CUDA=OFF) ;;
  avx2) flags=(-DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
    -DGGML_F16C=ON -DGGML_AVX512=OFF) ;;
  avx512) flags=(-DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
    -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
    -DGGML_AVX512_VBMI=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
  cuda) flags=(-DGGML_NATIVE=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
    -DBUILD_SHARED_LIBS=OFF -DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_CUDA_NCCL=OFF) ;;
  *) echo "build_llama_cpp.sh: the kind is avx2, avx512, native or cuda, not '$kind'" >&2; exit 2 ;;
esac
dir="$dir/$LLAMA_PY_VERSION"
mkdir -p "$dir"
if [ ! -d "$dir/src" ]; then
  tarball="$dir/sdist/llama_cpp_python-$LLAMA_PY_VERSION.tar.gz"
  [ -f "$tarball" ] || python3 -m pip download --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==$LLAMA_PY_VERSION" -d "$dir/sdist" >&2
  rm -rf "$dir/src.tmp" && mkdir -p "$dir/src.tmp"
  tar -xzf "$tarball" -C "$dir/src.tmp" --strip-components=1
  mv "$dir/src.tmp" "$dir/src"
fi
cmake -S "$dir/src/vendor/llama.cpp" -B "$dir/build-$kind" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF "${flags[@]}" >&2
ninja -C "$dir/build-$kind" llama-bench llama-batched-bench >&2
echo "$dir/build-$kind/bin"
