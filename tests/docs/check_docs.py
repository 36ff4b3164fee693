#!/usr/bin/env python3
"""check_docs.py SOURCE_ROOT: the documentation's own checks.

- README.md is under 12 KiB (it is the front page; the rest lives in docs/).
- Every relative link in a Markdown file of the project (README.md, docs/,
  and any other tracked *.md) names a file or folder that exists, and a
  #fragment names a heading of its target.
- No project file names the planning notes that live beside the project but
  not in it (the names are assembled below so this file does not match).
- No comment in code names a file the project lacks, a numbered habit of a
  guide it does not contain, or an issue by number (code_comments.py).
- Every code block in README.md or docs/user-guide.md preceded by
  `<!-- example: PATH -->` equals the file PATH byte for byte, and every
  source file under EXAMPLE_DIRS is shown that way in one of them (so the README's examples are the ones the build compiles
  and tests/docs/run_examples.py runs).
Exit 0 when all hold, 1 with one line per problem otherwise."""
import os
import re
import subprocess
import sys

import code_comments

README_LIMIT = 12 * 1024
EXAMPLE_DIRS = ["client/examples/hello", "client/python/examples"]
# Where an example may be shown (the README keeps the first ones; the rest in the user guide).
EXAMPLE_DOCS = ["README.md", "docs/user-guide.md"]
EXAMPLE_SUFFIXES = (".c", ".cpp", ".py")
FORBIDDEN = [stem + ".md" for stem in ("DES" + "IGN", "STY" + "LE", "RDMA" + "-VM")]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXAMPLE_MARK = re.compile(r"^<!--\s*example:\s*(\S+)\s*-->\s*$")


def project_files(root):
    """Tracked and untracked-but-not-ignored files (git), else a walk that
    skips build trees and caches."""
    if os.path.isdir(os.path.join(root, ".git")) or os.path.isfile(os.path.join(root, ".git")):
        try:
            out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                                  "--exclude-standard"], capture_output=True, check=True, timeout=60).stdout
            names = [n for n in out.decode().split("\0") if n]
            return sorted(n for n in names if os.path.isfile(os.path.join(root, n)))
        except (OSError, subprocess.SubprocessError):
            pass
    found = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if not (rel == "." and (x.startswith("build") or x in (".git", ".vm-cache")))
                   and x != "__pycache__"]
        found += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return sorted(found)


def prose_lines(text):
    """(line number, line) outside fenced code blocks, inline code removed."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`+[^`]*`+", "", line)


def paragraphs(text):
    """(first line number, text) of each run of non-blank prose lines, so a
    link whose text wraps onto the next line is still seen."""
    start, lines, last = None, [], None
    for n, line in prose_lines(text):
        if not line.strip() or (last is not None and n != last + 1):
            if lines:
                yield start, "\n".join(lines)
            start, lines = None, []
        if line.strip():
            start = n if start is None else start
            lines.append(line)
        last = n
    if lines:
        yield start, "\n".join(lines)


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    result = set()
    with open(path, encoding="utf-8") as f:
        for _, line in prose_lines(f.read()):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            result.add(base if n == 0 else f"{base}-{n}")
    return result


def check_links(root, md, problems):
    path = os.path.join(root, md)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, para in paragraphs(text):
        targets = [m.group(1) for m in LINK.finditer(para)]
        targets += [m.group(1) for m in (REFDEF.match(line) for line in para.split("\n")) if m]
        for target in targets:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                continue  # absolute URL: not ours to check offline
            file_part, _, fragment = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            rel = os.path.relpath(dest, root)
            where = f"{md}:{n}: link {target!r}"  # n: first line of its paragraph
            if rel.startswith(".."):
                problems.append(f"{where} leaves the repository")
            elif not os.path.exists(dest):
                problems.append(f"{where}: {rel} does not exist")
            elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                problems.append(f"{where}: {rel} has no heading #{fragment}")


def check_examples_in(root, doc, shown, problems):
    with open(os.path.join(root, doc), encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = EXAMPLE_MARK.match(lines[i])
        i += 1
        if not m:
            continue
        name = m.group(1)
        if i >= len(lines) or not FENCE.match(lines[i]):
            problems.append(f"{doc}:{i}: example marker for {name} is not followed by a code block")
            continue
        start = i + 1
        end = start
        while end < len(lines) and not FENCE.match(lines[end]):
            end += 1
        block = "\n".join(lines[start:end]) + "\n"
        i = end + 1
        shown.add(name)
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                want = f.read()
        except OSError as e:
            problems.append(f"{doc}:{start}: example {name}: {e.strerror}")
            continue
        if block != want:
            problems.append(f"{doc}:{start}: the block shown for {name} differs from the file")


def check_examples(root, problems):
    shown = set()
    for doc in EXAMPLE_DOCS:
        check_examples_in(root, doc, shown, problems)
    for d in EXAMPLE_DIRS:
        for entry in sorted(os.listdir(os.path.join(root, d))):
            name = f"{d}/{entry}"
            if entry.endswith(EXAMPLE_SUFFIXES) and name not in shown:
                problems.append(f"example {name} is shown in none of {EXAMPLE_DOCS} (<!-- example: {name} --> + code block)")


def main():
    if len(sys.argv) != 2:
        print("usage: check_docs.py SOURCE_ROOT", file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    problems = []
    size = os.path.getsize(os.path.join(root, "README.md"))
    if size >= README_LIMIT:
        problems.append(f"README.md is {size} bytes, the limit is under {README_LIMIT}")
    files = project_files(root)
    for md in (f for f in files if f.endswith(".md")):
        check_links(root, md, problems)
    needles = [n.encode() for n in FORBIDDEN]
    for name in files:
        try:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
        except OSError:
            continue
        for needle in needles:
            if needle in data:
                line = data[:data.index(needle)].count(b"\n") + 1
                problems.append(f"{name}:{line}: names {needle.decode()}, a file the project does not contain")
    check_examples(root, problems)
    commented = code_comments.check(root, files, problems)
    for p in problems:
        print(p)
    print(f"checked {size} README bytes, {sum(f.endswith('.md') for f in files)} Markdown files, "
          f"{len(files)} project files, the comments of {commented} code files: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
