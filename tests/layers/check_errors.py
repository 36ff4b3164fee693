#!/usr/bin/env python3
"""check_errors.py SOURCE_ROOT: one error convention, in every folder.

A step that can fail says why with ferry::Error (base/include/ferry/error.h):
it returns Error, and a value it makes goes to an out-parameter (or it
returns Result<T>, the public form). A reason handed back through a string
out-parameter (`bool f(..., std::string* error)`, `int g(..., std::string&
why)`) is the other convention, the one this check keeps out: the caller
cannot tell a Status from it, and an empty string standing for success is
easy to forget to set.

Every tracked C++ file is read; a parameter of type `std::string*` or
non-const `std::string&` named error, err, why, reason or errmsg is a
violation. Exit 0 when there is none, 1 with one line per violation."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_layers import report, tracked  # noqa: E402  (the same list of files, the same report)

OUT_REASON = re.compile(r"(?<!const )std::string\s*(\*|&)\s*(error|err|why|reason|errmsg)\b")


def main(argv):
    if len(argv) != 2:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    root = argv[1]
    problems = []
    files = 0
    for path in tracked(root):
        files += 1
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                code = line.split("//", 1)[0]
                m = OUT_REASON.search(code)
                if m:
                    problems.append(f"{path}:{lineno}: a reason returned through std::string{m.group(1)} "
                                    f"{m.group(2)}: return ferry::Error (base/include/ferry/error.h)")
    return report(problems, f"{files} files checked")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
