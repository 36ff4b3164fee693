"""Step time of a drop-in ferry.ps EmbeddingBag against local tables.

The shape of the reference DLRM training script (facebookresearch/dlrm's
PyTorch model) at a size whose local step takes about 10 ms here: 13
dense features through a bottom MLP 13-128-64-16, 4 embedding tables of
10,000 to 100,000 rows x 16 (``nn.EmbeddingBag``, mode "sum", ``--bag`` ids
per sample, 1-D input with offsets), DLRM's dot interaction, a top MLP
26-128-64-1, batch 128, SGD on everything. The
training loop is one function, ``train()``, run twice in the same process
with the same data and the same initial weights:

- ``local``: the tables are ``torch.nn.EmbeddingBag(..., sparse=True)``;
- ``ferry``: the tables are ``ferry.ps.torch.EmbeddingBag(worker, name)``
  (the one line that changes), on two shard servers started in this process
  as the README's quickstart does, over one ferryd.

Printed: each system's median step time (ms) and ``ratio`` (ferry / local;
each round's ratio to that round's local, then their median), with
``--json`` one JSON line (``ferry_ratio``, ``local_ms``, ...), and the CPU time per step of
the training thread and of the whole process (whose other threads are the
shards'; ferryd's own CPU is not in it). ``--collection`` also runs the
EmbeddingBagCollection form (the script changed to look the 4 tables up in
one call), ``--sync`` calls worker.synchronize() after every step (every
pull then sees the previous step's update), ``--no-defer`` makes each
module wait for its own pull (the tables' pulls one after another, as
before deferred results), ``--immediate`` runs that too in the same rounds, ``--profile`` splits the ferry step's time into
its parts (wall time in the worker's calls: ``pull_async`` sends a deferred pull,
``wait_all`` waits for a step's pulls together),  ``--shard-socket``/``--target`` put the shards (still in this
process) behind another ferryd.

    FERRY_SOCKET=... /usr/bin/python3 examples/python/step_time.py --steps 300 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Sequence

import numpy as np
import torch
from torch import nn

import ferry.ps as ps
import ferry.ps.torch as pst
from ferry.ps.torch import EmbeddingBag

ROWS = (10_000, 30_000, 60_000, 100_000)
DIM = 16
DENSE = 13
BOTTOM = (128, 64)
TOP = (128, 64)


def mlp(sizes: Sequence[int], sigmoid_last: bool = False) -> nn.Sequential:
    layers: List[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class DLRM(nn.Module):
    """dlrm_s_pytorch's model: bottom MLP, one bag per table, dot interaction, top MLP."""

    def __init__(self, bags: Any) -> None:
        super().__init__()
        self.bot = mlp((DENSE,) + BOTTOM + (DIM,))
        self.bags = bags  # nn.ModuleList of bags, or an EmbeddingBagCollection
        n = len(ROWS) + 1
        self.top = mlp((DIM + n * (n - 1) // 2,) + TOP + (1,))
        iu = torch.triu_indices(n, n, offset=1)
        self.register_buffer("iu0", iu[0], persistent=False)
        self.register_buffer("iu1", iu[1], persistent=False)

    def forward(self, dense: torch.Tensor, ids: List[torch.Tensor], offsets: List[torch.Tensor]) -> torch.Tensor:
        x = self.bot(dense)
        if isinstance(self.bags, nn.ModuleList):
            ly = [bag(i, o) for bag, i, o in zip(self.bags, ids, offsets)]
        else:
            ly = self.bags(ids, offsets)
        z = torch.stack([x] + ly, 1)
        inter = torch.bmm(z, z.transpose(1, 2))[:, self.iu0, self.iu1]
        return self.top(torch.cat([x, inter], 1)).squeeze(1)


def batches(steps: int, batch: int, bag: int, seed: int = 3) -> List[tuple]:
    """The data: dense features, per table 1-D ids and offsets (Zipf-like popularity), labels."""
    rng = np.random.default_rng(seed)
    out: List[tuple] = []
    for _ in range(steps):
        dense = torch.from_numpy(rng.normal(size=(batch, DENSE)).astype(np.float32))
        ids = [torch.from_numpy((rng.zipf(1.2, batch * bag) % r).astype(np.int64)) for r in ROWS]
        offsets = [torch.arange(0, batch * bag, bag) for _ in ROWS]
        y = torch.from_numpy((rng.random(batch) < 0.3).astype(np.float32))
        out.append((dense, ids, offsets, y))
    return out


def tables() -> List[ps.Table]:
    return [ps.Embedding("t%d" % i, rows=r, dim=DIM, optimizer=ps.SGD(lr=0.01), init=ps.Uniform(0.05, seed=i))
            for i, r in enumerate(ROWS)]


def train(model: nn.Module, data: List[tuple], after_step: Callable[[], None] = lambda: None) -> List[float]:
    """The training loop both systems run: per-step wall times (s)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.BCEWithLogitsLoss()
    times = []
    for dense, ids, offsets, y in data:
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(dense, ids, offsets), y)
        loss.backward()
        opt.step()
        after_step()
        times.append(time.perf_counter() - t0)
    return times


class Profile:
    """Wall time a ferry step spends in the worker's calls (the rest is the model and the modules' own torch work)."""

    def __init__(self, worker: ps.Worker) -> None:
        self.parts: Dict[str, float] = {}
        # pull_async and wait_all: a drop-in module's deferred pulls (sent, then waited for together).
        for name in ("pull", "pull_async", "wait_all", "push_rows", "synchronize", "pull_many"):
            setattr(worker, name, self.timed(name, getattr(worker, name)))

    def timed(self, name: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                self.parts[name] = self.parts.get(name, 0.0) + time.perf_counter() - t0
        return call


def local_model() -> nn.Module:
    torch.manual_seed(7)
    bags = nn.ModuleList([nn.EmbeddingBag(r, DIM, mode="sum", sparse=True) for r in ROWS])
    return DLRM(bags)


def ferry_model(worker: ps.Worker, collection: bool) -> nn.Module:
    torch.manual_seed(7)
    names = ["t%d" % i for i in range(len(ROWS))]
    if collection:
        from ferry.ps.torch import EmbeddingBagCollection
        return DLRM(EmbeddingBagCollection(worker, names, mode="sum"))
    bags = nn.ModuleList([EmbeddingBag(worker, n, mode="sum") for n in names])
    return DLRM(bags)


def median_ms(times: List[float], warmup: int) -> float:
    return statistics.median(times[warmup:]) * 1e3


def cpu_ms(rounds: Dict[str, List[float]], name: str, steps: int, f: Callable[[], List[float]]) -> List[float]:
    """f's step times; records the CPU time per step of the training thread
    and of the whole process (the in-process shards' threads too)."""
    t0, p0 = time.thread_time(), time.process_time()
    times = f()
    rounds.setdefault(name + "_thread_cpu_ms", []).append((time.thread_time() - t0) / steps * 1e3)
    rounds.setdefault(name + "_process_cpu_ms", []).append((time.process_time() - p0) / steps * 1e3)
    return times


def run(a: argparse.Namespace) -> Dict[str, Any]:
    """Each round: local, then the ferry variants on fresh shards; per-round ratios to that round's local."""
    torch.set_num_threads(a.threads)
    data = batches(a.steps, a.batch, a.bag)
    out: Dict[str, Any] = {"steps": a.steps, "batch": a.batch, "bag": a.bag, "tables": list(ROWS), "dim": DIM,
                           "threads": a.threads, "sync": a.sync, "remote": bool(a.target),
                           "deferred": not a.no_defer, "rounds": a.rounds}
    variants = [("ferry", not a.no_defer, False)]
    if a.immediate and not a.no_defer:
        variants.append(("immediate", False, False))
    if a.collection:
        variants.append(("collection", False, True))
    rounds: Dict[str, List[float]] = {}
    for rnd in range(a.rounds):
        local = median_ms(cpu_ms(rounds, "local", a.steps, lambda: train(local_model(), data)), a.warmup)
        rounds.setdefault("local_ms", []).append(local)
        t_ = tables()
        prefix = "step-time-%d-%d-" % (os.getpid(), rnd)  # a stopped shard keeps its name until it is freed
        shards = [ps.ShardServer(t_, i, a.shards, a.shard_socket or a.socket, service_prefix=prefix).start()
                  for i in range(a.shards)]
        worker = ps.Worker(t_, a.shards, a.socket, a.target, service_prefix=prefix)
        try:
            prof = Profile(worker) if a.profile else None

            def sync() -> None:
                if a.sync:
                    worker.synchronize()

            # Rotated each round, so that no variant always runs first on fresh shards.
            for name, defer, collection in variants[rnd % len(variants):] + variants[:rnd % len(variants)]:
                pst.defer(defer)
                model = ferry_model(worker, collection)
                ms = median_ms(cpu_ms(rounds, name, a.steps, lambda: train(model, data, sync)), a.warmup)
                rounds.setdefault(name + "_ms", []).append(ms)
                rounds.setdefault(name + "_ratio", []).append(ms / local)
                if prof is not None:
                    for part, seconds in prof.parts.items():
                        rounds.setdefault("%s_%s_ms_per_step" % (name, part), []).append(seconds / a.steps * 1e3)
                    prof.parts.clear()
            worker.synchronize()
        finally:
            pst.defer(True)
            worker.close()
            for s in shards:
                s.stop()
    for k, v in rounds.items():
        out[k] = statistics.median(v)  # ratios: the median of the rounds' own ratios
        out[k + "_rounds"] = v
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="step_time.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5,
                    help="local then the ferry variants, this many times (medians; ratios per round, then their median)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--bag", type=int, default=8, help="ids per sample per table")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--socket", default=None, help="ferryd's client socket (default $FERRY_SOCKET)")
    ap.add_argument("--shard-socket", default=None,
                    help="the shards' ferryd (still in this process; default --socket); with --target")
    ap.add_argument("--target", default=None, help="HOST:PORT of --shard-socket's ferryd (its --listen)")
    ap.add_argument("--sync", action="store_true", help="worker.synchronize() after every ferry step")
    ap.add_argument("--no-defer", action="store_true",
                    help="modules wait for each pull at once (ferry.ps.torch.defer(False)): the tables' pulls in turn")
    ap.add_argument("--collection", action="store_true", help="also the EmbeddingBagCollection form")
    ap.add_argument("--immediate", action="store_true",
                    help="also the drop-in with each pull waited for at once (defer off), in the same rounds")
    ap.add_argument("--profile", action="store_true", help="time spent in the worker's calls, per step")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    r = run(a)
    line = "step time, batch %d, %d tables x %d, bag %d, %d rounds: local %.2f ms, ferry.ps %.2f ms, ratio %.3f" % (
        a.batch, len(ROWS), DIM, a.bag, a.rounds, r["local_ms"], r["ferry_ms"], r["ferry_ratio"])
    for name in ("immediate", "collection"):
        if name + "_ms" in r:
            line += ", %s %.2f ms (ratio %.3f)" % (name, r[name + "_ms"], r[name + "_ratio"])
    print(line)
    print("  CPU per step (ms), training thread / whole process: " + ", ".join(
        "%s %.2f / %.2f" % (n, r[n + "_thread_cpu_ms"], r[n + "_process_cpu_ms"])
        for n in ("local", "ferry", "immediate", "collection") if n + "_thread_cpu_ms" in r))
    if a.profile:
        print("  in the worker per step (ms): " + ", ".join(
            "%s %.2f" % (k[:-len("_ms_per_step")], v) for k, v in sorted(r.items()) if k.endswith("_ms_per_step")))
    if a.json:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
