#!/usr/bin/env bash
# Builds the graph-parser, config-importer, chat-template, GGUF-reader, safetensors-reader,
# tokenizer (tokenizer.json + tokenizer_config.json) and server-request fuzz targets with clang
# (libFuzzer, ASan, UBSan)
# and runs each for a bounded time, seeded with the examples. Any crash, leak, sanitizer report
# or stray exception fails the run; the reproducer is left in the work folder.
#   tests/fuzz/run_fuzz.sh SOURCE_DIR WORK_DIR [SECONDS_PER_TARGET]
set -euo pipefail
src=$1
work=$2
seconds=${3:-20}
mkdir -p "$work"
core=(core/graph/graph.cpp core/capability/op.cpp core/capability/vocabulary.cpp
      core/capability/envelope.cpp core/capability/envelope_json.cpp core/json/json_text.cpp
      core/errors/errors.cpp "$work/op_contract.o")
importer=($(cd "$src" && ls core/importer/*.cpp))
chat=($(cd "$src" && ls core/chat_template/*.cpp) core/errors/errors.cpp)
gguf=(core/weights/gguf.cpp core/weights/mapped_file.cpp core/errors/errors.cpp)
request=(core/serving/openai_request.cpp core/errors/errors.cpp)
safetensors=(core/weights/safetensors.cpp core/weights/mapped_file.cpp core/errors/errors.cpp)
tokenizer=(core/tokenizer/tokenizer.cpp core/generation/generation.cpp core/json/json_text.cpp
           "${chat[@]}")
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -I"$src" -I"$src/abi/include")

# Each source is compiled once, whatever number of targets links it (errors.cpp goes into five,
# the chat template's into two): the link adds libFuzzer's main.
build() {  # name, sources...
  local name=$1 objects=() f out
  shift
  for f in "$@"; do
    out=$f
    if [[ "$f" != *.o ]]; then
      out="$work/obj/${f//\//_}.o"
      [ -f "$out" ] || (cd "$src" && clang++ "${flags[@]}" -c "$f" -o "$out")
    fi
    objects+=("$out")
  done
  clang++ -fsanitize=fuzzer,address,undefined "${objects[@]}" -o "$work/$name"
}
mkdir -p "$work/obj"
rm -f "$work"/obj/*.o  # a run compiles the sources as they are now
# The operator contract is C99: compiled as C, linked into both targets.
(cd "$src" && clang -std=c99 -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
   -fno-sanitize-recover=undefined -I"$src/abi/include" -c abi/src/op_contract.c \
   -o "$work/op_contract.o")
build fuzz_graph tests/fuzz/fuzz_graph.cpp "${core[@]}"
build fuzz_config tests/fuzz/fuzz_config.cpp "${core[@]}" "${importer[@]}"
build fuzz_chat_template tests/fuzz/fuzz_chat_template.cpp "${chat[@]}"
build fuzz_gguf tests/fuzz/fuzz_gguf.cpp "${gguf[@]}"
build fuzz_openai_request tests/fuzz/fuzz_openai_request.cpp "${request[@]}"
build fuzz_safetensors tests/fuzz/fuzz_safetensors.cpp "${safetensors[@]}"
build fuzz_tokenizer tests/fuzz/fuzz_tokenizer.cpp "${tokenizer[@]}"

run() {  # name, seed files...
  local name=$1
  shift
  local corpus="$work/${name}_corpus"
  mkdir -p "$corpus"
  cp "$@" "$corpus/" 2>/dev/null || true
  (cd "$work" && ./"$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len="${max_len:-65536}" -print_final_stats=1 "$corpus")
}
run fuzz_graph "$src"/examples/graphs/*.json
i=0
for f in "$src"/examples/models/*/config.json; do cp "$f" "$work/seed_config_$i.json"; i=$((i + 1)); done
run fuzz_config "$work"/seed_config_*.json
run fuzz_chat_template "$src"/tests/fuzz/../fixtures/chat_templates/*.jinja
run fuzz_gguf "$src"/tests/fixtures/gguf/*.gguf
run fuzz_openai_request "$src"/tests/fixtures/openai_requests/*.json
# The real safetensors files of the parity fixtures, whole (up to 480 KB: the data section
# must be there for a header's offsets to be valid), each under a name of its own.
i=0
for f in "$src"/tests/fixtures/parity/*/model.safetensors; do
  cp "$f" "$work/seed_safetensors_$i.safetensors"
  i=$((i + 1))
done
max_len=500000 run fuzz_safetensors "$work"/seed_safetensors_*.safetensors
# Each tokenizer.json of the fixtures, then a NUL, then a tokenizer_config.json seed.
i=0
for t in "$src"/tests/fixtures/tokenizer/*.json "$src"/tests/fixtures/parity/*/tokenizer.json; do
  for c in "$src"/tests/fuzz/seeds/tokenizer_config/*.json; do
    { cat "$t"; printf '\0'; cat "$c"; } > "$work/seed_tokenizer_$i.bin"
    i=$((i + 1))
  done
done
run fuzz_tokenizer "$work"/seed_tokenizer_*.bin
echo "fuzzing finished: no crash in ${seconds}s per target"
