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
request=(core/serving/openai_request.cpp core/sampling/sampling.cpp core/sampling/grammar.cpp
         core/sampling/json_schema.cpp core/json/json_text.cpp core/errors/errors.cpp)
safetensors=(core/weights/safetensors.cpp core/weights/atomic_file.cpp core/weights/mapped_file.cpp
  core/errors/errors.cpp)
tokenizer=(core/tokenizer/tokenizer.cpp core/tokenizer/split_regex.cpp core/generation/generation.cpp core/json/json_text.cpp
           "${chat[@]}")
# Line tables only (-g1): what a crash's stack names, and a quicker compile than full -g.
flags=(-std=c++20 -g1 -O1 -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -I"$src" -I"$src/abi/include")

# The sources are compiled in batches, one translation unit per folder of the core (the union of
# the files the targets take from it), as the build's unity targets are: each folder is one
# library there, whose file-local names the unity guard keeps apart, and a batch parses the
# headers its files share (nlohmann/json, <regex>) once. The importer's nine files: 53 s one by
# one, 18 s as one batch. A batch is compiled once, whatever number of targets links it, all of
# them side by side on the machine's cores (jobs, default nproc); each link adds libFuzzer's main.
jobs=${FUZZ_JOBS:-$(nproc)}
batch_of() { [[ "$1" == core/* ]] && dirname "$1" || echo "$1"; }  # a fuzz target's own file alone
object_of() { [[ "$1" == *.o ]] && echo "$1" || echo "$work/obj/$(batch_of "$1" | tr / _).o"; }
mkdir -p "$work/obj" "$work/batch"
rm -f "$work"/obj/*.o "$work"/batch/*.cpp  # a run compiles the sources as they are now
# The operator contract is C99: compiled as C, linked into every target that needs it.
(cd "$src" && clang -std=c99 -g1 -O1 -fsanitize=fuzzer-no-link,address,undefined \
   -fno-sanitize-recover=undefined -I"$src/abi/include" -c abi/src/op_contract.c \
   -o "$work/op_contract.o")
targets=(
  "fuzz_graph tests/fuzz/fuzz_graph.cpp ${core[*]}"
  "fuzz_config tests/fuzz/fuzz_config.cpp ${core[*]} ${importer[*]}"
  "fuzz_chat_template tests/fuzz/fuzz_chat_template.cpp ${chat[*]}"
  "fuzz_gguf tests/fuzz/fuzz_gguf.cpp ${gguf[*]}"
  "fuzz_openai_request tests/fuzz/fuzz_openai_request.cpp ${request[*]}"
  "fuzz_safetensors tests/fuzz/fuzz_safetensors.cpp ${safetensors[*]}"
  "fuzz_tokenizer tests/fuzz/fuzz_tokenizer.cpp ${tokenizer[*]}")
for t in "${targets[@]}"; do printf '%s\n' ${t#* }; done | grep -v '\.o$' | sort -u |
  while read -r f; do echo "#include \"$src/$f\"" >>"$work/batch/$(batch_of "$f" | tr / _).cpp"; done
# The batches of the most files first (ls -S: the longest lists of includes), so that the last
# to finish is likely a small one.
for b in $(ls -S "$work"/batch/*.cpp); do printf '%s %s\n' "$b" "$work/obj/$(basename "$b" .cpp).o"; done |
  (cd "$src" && xargs -P "$jobs" -n 2 bash -c \
    'exec "${@:1:$#-2}" -c "${@: -2:1}" -o "${@: -1}"' compile clang++ "${flags[@]}")
for t in "${targets[@]}"; do
  # shellcheck disable=SC2046  # object paths, one word each
  objects=($(for f in ${t#* }; do object_of "$f"; done | sort -u))
  # shellcheck disable=SC2046  # PCRE2's flags, one word each (the tokenizer's Split regexes)
  clang++ -fsanitize=fuzzer,address,undefined "${objects[@]}" $(pkg-config --libs libpcre2-8) \
    -o "$work/${t%% *}" &
  [ "$(jobs -rp | wc -l)" -lt "$jobs" ] || wait -n
done
while [ -n "$(jobs -rp)" ]; do wait -n; done  # each link's status, not only the last one's

# Each target fuzzes for `seconds`, `jobs` of them at a time; a failure's output is printed.
pids=() names=()
run() {  # name, seed files...
  local name=$1
  shift
  local corpus="$work/${name}_corpus"
  mkdir -p "$corpus"
  cp "$@" "$corpus/" 2>/dev/null || true
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
  (cd "$work" && exec ./"$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len="${max_len:-65536}" -print_final_stats=1 "$corpus" >"$work/$name.log" 2>&1) &
  pids+=($!) names+=("$name")
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
failed=0
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    grep -h "stat::number_of_executed_units" "$work/${names[$i]}.log" | sed "s/^/${names[$i]}: /"
  else
    echo "${names[$i]} failed:"; cat "$work/${names[$i]}.log"; failed=1
  fi
done
[ "$failed" = 0 ] || exit 1
echo "fuzzing finished: no crash in ${seconds}s per target"
