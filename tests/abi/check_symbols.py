#!/usr/bin/env python3
"""check_symbols.py LIBRARY SYMBOLS [--version NODE] [--c-header HEADER]

The dynamic symbols a shared library exports are its ABI. This lists them
(nm -D --defined-only, demangled by c++filt) and fails on:

- a symbol that SYMBOLS does not list (an internal leaked out, or new public
  API that was not added to the list on purpose);
- a symbol SYMBOLS lists that the library does not export (the API lost
  something: an ABI break, or a stale list);
- a symbol without the version node NODE (the version script was not applied);
- with --c-header: a C function (ferry_*) exported but not declared in the
  header, or declared there but not exported.

SYMBOLS has one demangled name a line ('#' starts a comment); the C++
constructor and destructor variants (C1/C2, D0/D1/D2) demangle to one name.
Exit 0 when all hold, 1 with one line per problem otherwise."""
import argparse
import re
import subprocess
import sys

C_DECL = re.compile(r"\bFERRY_API\b[^;{]*?\b(ferry_\w+)\s*\(")


def exported(library):
    """[(mangled name, version node)] of the defined dynamic symbols, less
    the absolute symbols that name the version nodes themselves."""
    out = subprocess.run(["nm", "-D", "--defined-only", "--with-symbol-versions", library],
                         capture_output=True, text=True, check=True).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, name = parts[1], parts[2]
        if kind == "A":
            continue  # a version node's own symbol
        name, _, version = name.partition("@")
        symbols.append((name, version.lstrip("@")))
    return symbols


def demangle(names):
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True, text=True,
                         check=True).stdout
    return out.splitlines()


def listed(path):
    with open(path, encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")}


def declared_c_functions(header):
    with open(header, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    return set(C_DECL.findall(text))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("symbols")
    ap.add_argument("--version", help="the version node every exported symbol must carry")
    ap.add_argument("--c-header", help="a C header whose FERRY_API functions must be exactly the exported C ones")
    args = ap.parse_args()

    symbols = exported(args.library)
    names = demangle([name for name, _ in symbols])
    have = set(names)
    want = listed(args.symbols)
    problems = []
    for name in sorted(have - want):
        problems.append(f"exported but not in {args.symbols}: {name}")
    for name in sorted(want - have):
        problems.append(f"listed in {args.symbols} but not exported: {name}")
    if args.version:
        for (mangled, version), name in zip(symbols, names):
            if version != args.version:
                problems.append(f"{name} ({mangled}) has version {version or 'none'}, not {args.version}")
    if args.c_header:
        c_exported = {name for name, _ in symbols if name.startswith("ferry_")}
        c_declared = declared_c_functions(args.c_header)
        if not c_declared:
            problems.append(f"{args.c_header} declares no FERRY_API ferry_* function (the pattern went stale?)")
        for name in sorted(c_exported - c_declared):
            problems.append(f"C symbol {name} is exported but {args.c_header} does not declare it")
        for name in sorted(c_declared - c_exported):
            problems.append(f"{args.c_header} declares {name} but the library does not export it")
    for p in problems:
        print(p)
    print(f"{args.library}: {len(have)} exported names, {len(want)} listed: {len(problems)} problem(s)")
    if problems:
        print("Public API changed on purpose? Update the list (and the version script when a symbol "
              "joins a new version node).")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
