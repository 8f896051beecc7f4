#!/usr/bin/env bash
# The model part of `make demo`: the real SmolLM2-135M-Instruct Q4_1 GGUF when
# scripts/fetch-model.sh got it (make demo runs that first), else the bundled seeded test model,
# saying so; then the same model from a C program on libswitchyard (examples/embed_c).
# Usage: demo-model.sh SWITCHYARD BUILD_DIR [EMBED_C]
set -euo pipefail
sy=$1
build=$2
embed=${3:-}
gguf="$build/model-cache/SmolLM2-135M-Instruct.Q4_1.gguf"
question="What is the capital of France?"

show() {
  echo
  printf '$ switchyard'
  printf ' %q' "$@"
  echo
  "$sy" "$@"
}

if [[ -f "$gguf" ]]; then
  # Where each quantized matmul would go on an H200 with bf16 activations, and why.
  show plan "$gguf" --target examples/targets/h200.json --dtype bf16 --max-batch-tokens 64 --context 512
  show run "$gguf" --prompt "The three primary colours are" --max-tokens 32 --profile
  show run "$gguf" --chat "$question"
  model="$gguf"
else
  echo
  echo "switchyard demo: the real model could not be fetched (see the message above);" \
       "falling back to the bundled seeded test model, whose text is not meaningful."
  show make-test-model "$build/test-model"
  show run "$build/test-model" --prompt "The quick brown fox" --max-tokens 24 --profile
  show run "$build/test-model" --chat "$question" --max-tokens 16
  model="$build/test-model"
fi
if [[ -n "$embed" ]]; then
  # The same pipeline inside a C99 program (docs/host-api.md): 16 tokens, streamed.
  echo
  echo "\$ examples/embed_c $model 'The capital of France is'"
  "$embed" "$model" "The capital of France is"
fi
