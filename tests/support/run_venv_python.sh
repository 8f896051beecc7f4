#!/usr/bin/env bash
# ctest's entry to a Python test: runs `python ARGS...` with the venv of
# scripts/setup-test-venv.sh, or exits 77 (ctest's SKIPPED, never a pass) saying why when
# `make test` could not make it with the modules the test imports.
#   run_venv_python.sh VENV "MODULE[,MODULE...]" ARGS...
set -euo pipefail
venv=$1 modules=$2
shift 2
if ! "$venv/bin/python" -c "import $modules" 2>/dev/null; then
  echo "SKIPPED: $venv lacks $modules (scripts/setup-test-venv.sh could not make it)"
  exit 77
fi
exec "$venv/bin/python" "$@"
