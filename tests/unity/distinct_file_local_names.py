#!/usr/bin/env python3
"""The unity builds' guard (SWITCHYARD_UNITY_BUILD): no two sources of one unity target define a
function of the same name at file scope.

A unity build puts up to 16 sources in one translation unit, so their anonymous namespaces merge.
Two helpers of the same signature then fail to compile, but two of different signatures become
one overload set, and a call may silently pick the other file's: tool_calls.cpp's
`std::string_view trimmed(std::string_view)` called on a std::string would have taken
harmony.cpp's `std::string trimmed(const std::string&)` and kept a view of its dead result.
So a name is defined at file scope in one source of a target only.

The targets and their sources are CMake's (sy_unity_build in the top-level CMakeLists.txt),
written at generate time as one line a target: name, source folder and `;`-separated sources.
Reads clang-formatted sources (.clang-format): a definition's name is on the line that starts it.
  distinct_file_local_names.py BUILD_DIR/unity_sources.tsv
"""
import collections
import pathlib
import re
import sys

# A definition at file scope: the declaration starts in column 0, the name is followed by "(".
DEFINITION = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:(?:static|inline|constexpr|\[\[\w+\]\])\s+)*"
                        r"[A-Za-z_][\w:<>,\s*&]*?[\s*&]([A-Za-z_]\w*)\s*\(")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "else"}


def unity_targets(manifest):
    """Each unity target's C++ sources, from the manifest CMake wrote."""
    targets = {}
    for line in manifest.read_text().splitlines():
        name, folder, sources = line.split("\t")
        paths = (pathlib.Path(folder) / s for s in sources.split(";") if s)
        targets[name] = sorted(p for p in paths if p.suffix == ".cpp")
    return targets


def clashes(files):
    where = collections.defaultdict(set)
    for f in files:
        for line in f.read_text().splitlines():
            m = DEFINITION.match(line)
            if m and m.group(1) not in KEYWORDS:
                where[m.group(1)].add(f)
    # By path: two folders' files of one name are two files.
    return {name: sorted(str(f) for f in fs) for name, fs in where.items() if len(fs) > 1}


def main():
    targets = unity_targets(pathlib.Path(sys.argv[1]))
    # The CLI, the test program and the core's libraries: a manifest without them is not this
    # project's (or CMake wrote it wrong), and passing on it would guard nothing.
    expected = {"switchyard", "switchyard_tests", "switchyard_planner", "switchyard_executor"}
    if not expected <= targets.keys() or not all(targets.values()):
        sys.exit(f"{sys.argv[1]} lists {sorted(targets)}: expected {sorted(expected)} among them, "
                 f"each with sources")
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
