#!/usr/bin/env bash
# Installs the build into a prefix, MOVES the prefix (the tree must be relocatable),
# builds examples/plugin_skeleton (a C plugin and a C++ one, on the installed plugin kit)
# against the installed package only, loads both, and runs `switchyard conformance` on both
# against the installed reference plugin (docs/plugin-guide.md), saving their reports; then
# builds the installed examples/embed_c (C99) against the installed libswitchyard and runs it.
set -euo pipefail
build=$1
plugin_src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
mv "$work/prefix" "$work/moved"
sy="$work/moved/bin/switchyard"

# The relocated CLI finds its own plugins relative to itself, with their conformance reports
# (written at build time) still matching them: their kernels are verified.
"$sy" plugins --plugin cpu_onednn >/dev/null
# (The listing is captured first: grep -q closing a pipe early would SIGPIPE the writer.)
caps=$("$sy" caps --plugin cpu_onednn --json)
grep -q '"state": "verified"' <<<"$caps"
test -f "$work/moved/include/switchyard/plugin_api.h"
test -f "$work/moved/include/switchyard/op_contract.h"
test -f "$work/moved/include/switchyard/plugin_kit/cxx_edge/plugin_edge.hpp"

cmake -S "$plugin_src" -B "$work/ext" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/moved" >/dev/null
cmake --build "$work/ext" >/dev/null
test -f "$work/ext/plugins/skeleton.json"
test -f "$work/ext/plugins/skeleton_cxx.json"

# Exit 5 would mean the named plugin failed to load.
"$sy" plugins --plugin skeleton --plugin-dir "$work/ext/plugins"
"$sy" plugins --plugin skeleton_cxx --plugin-dir "$work/ext/plugins"
# The plugin author's last step: conformance passes, and the report beside the plugin marks its
# kernels verified.
test -f "$work/moved/lib/switchyard/reference/reference.so" || test -f "$work/moved/lib64/switchyard/reference/reference.so"
for p in skeleton skeleton_cxx; do
  "$sy" conformance "$work/ext/plugins/$p.so" --output "$work/ext/plugins/$p.conformance.json"
done
caps=$("$sy" caps --plugin-dir "$work/ext/plugins" --json)
grep -q '"state": "verified"' <<<"$caps"
echo "out-of-tree plugins built against the installed plugin kit load and pass conformance"

# A program embedding Switchyard: examples/embed_c as installed, C99, built with the installed
# header and libswitchyard only, generates 16 tokens from a test model (plugins found beside
# the relocated library).
libdir=$(dirname "$(find "$work/moved" -name 'libswitchyard.so' | head -n 1)")
test -f "$work/moved/include/switchyard/host.h"
cc -std=c99 -pedantic -Werror -o "$work/embed_c" \
   "$work/moved/share/switchyard/examples/embed_c/main.c" \
   -I"$work/moved/include" -L"$libdir" -lswitchyard -Wl,-rpath,"$libdir"
"$sy" make-test-model "$work/model" >/dev/null
out=$(env -u SWITCHYARD_PLUGIN_PATH "$work/embed_c" "$work/model" "the cat")
ids=$(grep '^ids:' <<<"$out")
test "$(wc -w <<<"$ids")" -eq 17  # "ids:" and 16 ids
echo "examples/embed_c built against the installed libswitchyard generates 16 tokens"
