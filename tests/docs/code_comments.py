"""code_comments.py: what the comments in the project's code may name
(used by check_docs.py).

A comment is read by the next engineer, who can follow only what the
project contains. So a comment in code (C, C++, Python, shell, meson)
fails the check when it

- names a file the project does not have: a path (`daemon/loop/deadlines.cpp`,
  `ferry/client.h`) that no project file ends with, or a bare file name
  (`deadlines.cpp`) that no project file has, for the source, build and
  documentation suffixes below;
- names a guide the project does not contain (a numbered "habit" of one,
  or the planning notes' file names: check_docs.py's FORBIDDEN covers those
  everywhere);
- refers to an issue by its number: the tracker is not part of the
  project, so say what the thing is instead.

Names of files outside the project that comments legitimately cite (kernel
and rdma-core sources, system headers) are listed in EXTERNAL."""
import os
import re

CODE_SUFFIXES = (".c", ".cc", ".cpp", ".h", ".hpp", ".py", ".sh", ".build")
SHEBANG = re.compile(rb"^#!.*\b(bash|sh|python3?)\b")
# What a file name in a comment looks like: an optional path, a name, one of these suffixes.
FILE_NAME = re.compile(
    r"(?<![\w./-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:cpp|cc|c|hpp|h|py|sh|md|build|list|map|symbols))"
    r"(?![\w/-])")
HABIT = re.compile(r"\bhabits?\s+\d+", re.I)
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.I)
# Files of other projects that comments cite on purpose (where a behaviour
# of the kernel, rdma-core, glibc or a library comes from).
EXTERNAL = {
    "rxe_resp.c", "rxe_req.c", "rxe_comp.c",  # the Linux kernel's Soft-RoCE driver
    "infiniband/verbs.h", "rdma/rdma_cma.h",  # rdma-core
}
DOCSTRING = re.compile(r'^[ \t]*[rbuRBU]?("""|\'\'\')(.*?)\1', re.S | re.M)


def code_files(files, root):
    """The project files whose comments are checked: by suffix, or an
    extensionless script with a shell or Python shebang."""
    for name in files:
        base = os.path.basename(name)
        if name.endswith(CODE_SUFFIXES) or base == "meson.build":
            yield name
        elif "." not in base:
            try:
                with open(os.path.join(root, name), "rb") as f:
                    if SHEBANG.match(f.readline()):
                        yield name
            except OSError:
                pass


def c_comments(text):
    """(line, comment text) of // and /* */ comments, outside string and
    character literals."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield line, text[i + 2:end]
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                yield line + k, part
            line += text.count("\n", i, end)
            i = end + 2
        elif c in "\"'":
            i += 1
            while i < n and text[i] != c and text[i] != "\n":
                i += 2 if text[i] == "\\" else 1
            i += 1
        else:
            i += 1


def hash_comments(text):
    """(line, comment text) of # comments (shell, Python, meson): a # that
    starts a word, outside quotes on its line. Shebangs are not comments."""
    for number, line in enumerate(text.split("\n"), 1):
        if number == 1 and line.startswith("#!"):
            continue
        quote = None
        for i, c in enumerate(line):
            if quote:
                if c == "\\" and quote != "'":
                    continue
                if c == quote and (i == 0 or line[i - 1] != "\\" or quote == "'"):
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "#" and (i == 0 or line[i - 1] in " \t;(") and not line[i - 1:i + 2] == "$#":
                yield number, line[i + 1:]
                break


def docstrings(text):
    """(line, text) of each line of the triple-quoted strings that stand as
    statements (docstrings: a Python file's comments too)."""
    for m in DOCSTRING.finditer(text):
        first = text.count("\n", 0, m.start(2)) + 1
        for k, part in enumerate(m.group(2).split("\n")):
            yield first + k, part


def comments_of(name, text):
    if name.endswith((".c", ".cc", ".cpp", ".h", ".hpp")):
        return list(c_comments(text))
    found = list(hash_comments(text))
    if name.endswith(".py"):
        found += list(docstrings(text))
    return found


def placeholder(token):
    """A.B.C (an address pattern), RESULTS/cmd.sh (a folder named in
    capitals: a placeholder the comment explains), not a file name."""
    base = os.path.basename(token)
    return base.count(".") > 1 or any(part.isupper() for part in token.split("/")[:-1])


def names_a_project_file(token, paths, basenames):
    token = token.lstrip("./")
    if "/" in token:
        return any(p == token or p.endswith("/" + token) for p in paths)
    return token in basenames


def check(root, files, problems):
    paths = set(files)
    basenames = {os.path.basename(f) for f in files}
    # Folders too: a comment may name one ("tests/rdma/").
    for f in files:
        d = os.path.dirname(f)
        while d:
            paths.add(d)
            d = os.path.dirname(d)
    checked = 0
    for name in code_files(files, root):
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        checked += 1
        for line, comment in comments_of(name, text):
            for m in FILE_NAME.finditer(comment):
                token = m.group(1).rstrip(".")
                if token in EXTERNAL or os.path.basename(token) in EXTERNAL or placeholder(token):
                    continue
                if not names_a_project_file(token, paths, basenames):
                    problems.append(f"{name}:{line}: a comment names {token}, which the project does not have")
            for m in HABIT.finditer(comment):
                problems.append(f"{name}:{line}: a comment cites \"{m.group(0)}\" of a guide the project does not "
                                "contain: say the rule itself")
            for m in ISSUE.finditer(comment):
                problems.append(f"{name}:{line}: a comment cites \"{m.group(0)}\": the issue tracker is not part of "
                                "the project; say what the thing is")
    return checked
