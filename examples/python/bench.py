"""The Python parameter-server benchmark: the workload shape of ``ferry-ps
bench`` (N worker processes x M shard processes; each iteration a Zipfian
batch of keys, one pull of their rows from every shard at once, a push of a
gradient for every pulled row), through ferry.ps or, with
``--baseline torch-rpc``, through the torch.distributed.rpc parameter server
(rpc_baseline.py beside this file) with the same keys, coalescing and placement.

    /usr/bin/python3 -m ferry.ps.bench --workers N --shards M --keys K --batch B --dim D --iters I
        [--socket PATH] [--server-socket PATH] [--target HOST:PORT] [--json] [--baseline torch-rpc]

With --json the last line of stdout is one JSON object with the keys of
``ferry-ps bench --json`` (pull/push mean, p50, p99 in us, ops_per_s,
cpu_us_per_op over every process: workers, shards, daemons) plus
samples_per_s and cpu_us_per_sample (a sample: one key of a batch).
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from typing import List

import numpy as np

import launch
from ferry.ps import tables as _tables


def percentile(sorted_ns, q):
    if not sorted_ns:
        return 0.0
    i = min(len(sorted_ns) - 1, max(0, int(round(q * (len(sorted_ns) - 1)))))
    return sorted_ns[i] / 1000.0


def summarize(ns):
    s = sorted(ns)
    mean = sum(s) / len(s) / 1000.0 if s else 0.0
    return {"mean": mean, "p50": percentile(s, 0.50), "p99": percentile(s, 0.99), "p999": percentile(s, 0.999),
            "max": s[-1] / 1000.0 if s else 0.0}


def zipf_cdf(keys, skew):
    w = 1.0 / np.power(np.arange(1, keys + 1, dtype=np.float64), skew)
    c = np.cumsum(w)
    return c / c[-1]


class Job:
    """One worker's measured loop (run inside a worker process by launch.py)."""

    def __init__(self, worker, tables, cfg, rank):
        import torch
        self.torch = torch
        self.w = worker
        self.cfg = cfg
        self.rank = rank
        self.cdf = zipf_cdf(cfg["keys"], cfg["skew"])
        self.rng = np.random.default_rng(cfg["seed"] * 1000 + rank)
        self.grad = torch.empty(cfg["batch"], cfg["dim"])
        for _ in range(cfg["warmup"]):
            self.step(None, None)

    def keys(self):
        k = np.searchsorted(self.cdf, self.rng.random(self.cfg["batch"]))
        return np.minimum(k, len(self.cdf) - 1).astype(np.int64)

    def step(self, pulls, pushes):
        keys = self.keys()
        t0 = time.perf_counter_ns()
        rows = self.w.pull("rows", keys)
        t1 = time.perf_counter_ns()
        u = rows.rows.shape[0]
        g = self.grad[:u]
        self.torch.mul(rows.rows, 1e-3, out=g)  # the "model": a gradient from the rows where they landed
        t2 = time.perf_counter_ns()
        self.w.push_rows(rows, g, wait=True)
        t3 = time.perf_counter_ns()
        if pulls is not None:
            pulls.append(t1 - t0)
            pushes.append(t3 - t2)
        return u

    def run(self):
        pulls: List[int] = []
        pushes: List[int] = []
        keys = 0
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        for _ in range(self.cfg["iters"]):
            keys += self.step(pulls, pushes)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        return {"pull_ns": pulls, "push_ns": pushes, "cpu_us": cpu * 1e6, "wall_s": wall, "distinct_keys": keys,
                "samples": self.cfg["iters"] * self.cfg["batch"]}


def bench_tables(keys, dim):
    # Zeros: a row's first touch costs no init arithmetic (ferry-ps bench's
    # "pattern" init is as cheap); the values do not matter here.
    return [_tables.Embedding("rows", rows=keys, dim=dim, optimizer=_tables.SGD(0.01), init=_tables.Zeros())]


