#!/usr/bin/env bash
# Makes the llama-quantize-style SmolLM2-135M-Instruct files the parity tests compare with
# transformers' GGUF loader (tests/fixtures/smollm2/expected.<MIX>.json): Q4_0 (every quantized
# tensor), Q4_K_M, Q5_K_M and the IQ4_XS mix, from the fetched Q4_1 GGUF, with bench/requantize_gguf.py on the pinned PyPI gguf
# and numpy of VENV (scripts/setup-test-venv.sh), once, into CACHE_DIR. Each must have the SHA-256
# its expected values were recorded for. Exits 0 when all are (already) there, 1 when they cannot
# be made: the caller says what is skipped.
# Usage: make-requantized-smollm2.sh [CACHE_DIR] [VENV_DIR]
set -euo pipefail
cache=${1:-build/model-cache}
venv=${2:-build/test-venv}
here=$(cd "$(dirname "$0")/.." && pwd)
src="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"

if [[ ! -f "$src" ]]; then
  echo "switchyard: cannot make the requantized SmolLM2 files: $src is not there" >&2
  exit 1
fi
status=0
for mix in Q4_0 Q4_K_M Q5_K_M IQ4_XS_MIX; do
  file="$cache/SmolLM2-135M-Instruct.$mix.gguf"
  sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' \
    "$here/tests/fixtures/smollm2/expected.$mix.json")
  if [[ -f "$file" ]] && echo "$sha  $file" | sha256sum --quiet -c - 2>/dev/null; then continue; fi
  if [[ ! -x "$venv/bin/python" ]]; then
    echo "switchyard: cannot make $file: no $venv (scripts/setup-test-venv.sh)" >&2
    exit 1
  fi
  echo "switchyard: making $file (once)" >&2
  "$venv/bin/python" "$here/bench/requantize_gguf.py" "$src" "$file.tmp" "$mix"
  if echo "$sha  $file.tmp" | sha256sum --quiet -c - 2>/dev/null; then
    mv "$file.tmp" "$file"
  else
    echo "switchyard: $file came out with another SHA-256 than its expected values'" >&2
    rm -f "$file.tmp"
    status=1
  fi
done
exit $status
