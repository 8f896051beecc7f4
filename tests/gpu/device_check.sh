#!/usr/bin/env bash
# device_check.sh OUTDIR — the cuda_flash checks that need a GPU, for a machine with one
# (sized for an H200 session: under 8 minutes on 16 cores).
#
# Configures a separate build (build-gpu, sm_90 only, so nvcc compiles one architecture),
# builds only the CLI, the plugins and the two test binaries, lists the plugins and runs the
# CudaFlash* tests (the GPU ones skip with a reason when no device is visible; the paged and
# varlen forms among them), then the issue's two attention benchmarks (prefill and decode, each
# with the device's own bf16 GEMM rate and copy bandwidth measured in the same run), then the
# batched case end to end: a SmolLM2-shaped bf16 model with random weights planned for 8
# sequences on cuda (the paged plan, one segment) and `bench batch` over 1, 8 and 16 sequences,
# with CUDA graphs and without (SWITCHYARD_CUDA_GRAPHS=off: the launches a step takes), each
# row with its host calls, launches, graph launches and blocking waits per step; then the peer,
# llama.cpp's CUDA build on the same model as GGUF, with the ratios; then the sm_90a kernel
# (SWITCHYARD_CUDA_FLASH_SM90A=on): the flash and segment tests, the prefill benchmark and the
# batched case again, the flash grid and prefill benchmark with its consumers out of ping-pong
# (=no-pingpong), and the prefill at head dim 64 on both kernels; and last the main and serve
# test binaries whole, with the GPU present.
# Every log goes to OUTDIR.
# A machine without the build's Debian packages: tests/gpu/pack_prebuilt.sh here, then
# tests/gpu/run_prebuilt.sh there (SY_DEVICE_PREBUILT=1 skips configure and build).
set -uo pipefail

OUT=${1:?usage: tests/gpu/device_check.sh OUTDIR}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
JOBS=$(nproc 2>/dev/null || echo 4)
START=$(date +%s)
status=0

step() {  # step NAME TIMEOUT_S COMMAND...: runs with a deadline, logs to OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  echo "== $name ($(($(date +%s) - START))s)" | tee -a "$OUT/summary.txt"
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "   rc=$rc" | tee -a "$OUT/summary.txt"
  [ $rc -eq 0 ] || status=1
  return $rc
}

figures() {  # figures NAME PATTERN: the lines of OUT/NAME.log matching PATTERN as one line
  grep -E "$2" "$OUT/$1.log" | tr -s ' ' | tr -d '\n' | sed "s/^/$1: /" |
    tee -a "$OUT/summary.txt"
  echo | tee -a "$OUT/summary.txt"
}

{ nvidia-smi || true; } >"$OUT/nvidia-smi.txt" 2>&1

# SY_DEVICE_PREBUILT=1: build-gpu was built elsewhere (same layout, same absolute paths) and
# carried here, because the device's image lacks the Debian packages a build needs.
if [ -n "${SY_DEVICE_PREBUILT:-}" ]; then
  echo "== prebuilt build-gpu: configure and build skipped" | tee -a "$OUT/summary.txt"
else
  step configure 120 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 || { echo "configure failed"; exit 1; }
  step build 300 cmake --build build-gpu -j "$JOBS" --target switchyard switchyard_plugins \
    switchyard_tests switchyard_serve_tests ||
    { echo "build failed"; tail -50 "$OUT/build.log"; exit 1; }
fi

SY=$(find build-gpu -type f -name switchyard -perm -u+x | head -1)
TESTS=$(find build-gpu -type f -name switchyard_tests -perm -u+x | head -1)
step plugins 60 "$SY" plugins
step tests 180 "$TESTS" --gtest_filter='CudaFlash*:CudaSegment*' \
  --gtest_output="xml:$OUT/cuda_flash_tests.xml"
SHAPE=(--device cuda --dtype bf16 --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --json)
step bench_prefill 90 "$SY" bench attention "${SHAPE[@]}" --q-len 4096 --kv-len 4096 --causal
step bench_decode 90 "$SY" bench attention "${SHAPE[@]}" --q-len 1 --kv-len 32768 --repeats 21
ATTENTION_FIELDS='"(kernel|ms_median|gflops|gbps|ratio|ratio_of|machine_gemm_gflops|'
ATTENTION_FIELDS+='machine_bandwidth_gbps)"'
for b in bench_prefill bench_decode; do figures "$b" "$ATTENTION_FIELDS"; done

