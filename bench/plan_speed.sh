#!/usr/bin/env bash
# Planning cost next to loading a model: times `switchyard plan` (median of 5) for gpt-oss-20b
# and for a synthetic 1,000-layer llama-shaped decoder, and reports ops per second.
#   bench/plan_speed.sh [build/bin/switchyard]
set -euo pipefail
sy=${1:-build/bin/switchyard}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed 's/"num_hidden_layers": *[0-9]*/"num_hidden_layers": 1000/' \
  "$here/examples/models/llama-3.2-1b/config.json" > "$work/config.json"
measure() {  # label, model
  local times=() ops
  for i in 1 2 3 4 5; do
    local out
    out=$("$sy" plan "$2" --json 2>/dev/null)
    times+=($(echo "$out" | grep -o '"planning_ms": [0-9.e+-]*' | awk '{print $2}'))
    ops=$(echo "$out" | grep -c '"rejected"')
  done
  local median
  median=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 3p)
  awk -v l="$1" -v m="$median" -v n="$ops" \
    'BEGIN { printf "%-28s %8.1f ms  %6d ops  %9.0f ops/s\n", l, m, n, n / (m / 1000) }'
}
measure "gpt-oss-20b (2 phases)" "$here/examples/models/gpt-oss-20b/config.json"
measure "llama x1000 layers (2 phases)" "$work/config.json"
