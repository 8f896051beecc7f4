#!/usr/bin/env bash
# ctest's entry to openai_client_test.py: runs it with the venv of scripts/setup-test-venv.sh,
# or exits 77 (ctest's SKIPPED, never a pass) saying why when `make test` could not make it.
#   run_openai_client_test.sh VENV SWITCHYARD MODEL_CACHE
set -euo pipefail
venv=$1
here=$(cd "$(dirname "$0")" && pwd)
if ! "$venv/bin/python" -c "import openai" 2>/dev/null; then
  echo "SKIPPED: $venv has no openai client (scripts/setup-test-venv.sh could not make it)"
  exit 77
fi
exec "$venv/bin/python" -W error::ResourceWarning "$here/openai_client_test.py" "$2" "$3"
