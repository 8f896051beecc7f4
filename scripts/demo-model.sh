#!/usr/bin/env bash
# The model part of `make demo`: a tiny gpt-oss with sinks and MXFP4 experts on the CPU, then the
# real SmolLM2-135M-Instruct Q4_1 GGUF when
# scripts/fetch-model.sh got it (make demo runs that first), else the bundled seeded test model,
# saying so; a completion of the real Gemma 3 270M when it was fetched; then the SmolLM2 (or test)
# model behind `switchyard serve` (one curl request), and from a C program on libswitchyard
# (examples/embed_c).
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

# gpt-oss as trained (attention sinks, sliding layers, 8 experts, MXFP4), on the CPU: where
# transformers refuses its sinks on CPU with flex attention, the plan proves cpu_onednn serves them
# natively, and the run gives transformers' greedy ids (a tiny random checkpoint: its text is
# noise; tests/fixtures/parity/make_gpt_oss.py).
tiny_oss=tests/fixtures/parity/gpt_oss_mxfp4
show plan "$tiny_oss" --explain l0.attn
show run "$tiny_oss" --prompt "Sinks on the CPU" --max-tokens 16 --ignore-eos

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
# Gemma 3 270M Q4_K_M (scripts/fetch-model.sh ... gemma3): a base model, so a plain completion; a
# SentencePiece vocabulary of 262144 tokens, sliding-window layers and Gemma's norms, from GGUF.
gemma="$build/model-cache/gemma-3-270m-q4_k_m.gguf"
if [[ -f "$gemma" ]]; then
  show run "$gemma" --prompt "The three primary colours are" --max-tokens 32
else
  echo
  echo "switchyard demo: Gemma 3 270M could not be fetched (see the message above); skipping it."
fi

serve_demo() {
  # The same model behind the OpenAI-compatible server (docs/serve.md): one chat request with
  # curl, the answer, a few lines of /metrics, then SIGTERM (it drains and exits 0).
  local log
  log=$(mktemp)
  echo
  echo "\$ switchyard serve $model --port 0 --context 2048 &"
  "$sy" serve "$model" --port 0 --context 2048 >"$log" 2>"$log.err" &
  local pid=$! url=""
  for _ in $(seq 1 600); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" || true)
    [[ -n "$url" ]] && break
    sleep 0.1
  done
  cat "$log"
  if [[ -z "$url" ]]; then
    echo "switchyard demo: the server did not start:" && cat "$log.err"
    kill "$pid" 2>/dev/null || true
    return 1
  fi
  local body='{"messages": [{"role": "user", "content": "'"$question"'"}], "max_tokens": 32, "temperature": 0}'
  echo "\$ curl -s $url/v1/chat/completions -d '$body'"
  curl -s "$url/v1/chat/completions" -H 'Content-Type: application/json' -d "$body" |
    python3 -c 'import json, sys; r = json.load(sys.stdin); print("answer:", r["choices"][0]["message"]["content"]); print("usage:", json.dumps(r["usage"]))'
  echo "\$ curl -s $url/metrics | grep ..."
  curl -s "$url/metrics" | grep -E '^switchyard_(requests_total|generated_tokens_total|prompt_tokens_total|kv_blocks_(used|total)|time_to_first_token_seconds_(count|sum))'
  kill -TERM "$pid"
  wait "$pid" && echo "(the server drained and exited 0)"
  rm -f "$log" "$log.err"
}
serve_demo

if [[ -n "$embed" ]]; then
  # The same pipeline inside a C99 program (docs/host-api.md): 16 tokens, streamed.
  echo
  echo "\$ examples/embed_c $model 'The capital of France is'"
  "$embed" "$model" "The capital of France is"
fi
