#!/usr/bin/env python3
"""The unity builds' guard (SWITCHYARD_UNITY_BUILD): no two sources of one unity target define a
function of the same name at file scope.

A unity build puts up to 16 sources in one translation unit, so their anonymous namespaces merge.
Two helpers of the same signature then fail to compile, but two of different signatures become
one overload set, and a call may silently pick the other file's: tool_calls.cpp's
`std::string_view trimmed(std::string_view)` called on a std::string would have taken
harmony.cpp's `std::string trimmed(const std::string&)` and kept a view of its dead result.
So a name is defined at file scope in one source of a target only. A using-declaration at file
scope (`using test::attr;`) brings a name into the same merged namespace, so it counts too: a
name one file defines and another brings in clashes, as do two files bringing in two different
entities of one name; two files bringing in the same one do not.

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
# A using-declaration at file scope: `using ns::name;` (not `using namespace`, not an alias).
USING = re.compile(r"^using\s+((?:[\w]*::)+)(\w+)\s*;")


def unity_targets(manifest):
    """Each unity target's C++ sources, from the manifest CMake wrote."""
    targets = {}
    for line in manifest.read_text().splitlines():
        name, folder, sources = line.split("\t")
        paths = (pathlib.Path(folder) / s for s in sources.split(";") if s)
        targets[name] = sorted(p for p in paths if p.suffix == ".cpp")
    return targets


# Namespaces as clang-format writes them: opened on a line of their own, closed by a commented brace.
OPEN = re.compile(r"^namespace\s*([\w:]*)\s*\{\s*$")
CLOSE = re.compile(r"^\}\s*// namespace")


def names_in(f):
    """(name, what it is, whether a definition) for each file-scope definition and
    using-declaration of source `f`: a definition in an anonymous namespace is the source's own
    (by path: two folders' files of one name are two files), one in a named namespace is that
    namespace's; a using-declaration is the entity it names, as written."""
    stack = []
    for line in f.read_text().splitlines():
        if m := OPEN.match(line):
            stack.append(m.group(1) or None)
        elif CLOSE.match(line) and stack:
            stack.pop()
        elif (m := DEFINITION.match(line)) and m.group(1) not in KEYWORDS:
            scope = str(f) if None in stack else "::".join(stack)
            yield m.group(1), f"{scope}::{m.group(1)}", True
        elif u := USING.match(line):
            yield u.group(2), (u.group(1) + u.group(2)).lstrip(":"), False


def clashes(files):
    """Each name that two sources would give two meanings in one unit: defined in both, or
    defined in one and brought in by a using-declaration of something else in another, or
    brought in as two different entities. {name: [source, ...]}"""
    defined = collections.defaultdict(set)  # name -> {source}
    whats = collections.defaultdict(set)  # name -> {what it is}
    sources = collections.defaultdict(set)  # name -> {source}
    for f in files:
        for name, what, definition in names_in(f):
            if definition:
                defined[name].add(str(f))
            whats[name].add(what)
            sources[name].add(str(f))
    out = {}
    for name, ws in whats.items():
        # `using test::x;` names the x a source defines in namespace sy::test.
        entities = {next((d for d in ws if d.endswith("::" + w)), w) for w in ws}
        if len(defined[name]) > 1 or len(entities) > 1:
            out[name] = sorted(sources[name])
    return out


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
            print(f"{target}: `{name}` is defined or brought in (using) at file scope in "
                  f"{', '.join(fs)}: one unity unit would hold both (name them apart, or share one)")
            bad += 1
    checked = sum(len(f) for f in targets.values())
    print(f"{checked} sources of {len(targets)} unity targets: {bad} clash(es)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