MODEL=build-gpu/smollm2-shaped  # 270 MB: kept out of OUTDIR, which comes back
step test_model 120 "$SY" make-test-model "$MODEL" --shape smollm2-135m --dtype bf16
step plan_batch 60 "$SY" plan "$MODEL" --prefer cuda,cpu --max-sequences 8 --json
grep -E '"(kv_layout|layout_rule|form)"' "$OUT/plan_batch.log" | tee -a "$OUT/summary.txt"
# The step as one segment (issue 38): with CUDA graphs (the default), then without, to count
# the launches a step takes; blocking waits inside a step must be 0 in both.
BATCH_FIELDS='"(sequences|aggregate_tokens_per_s|step_ms|host_calls_per_step|launches_per_step|'
BATCH_FIELDS+='graph_launches_per_step|blocking_waits_per_step|detail)"'
step bench_batch 180 "$SY" bench batch "$MODEL" --prefer cuda,cpu --sequences 1,8,16 \
  --prompt-len 128 --steps 32 --json
step bench_batch_nographs 180 env SWITCHYARD_CUDA_GRAPHS=off "$SY" bench batch "$MODEL" \
  --prefer cuda,cpu --sequences 1,8,16 --prompt-len 128 --steps 32 --json
for b in bench_batch bench_batch_nographs; do figures "$b" "$BATCH_FIELDS"; done

# The peer (issue 38): llama.cpp's CUDA build (carried by tests/gpu/pack_prebuilt.sh as
# build-gpu/llama-cuda, or SY_LLAMA_CUDA_BIN) on the same SmolLM2-shaped bf16 model, written here
# as GGUF by make-test-model (no model file is carried), beside Switchyard on that very file:
# `bench batch` (prompts of 128, 32 steps), one sequence against llama-bench's tg64, and, where a
# llama-batched-bench is there too, every row against its S_TG; the summary prints the ratios.
GGUF_DIR=build-gpu/smollm2-shaped-gguf
GGUF=$GGUF_DIR/model.gguf
LLAMA_BIN=${SY_LLAMA_CUDA_BIN:-build-gpu/llama-cuda/bin}
step test_model_gguf 120 "$SY" make-test-model "$GGUF_DIR" --shape smollm2-135m --dtype bf16 \
  --format gguf
step sy_batch_gguf 180 "$SY" bench batch "$GGUF" --dtype bf16 --prefer cuda,cpu \
  --sequences 1,8,16 --prompt-len 128 --steps 32 --json
if [ -x "$LLAMA_BIN/llama-bench" ]; then
  step peer_bench 180 "$LLAMA_BIN/llama-bench" -m "$GGUF" -ngl 99 -p 512 -n 64 -r 5 -o csv
  ours=($(grep -oE '"aggregate_tokens_per_s": *[0-9.eE+-]+' "$OUT/sy_batch_gguf.log" |
    awk '{print $2}'))
  # The CSV's rows only: llama-bench's own stderr (device lines) shares the log.
  tg64=$(awk -F'","' 'NF >= 9 && $(NF - 6) == "64" {gsub(/"/, "", $(NF - 1)); print $(NF - 1)}' \
    "$OUT/peer_bench.log" | tail -1)
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0 && b > 0) printf "%.2fx", a / b; else print "n/a"}'; }
  echo "peer: 1 sequence: switchyard ${ours[0]:-n/a} tok/s, llama-bench tg64 ${tg64:-n/a}" \
    "($(ratio "${ours[0]:-0}" "${tg64:-0}"))" | tee -a "$OUT/summary.txt"
  if [ -x "$LLAMA_BIN/llama-batched-bench" ]; then  # not in the pack (its size); a local build
    step peer_batched 180 "$LLAMA_BIN/llama-batched-bench" -m "$GGUF" -ngl 99 -c 4096 \
      -npp 128 -ntg 32 -npl 1,8,16 --output-format jsonl
    i=0
    for pl in 1 8 16; do
      peer=$(grep -E "\"pl\": *$pl," "$OUT/peer_batched.log" | grep -oE '"speed_tg": *[0-9.]+' |
        awk '{print $2}' | tail -1)
      echo "peer: $pl sequences: switchyard ${ours[$i]:-n/a} tok/s, llama-batched-bench S_TG" \
        "${peer:-n/a} ($(ratio "${ours[$i]:-0}" "${peer:-0}"))" | tee -a "$OUT/summary.txt"
      i=$((i + 1))
    done
  fi
