#!/usr/bin/env bash
# llama_cpp_compare.sh [options] MODEL.gguf... — Switchyard against llama.cpp on the same GGUF
# files, in the same run, on this CPU: prefill and decode tokens/s of `switchyard bench decode`
# (prompt 512, decode at cache depth 0) beside `llama-bench -p 512 -n 64`, and the ratios.
#
#   --llama-bin DIR   llama.cpp's binaries (llama-bench) are in DIR
#   --build-llama DIR build them into DIR first (bench/build_llama_cpp.sh: the llama.cpp that
#                     PyPI's llama-cpp-python sdist vendors, pinned there)
#   --isa avx2|native avx2: Switchyard on its avx2 tier (SWITCHYARD_CPU_ISA) and llama.cpp built
#                     with AVX2 and without AVX-512, as on a CPU without AVX-512; native: each
#                     as the CPU allows (default). On an AMX CPU llama.cpp's native build may
#                     die (build_llama_cpp.sh): build its avx512 kind and pass --llama-bin
#   --threads N       threads for both (default: the CPU count, as both default to)
#   --numerics M      Switchyard's --numerics (default: the plan's default)
#   --switchyard PATH the switchyard binary (default build/bin/switchyard)
#
# Prints one line per file and writes the raw JSON of both tools beside it in OUT (default
# build/llama-compare). Figures name the CPU (/proc/cpuinfo's family and model).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
llama_bin="" build_dir="" isa=native threads=$(nproc) numerics="" out="$here/build/llama-compare"
sy="$here/build/bin/switchyard"
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-bin) llama_bin=$2; shift 2 ;;
    --build-llama) build_dir=$2; shift 2 ;;
    --isa) isa=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --numerics) numerics=$2; shift 2 ;;
    --switchyard) sy=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { echo "usage: $0 [options] MODEL.gguf..." >&2; exit 2; }
case "$isa" in avx2 | native) ;; *) echo "--isa avx2|native, not $isa" >&2; exit 2 ;; esac

[ -n "$build_dir" ] && llama_bin=$("$here/bench/build_llama_cpp.sh" "$build_dir" "$isa")
[ -x "$llama_bin/llama-bench" ] || { echo "no llama-bench in '$llama_bin' (--llama-bin or --build-llama)" >&2; exit 2; }

mkdir -p "$out"
cpu=$(awk -F': ' '/^model name/{m=$2} /^cpu family/{f=$2} /^model\t/{n=$2} END{print m " (family " f ", model " n ")"}' /proc/cpuinfo)
echo "CPU: $cpu; $threads threads; isa $isa; llama.cpp in $llama_bin"
printf '%-28s %22s %22s\n' file "prefill tok/s (ratio)" "decode tok/s (ratio)"
sy_env=()
[ "$isa" = avx2 ] && sy_env=(SWITCHYARD_CPU_ISA=avx2)
sy_args=(--prompt-len 512 --depths 0 --json)
[ -n "$numerics" ] && sy_args+=(--numerics "$numerics")
for m in "${models[@]}"; do
  name=$(basename "$m" .gguf)
  env "${sy_env[@]}" SWITCHYARD_NUM_THREADS="$threads" "$sy" bench decode "$m" "${sy_args[@]}" \
    >"$out/$name.switchyard.json"
  "$llama_bin/llama-bench" -m "$m" -p 512 -n 64 -t "$threads" -o json >"$out/$name.llama.json" \
    2>/dev/null
  python3 - "$out/$name.switchyard.json" "$out/$name.llama.json" "$name" <<'EOF'
import json, sys
sy = json.load(open(sys.argv[1]))
ll = json.load(open(sys.argv[2]))
def llama(kind):
    for r in ll:
        if (kind == "prefill" and r["n_prompt"] > 0 and r["n_gen"] == 0) or \
           (kind == "decode" and r["n_gen"] > 0 and r["n_prompt"] == 0):
            return r["avg_ts"]
    return float("nan")
pre, dec = sy["prefill"]["tokens_per_s"], sy["decode"][0]["tokens_per_s"]
lp, ld = llama("prefill"), llama("decode")
print(f"{sys.argv[3]:<28} {pre:7.1f} vs {lp:7.1f} ({pre / lp:4.2f}x) {dec:7.1f} vs {ld:7.1f} ({dec / ld:4.2f}x)")
EOF
done
