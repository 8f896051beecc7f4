#!/usr/bin/env bash
# The `switchyard bench decode` table of issue 26: SmolLM2-135M in F32, BF16, Q8_0, Q4_1 and
# Q4_K_M, on every cpu_onednn tier this CPU has, under --numerics exact and (quantized files)
# fast. Medians of `bench decode` (depth 0, 512-token prefill), each with its same-run ceilings.
# The F32/BF16/Q8_0 files are bench/requantize_gguf.py copies of the fetched Q4_1 file.
#   bench/decode_table.sh [MODEL_DIR] [TIERS]
set -euo pipefail
dir=${1:-build/model-cache}
tiers=${2:-"amx avx512 avx2"}
bin=${SWITCHYARD:-build/bin/switchyard}
printf "%-8s %-8s %-6s %10s %10s %8s %10s\n" tier file numerics "prefill/s" "decode/s" "GB/s" "read ratio"
for tier in $tiers; do
  for f in F32 BF16 Q8_0 Q4_1 Q4_K_M; do
    model="$dir/SmolLM2-135M-Instruct.$f.gguf"
    [[ -f "$model" ]] || continue
    modes="exact"
    [[ $f == Q* ]] && modes="exact fast"
    for n in $modes; do
      out=$(SWITCHYARD_CPU_ISA=$tier "$bin" bench decode "$model" --numerics "$n" --depths 0 \
            --repeats 3 2>&1)
      prefill=$(echo "$out" | sed -n 's/^prefill [0-9]* tokens: [0-9.]* ms, \([0-9.]*\) tokens\/s.*/\1/p')
      row=$(echo "$out" | awk '$1 == "0" {print $2, $6, $9}')
      printf "%-8s %-8s %-6s %10s %10s %8s %10s\n" "$tier" "$f" "$n" "$prefill" $row
    done
  done
done
