"""``python3 -m ferry.ps.bench``: the Python parameter-server benchmark.

It takes the options of ``ferry-ps bench`` (``--workers``, ``--shards``,
``--keys``, ``--batch``, ``--dim``, ``--iters``, ``--socket``,
``--server-socket``, ``--target``, ``--json``) plus ``--baseline torch-rpc``,
and with ``--json`` prints as its last line one JSON object with the keys of
``ferry-ps bench --json``.

The benchmark, its torch.distributed.rpc baseline and their process
orchestration are not part of the library: they live with the project's
examples (``examples/python/`` in the source tree; a build tree copies them to
``BUILD/examples/python``; ``meson install`` puts them in
``PREFIX/share/ferry/examples/python``, ``pip install`` in the environment's
``ferry/examples/python``). This entry finds them and runs
``bench.py`` there. ``FERRY_EXAMPLES=DIR`` names another copy.
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
from pathlib import Path
from typing import List, Optional, Sequence

_MARKERS = ("bench.py", "launch.py", "rpc_baseline.py")
_INSTALLED = Path("share") / "ferry" / "examples" / "python"


def candidates() -> List[Path]:
    """Where the examples may be, in the order they are looked for."""
    out: List[Path] = []
    env = os.environ.get("FERRY_EXAMPLES")
    if env:
        out.append(Path(env))
    root = Path(__file__).resolve().parents[2]  # the folder holding ferry/
    out.append(root.parent.parent / "examples" / "python")  # a build tree: BUILD/client/python -> BUILD/examples/python
    out.append(root.parents[2] / _INSTALLED)  # PREFIX/lib/python3*/{site,dist}-packages -> PREFIX/share/...
    for scheme_prefix in (sysconfig.get_path("data"), sys.prefix, sys.base_prefix):
        out.append(Path(scheme_prefix) / _INSTALLED)
        # pip through meson-python 0.12: meson's datadir is the data scheme's root.
        out.append(Path(scheme_prefix) / _INSTALLED.relative_to("share"))
    return list(dict.fromkeys(out))


def examples_dir() -> Path:
    """The folder holding the benchmark's scripts; raises FileNotFoundError naming where it looked."""
    looked = candidates()
    for d in looked:
        if all((d / m).is_file() for m in _MARKERS):
            return d
    raise FileNotFoundError("ferry.ps.bench: the benchmark scripts (examples/python/bench.py) are in none of: %s "
                            "(set FERRY_EXAMPLES to the folder holding them)" % ", ".join(str(d) for d in looked))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs examples/python/bench.py's main() with these arguments; its exit status."""
    try:
        d = examples_dir()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    sys.path.insert(0, str(d))
    bench = importlib.import_module("bench")
    return int(bench.main(list(argv) if argv is not None else None) or 0)


if __name__ == "__main__":
    sys.exit(main())
