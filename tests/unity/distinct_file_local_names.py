#!/usr/bin/env python3
"""The unity builds' guard (SWITCHYARD_UNITY_BUILD): no two sources of one unity target define a
function of the same name at file scope.

A unity build puts up to 16 sources in one translation unit, so their anonymous namespaces merge.
Two helpers of the same signature then fail to compile, but two of different signatures become
one overload set, and a call may silently pick the other file's: tool_calls.cpp's
`std::string_view trimmed(std::string_view)` called on a std::string would have taken
harmony.cpp's `std::string trimmed(const std::string&)` and kept a view of its dead result.
So a name is defined at file scope in one source of a target only.

Reads clang-formatted sources (.clang-format): a definition's name is on the line that starts it.
  distinct_file_local_names.py SOURCE_DIR
"""
import collections
import pathlib
import re
import sys

# A definition at file scope: the declaration starts in column 0, the name is followed by "(".
DEFINITION = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:(?:static|inline|constexpr|\[\[\w+\]\])\s+)*"
                        r"[A-Za-z_][\w:<>,\s*&]*?[\s*&]([A-Za-z_]\w*)\s*\(")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "else"}


def unity_targets(src):
    """Each unity target's sources: every core library (one a folder) and the CLI."""
    targets = {f"core/{d.name}": sorted(d.glob("*.cpp")) for d in (src / "core").iterdir()
               if d.is_dir()}
    targets["apps/switchyard"] = sorted((src / "apps/switchyard").glob("*.cpp"))
    return targets


def clashes(files):
    where = collections.defaultdict(set)
    for f in files:
        for line in f.read_text().splitlines():
            m = DEFINITION.match(line)
            if m and m.group(1) not in KEYWORDS:
                where[m.group(1)].add(f.name)
    return {name: sorted(fs) for name, fs in where.items() if len(fs) > 1}


def main():
    src = pathlib.Path(sys.argv[1])
    targets = unity_targets(src)
    if len(targets) < 10 or not targets["apps/switchyard"]:
        sys.exit(f"found {len(targets)} targets under {src}: not a Switchyard source tree")
    bad = 0
    for target, files in sorted(targets.items()):
        for name, fs in sorted(clashes(files).items()):
            print(f"{target}: `{name}` is defined at file scope in {', '.join(fs)}: one unity "
                  f"unit would hold both (name them apart, or share one)")
            bad += 1
    checked = sum(len(f) for f in targets.values())
    print(f"{checked} sources of {len(targets)} unity targets: {bad} clash(es)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
