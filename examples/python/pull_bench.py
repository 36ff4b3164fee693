"""How a single large pull's time depends on where its rows land.

One embedding table (``--rows`` x ``--dim``, filled with random rows) on two
shard processes (``python3 -m ferry.ps.server``) over one ferryd, and two
workers with the same binaries in the same process, which differ only in
their tx arena:

- ``span``: ``--span-arena-mb`` (64 MiB by default), so every pull below
  half of it lands zero copy in a span of the arena (whole slabs side by
  side, each response written next to the one before);
- ``staged``: ``--staged-arena-mb`` (4 MiB), so every pull past 2 MiB lands
  in process memory, each response copied there once as it arrives.

For each size in ``--sizes-mb`` (each past the staged arm's half and within
the span arm's), both arms pull the same keys (the first rows of the table)
``--repeat`` times, taking turns, the order alternating; medians printed, and
``staged / span``. Each pull's ``Rows.zero_copy`` is checked against its arm.

    FERRY_SOCKET=... /usr/bin/python3 examples/python/pull_bench.py [--sizes-mb 3 4 8 16] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any, Dict, List

import numpy as np

import ferry.ps as ps
from launch import ferry_shards


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--sizes-mb", type=float, nargs="+", default=[3, 4, 8, 16])
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--span-arena-mb", type=int, default=64)
    ap.add_argument("--staged-arena-mb", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    socket = os.environ.get("FERRY_SOCKET", "")
    row_bytes = 4 * args.dim
    for mb in args.sizes_mb:
        nbytes = int(mb * 2**20) // row_bytes * row_bytes
        if not args.staged_arena_mb * 2**19 < nbytes <= args.span_arena_mb * 2**19 or nbytes // row_bytes > args.rows:
            raise SystemExit("--sizes-mb %g: want more than half the staged arena (%g MB), at most half the span "
                             "arena (%g MB) and at most --rows rows" % (mb, args.staged_arena_mb / 2,
                                                                       args.span_arena_mb / 2))
    tables = [ps.Embedding("t", rows=args.rows, dim=args.dim)]
    workers: Dict[str, Any] = {}
    with ferry_shards(tables, 2, socket, "pull-bench-"):
        try:
            workers = {arm: ps.Worker(tables, 2, socket, service_prefix="pull-bench-", tx_bytes=mib << 20)
                       for arm, mib in (("span", args.span_arena_mb), ("staged", args.staged_arena_mb))}
            run(args, workers)
        finally:
            for w in workers.values():
                w.close()


def run(args: argparse.Namespace, workers: Dict[str, Any]) -> None:
    """Fill the table, then time each size's pulls in both arms and print the medians."""
    row_bytes = 4 * args.dim
    rng = np.random.default_rng(1)
    for first in range(0, args.rows, 4096):
        keys = np.arange(first, min(args.rows, first + 4096), dtype=np.int64)
        workers["span"].assign("t", keys, rng.standard_normal((keys.size, args.dim), dtype=np.float32))
    results: List[Dict[str, Any]] = []
    for mb in args.sizes_mb:
        keys = np.arange(int(mb * 2**20) // row_bytes, dtype=np.int64)
        times: Dict[str, List[float]] = {arm: [] for arm in workers}
        for i in range(args.repeat):
            order = list(workers) if i % 2 == 0 else list(reversed(list(workers)))
            for arm in order:
                t0 = time.perf_counter()
                rows = workers[arm].pull("t", keys)
                times[arm].append(time.perf_counter() - t0)
                if rows.zero_copy != (arm == "span"):
                    raise SystemExit("%s: a pull of %g MB was %s" % (arm, mb, "zero copy" if rows.zero_copy
                                                                    else "staged"))
                del rows
        med = {arm: statistics.median(t) for arm, t in times.items()}
        r = {"mb": mb, "keys": int(keys.size), "span_ms": med["span"] * 1e3, "staged_ms": med["staged"] * 1e3,
             "staged_over_span": med["staged"] / med["span"]}
        results.append(r)
        if not args.json:
            print("%6g MB (%d keys): span %.2f ms, staged %.2f ms, staged / span %.2f" % (
                mb, r["keys"], r["span_ms"], r["staged_ms"], r["staged_over_span"]), flush=True)
    if args.json:
        print(json.dumps({"rows": args.rows, "dim": args.dim, "repeat": args.repeat, "results": results}))


if __name__ == "__main__":
    main()
