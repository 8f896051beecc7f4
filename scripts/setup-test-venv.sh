#!/usr/bin/env bash
# Makes the Python virtual environment the test helpers use, pinned: PyPI's `openai` client
# (which brings httpx2, its async HTTP client) for the serve tests and bench/serve_load.py,
# pydantic and jsonschema for the structured-output tests (the client's parse(), and the
# reference validator of every constrained answer), and
# PyPI `gguf` with numpy for scripts/make-requantized-smollm2.sh. Once, into VENV_DIR
# (default build/test-venv). Exits 0 when it is (already) there, 1 when it cannot be made (no
# python3-venv, no registry): the caller says what it skips.
set -euo pipefail

venv=${1:-build/test-venv}
want="openai==3.60.0 pydantic==2.14.4 jsonschema==4.26.0 gguf==0.19.0 numpy==2.4.6"
stamp="$venv/.switchyard-${want// /-}"

[[ -f "$stamp" ]] && exit 0
if ! python3 -m venv --help >/dev/null 2>&1; then
  echo "switchyard: cannot make $venv: python3 -m venv is not available (Debian: python3-venv)" >&2
  exit 1
fi
rm -rf "$venv"
python3 -m venv "$venv"
echo "switchyard: installing $want into $venv (once)" >&2
# shellcheck disable=SC2086  # one word per requirement
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check $want >"$venv/pip.log" 2>&1; then
  echo "switchyard: cannot install $want from PyPI: $(tail -n 1 "$venv/pip.log")" >&2
  exit 1
fi
touch "$stamp"
