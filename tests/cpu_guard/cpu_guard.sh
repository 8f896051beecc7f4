#!/usr/bin/env bash
# cpu_guard.sh QEMU_CPU TIER SWITCHYARD WORKDIR [GGUF] — the real binary on a CPU this machine is
# not (docs/cpu-tiers.md, "The rule"): under `qemu-x86_64 -cpu QEMU_CPU` (TCG, which has no
# AVX-512; Haswell has AVX2, Nehalem no AVX, qemu64 only baseline x86-64):
#  1. `switchyard plugins` loads cpu_onednn on tier TIER (no SIGILL while loading);
#  2. `switchyard conformance cpu_onednn --quick` passes on that tier;
#  3. eight greedy tokens of a tiny test model equal the native run forced to TIER
#     (SWITCHYARD_CPU_ISA: the same arithmetic), and, when GGUF is given (the real SmolLM2
#     Q4_1), four of its tokens do too.
# Exit 0 when all hold, 1 naming the first that does not.
set -uo pipefail
CPU=${1:?qemu cpu model} TIER=${2:?tier} SY=${3:?switchyard binary} WORK=${4:?work dir}
GGUF=${5:-}
mkdir -p "$WORK"
fail() { echo "cpu guard ($CPU): $*" >&2; exit 1; }
command -v qemu-x86_64 >/dev/null ||
  fail "qemu-x86_64 not found (Debian qemu-user; make test installs it)"
# The features TCG cannot give are left out, or qemu warns on every new thread and the
# plugin's "output" would be qemu's.
case "$CPU" in
  Haswell) QCPU="Haswell,-pcid,-x2apic,-tsc-deadline,-hle,-rtm,-invpcid" ;;
  *) QCPU="$CPU" ;;
esac
under() { qemu-x86_64 -cpu "$QCPU" "$@"; }

out=$(under "$SY" plugins 2>&1) || fail "switchyard plugins exited $? under qemu: $(tail -3 <<<"$out")"
grep -E '^cpu_onednn +loaded' <<<"$out" | grep -q "\[$TIER tier" ||
  fail "cpu_onednn is not loaded on the $TIER tier: $(grep cpu_onednn <<<"$out")"

out=$(under "$SY" conformance cpu_onednn --quick 2>&1) ||
  fail "conformance exited $?: $(grep -v ' pass ' <<<"$out" | tail -5)"
tail -1 <<<"$out" | grep -q '^PASS' || fail "conformance: $(tail -1 <<<"$out")"

ids() {  # the generated ids of a run's --json on stdin
  python3 -c 'import json,sys
t = sys.stdin.buffer.read().decode("utf-8", "replace")
print(json.loads(t[t.index("{"):])["generated_ids"])'
}
same_tokens() {  # same_tokens MODEL PROMPT COUNT
  local native guarded
  native=$(SWITCHYARD_CPU_ISA=$TIER "$SY" run "$1" --prompt "$2" --max-tokens "$3" --ignore-eos \
    --json 2>/dev/null | ids) || fail "the native run of $1 failed"
  guarded=$(under "$SY" run "$1" --prompt "$2" --max-tokens "$3" --ignore-eos --json \
    2>/dev/null | ids) || fail "the run of $1 under qemu failed"
  [ "$native" = "$guarded" ] || fail "$1: tokens $guarded under qemu, $native natively"
  echo "$CPU: $1: $guarded"
}
"$SY" make-test-model "$WORK/tiny" >/dev/null || fail "make-test-model failed"
same_tokens "$WORK/tiny" "hello world" 8
if [ -n "$GGUF" ] && [ -f "$GGUF" ]; then
  same_tokens "$GGUF" "The capital of France is" 4
else
  echo "$CPU: the real SmolLM2 is not cached (make test-assets): its tokens not compared"
fi
echo "cpu guard ($CPU): cpu_onednn on the $TIER tier, conformance and tokens as natively"
