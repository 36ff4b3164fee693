"""How long a checkpoint of a large table takes, and what memory it needs.

One embedding table (``--rows`` x ``--dim``, Adagrad, so its state is saved
too) on two shard processes (``python3 -m ferry.ps.server``) over one
ferryd, filled with random rows first. Arms, each ``--repeat`` times into a fresh
directory under ``--dir``, medians printed:

- ``save_tables``: ``ferry.ps.save_tables`` (streamed in ``--chunk-mb``
  chunks) of the values and the state;
- ``load_tables``: ``ferry.ps.load_tables`` of that directory;
- ``save_shards``: ``ferry.ps.save_shards``, each shard writing its own
  part into a directory of its own (as on a host of its own);
- ``start``, ``restore``: two fresh shard processes started empty, and
  with ``--restore`` from that checkpoint, until both serve;
- ``whole``: what a state dict does, the whole table pulled into this
  process at once and written with ``numpy.save``, values and state;
- ``pulls``: what the shards' other callers see during a ``save_shards``:
  a second worker (a thread here, its own ferry client) pulls
  ``--pull-keys`` random rows in a loop, once while ``save_shards`` runs
  and once for as long with no save; the pulls' latency, P50, P99 and
  the longest, in milliseconds, each phase.

Each arm also reports the CPU time this process (the worker) spent, and
how far it raised this process's peak resident memory (``ru_maxrss``,
which only grows: the streamed arms run first, so an arm's figure is what
it needed beyond the arms before it; the save arm's counts from before one
untimed save that warms the page cache). Every run starts after os.sync(),
so that none pays for writing back the one before.

    FERRY_SOCKET=... /usr/bin/python3 examples/python/checkpoint_bench.py --rows 1000000 --dim 64 [--json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

import numpy as np

import ferry.ps as ps
from launch import ferry_shards


def peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def fill(w: Any, rows: int, dim: int, chunk: int) -> None:
    rng = np.random.default_rng(1)
    for first in range(0, rows, chunk):
        last = min(rows, first + chunk)
        keys = np.arange(first, last, dtype=np.int64)
        w.assign("t", keys, rng.standard_normal((last - first, dim), dtype=np.float32))
        w.assign_state("t", keys, rng.random((last - first, dim), dtype=np.float32))


def whole(w: Any, rows: int, out: str) -> None:
    os.mkdir(out)
    keys = np.arange(rows, dtype=np.int64)
    np.save(os.path.join(out, "t.values.npy"), np.asarray(w.pull("t", keys).gather()))
    np.save(os.path.join(out, "t.state.npy"), np.asarray(w.pull_state("t", keys).gather()))


def cpu_s() -> float:
    """CPU seconds this process (the worker's) used so far, user and system."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def restore(tables: Any, socket: str, shard_dirs: str, name: Optional[str]) -> None:
    """Two shard processes started from checkpoint ``name`` (None: empty): returns once both serve."""
    with ferry_shards(tables, 2, socket, "ckpt-restore-", checkpoint_dir=shard_dirs, restore=name):
        pass


def pull_latencies(w: Any, rows: int, n_keys: int, during: Any) -> List[float]:
    """Milliseconds of each pull of ``n_keys`` random rows that ``w`` made, back to back, while ``during()`` ran."""
    rng = np.random.default_rng(2)
    stop = threading.Event()
    lat: List[float] = []

    def loop() -> None:
        while not stop.is_set():
            keys = rng.integers(0, rows, n_keys)
            t0 = time.perf_counter()
            w.pull("t", keys).gather()
            lat.append((time.perf_counter() - t0) * 1e3)

    th = threading.Thread(target=loop)
    th.start()
    try:
        during()
    finally:
        stop.set()
        th.join()
    return lat


def latency_summary(lat: List[float]) -> Dict[str, float]:
    a = np.sort(np.asarray(lat))
    return {"pulls": int(a.size), "p50_ms": round(float(np.percentile(a, 50)), 3),
            "p99_ms": round(float(np.percentile(a, 99)), 3), "max_ms": round(float(a[-1]), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--chunk-mb", type=float, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the checkpoints go (default: a temporary directory)")
    ap.add_argument("--no-whole", action="store_true", help="leave the whole-table arm out")
    ap.add_argument("--pull-keys", type=int, default=512, help="rows a pull of the pulls arm asks for")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    socket = os.environ.get("FERRY_SOCKET", "")
    tables = [ps.Embedding("t", rows=args.rows, dim=args.dim, optimizer=ps.Adagrad(lr=0.1))]
    root = tempfile.mkdtemp(prefix="ferry-ckpt-", dir=args.dir)  # a bad --dir fails before any shard starts
    chunk_bytes = int(args.chunk_mb * (1 << 20))
    table_bytes = 2 * 4 * args.rows * args.dim  # values and state
    try:
        shard_dirs = os.path.join(root, "shards")
        with ferry_shards(tables, 2, socket, "ckpt-bench-", checkpoint_dir=shard_dirs), \
                ps.Worker(tables, 2, socket, service_prefix="ckpt-bench-") as w:
            fill(w, args.rows, args.dim, 4096)
            baseline = peak_bytes()
            # One save untimed (the first one's page cache and arena pages), its memory counted in the save arm's.
            warm = os.path.join(root, "warm")
            ps.save_tables(w, warm, chunk_bytes=chunk_bytes)
            shutil.rmtree(warm)
            arms: List[tuple] = [
                ("save_tables", lambda out: ps.save_tables(w, out, chunk_bytes=chunk_bytes)),
                ("load_tables", lambda out: ps.load_tables(w, os.path.join(root, "save_tables-0"),
                                                          chunk_bytes=chunk_bytes)),
                ("save_shards", lambda out: ps.save_shards(w, os.path.basename(out))),
                ("start", lambda out: restore(tables, socket, shard_dirs, None)),
                ("restore", lambda out: restore(tables, socket, shard_dirs, "save_shards-0")),
            ]
            if not args.no_whole:
                arms.append(("whole", lambda out: whole(w, args.rows, out)))
            result: Dict[str, Any] = {"rows": args.rows, "dim": args.dim, "chunk_mb": args.chunk_mb,
                                      "table_mb": table_bytes / 1e6}
            for name, run in arms:
                before = baseline if name == "save_tables" else peak_bytes()
                times, cpus = [], []
                for i in range(args.repeat):
                    out = os.path.join(root, "%s-%d" % (name, i))
                    os.sync()  # no run pays for the dirty pages of the one before
                    t0, c0 = time.perf_counter(), cpu_s()
                    run(out)
                    times.append(time.perf_counter() - t0)
                    cpus.append(cpu_s() - c0)
                    if name not in ("save_tables", "save_shards") or i > 0:
                        shutil.rmtree(out, ignore_errors=True)
                        for d in glob.glob(os.path.join(shard_dirs, "*", os.path.basename(out))):
                            shutil.rmtree(d, ignore_errors=True)
                med = statistics.median(times)
                result[name] = {"s": round(med, 3), "mb_per_s": round(table_bytes / 1e6 / med, 1),
                                "worker_cpu_s": round(statistics.median(cpus), 3),
                                "peak_growth_mb": round((peak_bytes() - before) / 1e6, 1)}
            with ps.Worker(tables, 2, socket, service_prefix="ckpt-bench-") as puller:
                saving: List[float] = []
                idle: List[float] = []
                for i in range(args.repeat):
                    os.sync()
                    t0 = time.perf_counter()
                    saving += pull_latencies(puller, args.rows, args.pull_keys,
                                             lambda: ps.save_shards(w, "pulls-%d" % i))
                    took = time.perf_counter() - t0
                    idle += pull_latencies(puller, args.rows, args.pull_keys, lambda: time.sleep(took))
                    for d in glob.glob(os.path.join(shard_dirs, "*", "pulls-%d" % i)):
                        shutil.rmtree(d, ignore_errors=True)
                result["pulls"] = {"keys": args.pull_keys, "idle": latency_summary(idle),
                                   "saving": latency_summary(saving)}
            if args.json:
                print(json.dumps(result))
            else:
                print("table %d x %d, values and Adagrad state: %.0f MB; chunks of %g MiB"
                      % (args.rows, args.dim, table_bytes / 1e6, args.chunk_mb))
                for name, _ in arms:
                    r = result[name]
                    print("%-12s %8.2f s  %8.1f MB/s  this process's CPU %.2f s  peak memory +%.1f MB"
                          % (name, r["s"], r["mb_per_s"], r["worker_cpu_s"], r["peak_growth_mb"]))
                for phase in ("idle", "saving"):
                    r = result["pulls"][phase]
                    print("pulls of %d rows, %-7s %6d pulls  P50 %.2f ms  P99 %.2f ms  longest %.2f ms"
                          % (args.pull_keys, phase + ":", r["pulls"], r["p50_ms"], r["p99_ms"], r["max_ms"]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