else
  echo "   no llama.cpp CUDA build at $LLAMA_BIN: the peer did not run" | tee -a "$OUT/summary.txt"
  status=1
fi

# The sm_90a kernel (flash_hopper.cuh), off by default until this has run it: the flash and
# segment tests, the prefill benchmark and the batched case again with it taking the rows calls
# (the batch's segment must name it); the GPU flash grid and the prefill benchmark with its
# consumers out of ping-pong (=no-pingpong), and the prefill at head dim 64 (SmolLM2's) on both
# kernels, so that this one run says which schedule to keep and at which head dims to make the
# kernel the default. Last but the suites, with short deadlines, so a kernel that hangs on its
# first run costs little and leaves every figure above standing.
SM90A=(env SWITCHYARD_CUDA_FLASH_SM90A=on)
SM90A_FREE=(env SWITCHYARD_CUDA_FLASH_SM90A=no-pingpong)
PREFILL=(--q-len 4096 --kv-len 4096 --causal)
SHAPE64=(--device cuda --dtype bf16 --batch 4 --heads 32 --kv-heads 8 --head-dim 64 --json)
step tests_sm90a 120 "${SM90A[@]}" "$TESTS" --gtest_filter='CudaFlash*:CudaSegment*' \
  --gtest_output="xml:$OUT/cuda_flash_tests_sm90a.xml"
grep -E '^\[  (FAILED|PASSED) ' "$OUT/tests_sm90a.log" | tee -a "$OUT/summary.txt"
step bench_prefill_sm90a 60 "${SM90A[@]}" "$SY" bench attention "${SHAPE[@]}" "${PREFILL[@]}"
figures bench_prefill_sm90a "$ATTENTION_FIELDS"
step tests_sm90a_free 90 "${SM90A_FREE[@]}" "$TESTS" --gtest_filter='CudaFlashGpu*'
grep -E '^\[  (FAILED|PASSED) ' "$OUT/tests_sm90a_free.log" | tee -a "$OUT/summary.txt"
step bench_prefill_sm90a_free 60 "${SM90A_FREE[@]}" "$SY" bench attention "${SHAPE[@]}" \
  "${PREFILL[@]}"
figures bench_prefill_sm90a_free "$ATTENTION_FIELDS"
step bench_prefill_d64 60 "$SY" bench attention "${SHAPE64[@]}" "${PREFILL[@]}"
figures bench_prefill_d64 "$ATTENTION_FIELDS"
step bench_prefill_d64_sm90a 60 "${SM90A[@]}" "$SY" bench attention "${SHAPE64[@]}" \
  "${PREFILL[@]}"
figures bench_prefill_d64_sm90a "$ATTENTION_FIELDS"
step bench_batch_sm90a 120 "${SM90A[@]}" "$SY" bench batch "$MODEL" --prefer cuda,cpu \
  --sequences 1,8,16 --prompt-len 128 --steps 32 --json
figures bench_batch_sm90a "$BATCH_FIELDS"
if ! grep -q 'on the sm_90a kernel' "$OUT/bench_batch_sm90a.log"; then
  echo "   bench_batch_sm90a: no segment says the sm_90a kernel took the rows calls" |
    tee -a "$OUT/summary.txt"
  status=1
fi

# The suite with a GPU present (the first run found tests and a planner path that assumed a
# CPU-only machine): the main and serve test binaries, failures only.
for t in switchyard_tests switchyard_serve_tests; do
  BIN=$(find build-gpu -type f -name "$t" -perm -u+x | head -1)
  [ -n "$BIN" ] || { echo "   $t not built" | tee -a "$OUT/summary.txt"; status=1; continue; }
  step "suite_$t" 300 "$BIN" --gtest_brief=1
  grep -E '^\[  (FAILED|PASSED|SKIPPED) ' "$OUT/suite_$t.log" | tee -a "$OUT/summary.txt"
done

echo "total $(($(date +%s) - START))s, status $status" | tee -a "$OUT/summary.txt"
tail -40 "$OUT/tests.log" 2>/dev/null
exit $status
