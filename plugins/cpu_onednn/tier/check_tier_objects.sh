#!/usr/bin/env bash
# check_tier_objects.sh OBJECT... — the rule of docs/cpu-tiers.md for cpu_onednn's tier objects
# (*_avx2, *_avx512, *_amx: compiled for an instruction set the CPU may lack), checked on the
# objects the build made. Other objects are ignored. Exit 1, naming each breach, when a tier
# object:
#  1. has a dynamic initializer (.init_array/.ctors, _GLOBAL__sub_I_): it runs when the plugin is
#     loaded, on every CPU, before any tier is chosen;
#  2. defines a weak or unique symbol (an inline function or template instance with external
#     linkage): the linker keeps one copy for the whole plugin, and the tier's could become
#     everyone's;
#  3. exports a function not named for its instruction set (avx2, avx512, amx, vnni): a tier
#     exports its dispatch entries only.
set -uo pipefail
status=0
checked=0
breach() { echo "tier rule: $1" >&2; status=1; }
for obj in "$@"; do
  name=$(basename "$obj")
  [[ "$name" =~ _(avx2|avx512|amx)\.cpp\.o$ ]] || continue
  [ -f "$obj" ] || { breach "$obj does not exist"; continue; }
  checked=$((checked + 1))
  if readelf -S "$obj" | grep -qE '\.init_array|\.ctors'; then
    breach "$name has a dynamic initializer (a namespace-scope object built at load)"
  fi
  while read -r _ type sym; do
    case "$type" in
      W | V | u | i)
        [[ "$sym" == DW.ref.* ]] && continue  # the exception personality's data, not code
        breach "$name defines the weak symbol $(c++filt "$sym") (an inline function or template)"
        ;;
      T)
        demangled=$(c++filt "$sym")
        [[ "$demangled" =~ (avx2|avx512|amx|vnni) ]] ||
          breach "$name exports $demangled, not named for its instruction set"
        ;;
    esac
  done < <(nm --defined-only "$obj")
done
# A check that saw no tier object checked nothing: that is a breach of its own.
[ "$checked" -gt 0 ] || breach "no tier object among the $# arguments"
exit $status
