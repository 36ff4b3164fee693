#!/usr/bin/env python3
"""check_layers.py SOURCE_ROOT: no include runs from a lower folder to a higher one.

The folders are the architecture, bottom to top:

    base < shm < transport < control < client < daemon < tests, examples

base/ holds what every folder uses (Status, Result, Error, JSON); shm/ the
segment ABI; transport/ the wire and its backends; control/ the control-socket
protocol and ferryctl; client/ libferry and libferry-ps; daemon/ ferryd. A file
may include its own folder and any folder below it, never one above.

Every `#include "..."` of every tracked C++ file is resolved the way the
compiler would (beside the file, then the project's include folders); an
include that names no project file (a system or generated header) is not a
layer edge and is skipped. Exit 0 when every edge runs down or sideways, 1
with one line per violation otherwise."""
import os
import re
import subprocess
import sys

LAYERS = ["base", "shm", "transport", "control", "client", "daemon", "tests", "examples"]
RANK = {name: i for i, name in enumerate(LAYERS)}
RANK["examples"] = RANK["tests"]  # the demos sit beside the tests, above everything they use
# Where `#include "x"` looks after the including file's own folder (meson's
# include_directories: the root, and the public header folders).
INCLUDE_DIRS = ["", "base/include", "client/include"]
SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def tracked(root):
    """The tree's C++ files: git's list (tracked and not ignored), else a walk
    that skips build trees (a source tree without .git)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True, timeout=60).stdout
        names = out.decode().split("\0")
    except (OSError, subprocess.SubprocessError):
        names = []
        for d, dirs, files in os.walk(root):
            rel = os.path.relpath(d, root)
            dirs[:] = [x for x in dirs if not (rel == "." and (x.startswith("build") or x.startswith(".")))]
            names += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return sorted(n for n in names if n.endswith(SUFFIXES) and os.path.isfile(os.path.join(root, n)))


def report(problems, checked):
    """Prints each problem and the summary line; the exit status."""
    for p in problems:
        print(p)
    print(f"{checked}, {len(problems)} problems")
    return 1 if problems else 0


def layer(path):
    top = path.split("/", 1)[0]
    return top if top in RANK else None


def resolve(root, including, name):
    for base in [os.path.dirname(including)] + INCLUDE_DIRS:
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def main(argv):
    if len(argv) != 2:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    root = argv[1]
    problems = []
    edges = 0
    for path in tracked(root):
        src_layer = layer(path)
        if src_layer is None:
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(root, path, m.group(1))
                if target is None:
                    continue
                dst_layer = layer(target)
                if dst_layer is None:
                    continue
                edges += 1
                if RANK[dst_layer] > RANK[src_layer]:
                    problems.append(f"{path}:{lineno}: {src_layer}/ includes {target} from {dst_layer}/, "
                                    f"a higher folder")
    return report(problems, f"{edges} project includes checked")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
