#!/usr/bin/env python3
"""check_nodiscard.py SOURCE -- COMPILER [ARGS...]: Status and Result stay [[nodiscard]].

Compiles SOURCE (nodiscard_send.cpp) with the given compiler command line
plus -fsyntax-only -Werror=unused-result four times: as it is, where every
result is used, it must compile; with DROP_SEND (the Status of
Client::send thrown away), DROP_STATUS (a Status from a function with no
attribute of its own) and DROP_RESULT (a Result<int> likewise) it must fail,
and fail for the dropped result (the compiler names the unused result),
not for anything else. Exit 0 when all four hold, 1 otherwise."""
import subprocess
import sys

CASES = [None, "DROP_SEND", "DROP_STATUS", "DROP_RESULT"]


def compile_case(cmd, source, case):
    args = cmd + ["-fsyntax-only", "-Werror=unused-result", source]
    if case:
        args.append("-D" + case)
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    source, cmd = argv[1], argv[3:]
    problems = 0
    for case in CASES:
        r = compile_case(cmd, source, case)
        output = r.stdout + r.stderr
        if case is None:
            ok = r.returncode == 0
            what = "compiles with every result used"
        else:
            ok = r.returncode != 0 and ("unused-result" in output or "nodiscard" in output)
            what = f"{case} fails to compile for the dropped result"
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            problems += 1
            print(output[-2000:])
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