def run(a, out_dir):
    system = "torch-rpc" if a.baseline == "torch-rpc" else "ferry"
    socket = a.socket or os.environ.get("FERRY_SOCKET") or "/run/ferry/ferryd.sock"
    server_socket = a.server_socket or socket
    pids = []
    if system == "ferry":
        for s in dict.fromkeys([socket, server_socket]):
            pid = launch.daemon_pid(s)
            if pid is None:
                sys.exit("bench: no ferryd answers beside %s" % s)
            pids.append(pid)
    rpc_host = "127.0.0.1"
    if system != "ferry" and a.target:
        rpc_host = a.target.rsplit(":", 1)[0]
    r = launch.Run(system, bench_tables(a.keys, a.dim), a.shards, a.workers, out_dir, socket=socket,
                   server_socket=server_socket, target=a.target if system == "ferry" else None,
                   worker_netns=a.worker_netns, shard_netns=a.shard_netns, rpc_host=rpc_host, daemon_pids=pids,
                   rpc_threads=a.rpc_threads, max_count=a.batch)
    try:
        r.start_shards()
        r.start_workers("bench", {"keys": a.keys, "dim": a.dim, "batch": a.batch, "iters": a.iters,
                                  "warmup": a.warmup, "skew": a.skew, "seed": a.seed})
        reports, wall, shard_ns, daemon_ns = r.measure()
    finally:
        r.close()
    pulls = [x for rep in reports for x in rep["pull_ns"]]
    pushes = [x for rep in reports for x in rep["push_ns"]]
    worker_us = sum(rep["cpu_us"] for rep in reports)
    cpu_total = worker_us + shard_ns / 1000.0 + daemon_ns / 1000.0
    ops = len(pulls) + len(pushes)
    samples = sum(rep["samples"] for rep in reports)
    pull, push = summarize(pulls), summarize(pushes)
    if a.latency_dump:
        with open(a.latency_dump, "w") as f:
            f.write("# ferry.ps bench %s latencies: op microseconds\n" % system)
            f.writelines("pull %.3f\n" % (x / 1000.0) for x in pulls)
            f.writelines("push %.3f\n" % (x / 1000.0) for x in pushes)
    result = {
        "system": system, "workers": a.workers, "shards": a.shards, "keys": a.keys, "dim": a.dim, "batch": a.batch,
        "iters": a.iters, "pulls": len(pulls), "pushes": len(pushes), "ops": ops,
        "pull_mean_us": pull["mean"], "pull_p50_us": pull["p50"], "pull_p99_us": pull["p99"],
        "pull_p999_us": pull["p999"], "pull_max_us": pull["max"],
        "push_mean_us": push["mean"], "push_p50_us": push["p50"], "push_p99_us": push["p99"],
        "push_p999_us": push["p999"], "push_max_us": push["max"],
        "ops_per_s": ops / wall, "samples_per_s": samples / wall, "wall_s": wall,
        "distinct_keys_per_pull": sum(rep["distinct_keys"] for rep in reports) / max(1, len(pulls)),
        "cpu_us_per_op": cpu_total / ops if ops else 0.0, "cpu_us_per_sample": cpu_total / samples if samples else 0.0,
        "cpu_total_us": cpu_total, "cpu_workers_us": worker_us, "cpu_shards_us": shard_ns / 1000.0,
        "cpu_daemons_us": daemon_ns / 1000.0, "daemon_cpu_included": bool(pids) if system == "ferry" else None,
        "rpc_threads": a.rpc_threads if system != "ferry" else None,
    }
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m ferry.ps.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--skew", type=float, default=0.99)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--socket", default=None, help="the workers' ferryd (default $FERRY_SOCKET)")
    ap.add_argument("--server-socket", default=None, help="the shards' ferryd (default --socket)")
    ap.add_argument("--target", default=None,
                    help="HOST:PORT of the shards' ferryd (ferry); torch-rpc: the shards' host")
    ap.add_argument("--baseline", choices=["torch-rpc"], default=None)
    ap.add_argument("--rpc-threads", type=int, default=int(os.environ.get("FERRY_RPC_THREADS", "8")),
                    help="torch-rpc: num_worker_threads of every RPC agent")
    ap.add_argument("--worker-netns", default=None, help="torch-rpc: run the workers in this network namespace")
    ap.add_argument("--shard-netns", default=None, help="torch-rpc: run the shards in this network namespace")
    ap.add_argument("--out", default=None, help="directory for logs (default: a temporary one)")
    ap.add_argument("--latency-dump", default=None, help='FILE: "pull|push <microseconds>" lines')
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    out_dir = a.out or tempfile.mkdtemp(prefix="ferry-ps-bench-")
    res = run(a, out_dir)
    print("ferry.ps bench (%s): %d workers x %d shards, %d keys, batch %d, dim %d, %d iters" % (
        res["system"], a.workers, a.shards, a.keys, a.batch, a.dim, a.iters))
    for op in ("pull", "push"):
        print("%-5s mean %8.1f us  p50 %8.1f  p99 %8.1f  p999 %8.1f" % (
            op, res[op + "_mean_us"], res[op + "_p50_us"], res[op + "_p99_us"], res[op + "_p999_us"]))
    print("ops/s %.0f  samples/s %.0f  cpu %.1f us/op (workers %.0f, shards %.0f, daemons %.0f us)" % (
        res["ops_per_s"], res["samples_per_s"], res["cpu_us_per_op"], res["cpu_workers_us"], res["cpu_shards_us"],
        res["cpu_daemons_us"]))
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
