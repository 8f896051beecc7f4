#!/usr/bin/env bash
# ctest's entry to make_test_model_gguf_test.py: runs it with the venv of
# scripts/setup-test-venv.sh, or exits 77 (ctest's SKIPPED, never a pass) saying why when
# `make test` could not make it.
#   run_make_test_model_gguf_test.sh VENV SWITCHYARD
set -euo pipefail
venv=$1
here=$(cd "$(dirname "$0")" && pwd)
if ! "$venv/bin/python" -c "import gguf, numpy" 2>/dev/null; then
  echo "SKIPPED: $venv has no gguf and numpy (scripts/setup-test-venv.sh could not make it)"
  exit 77
fi
exec "$venv/bin/python" "$here/make_test_model_gguf_test.py" "$2"
