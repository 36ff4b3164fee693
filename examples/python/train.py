"""Training the DLRM-style model (dlrm.py) on a parameter server, and
the demo that does it through ferry and through torch.distributed.rpc in the
same run:

    /usr/bin/python3 examples/python/train.py --compare [--workers 2] [--shards 2] [--epochs 3]
        [--socket A] [--server-socket B] [--target HOST:PORT] [--plot loss.png] [--json]
    /usr/bin/python3 examples/python/train.py --ps ferry|torch-rpc|local [...]

Each worker process trains on its share of the synthetic clicks: per step
it pulls the rows its batch names and the dense weights (prefetched one step
ahead: asynchronous, one step stale), computes, and pushes both gradients;
the shards apply Adagrad. Printed: loss per epoch, held-out AUC (rank 0, at
the end), samples/s and CPU per sample over every process (workers, shards,
daemons), and the path of the loss-curve PNG.

``--ps local`` is the compute ceiling: the same workers, model, batches and
optimizers with the embedding table local in each worker (a plain
``nn.EmbeddingBag``, sparse Adagrad; no parameter server, no daemon, no
shards; each worker trains its own copy). No parameter server can exceed its
samples/s, and its CPU per sample is the model's own compute: ``--compare``
runs it after ferry and torch.distributed.rpc and splits their CPU per sample
into that compute and the rest (communication: the workers' extra CPU, the
shards' and the daemons').
"""

import argparse
import collections
import json
import os
import resource
import sys
import tempfile
import time
from typing import List

import numpy as np
import torch

import dlrm
import launch
from ferry.ps import tables as _tables

EMB_LR = 0.05
DENSE_LR = 0.02
DIM = 16
SYSTEMS = ("ferry", "torch-rpc", "local")


def model_tables(spec, dim=DIM):
    return [
        _tables.Embedding("sparse", rows=spec.rows, dim=dim, optimizer=_tables.Adagrad(lr=EMB_LR),
                          init=_tables.Uniform(0.1, seed=11)),
        _tables.Dense("mlp", dlrm.dense_size(spec, dim), optimizer=_tables.Adagrad(lr=DENSE_LR)),
    ]


def ps_model(worker, spec, dim=DIM, seed=7):
    """The model over a parameter-server worker (ferry.ps.Worker or the rpc baseline's)."""
    from ferry.ps.torch import DenseParameters, EmbeddingBag
    model = dlrm.make_model(spec, EmbeddingBag(worker, "sparse", mode="sum"), dim=dim, seed=seed)
    return model, DenseParameters(worker, "mlp", model.dense_part)


def local_model(spec, dim=DIM, seed=7):
    """The model with its table local (no parameter server): the same initial
    rows as the shards', the same dense weights, the same optimizers, applied
    by torch.optim (sparse gradients: a step touches only the rows it used,
    as a shard's update does)."""
    from ferry import ps
    tables = model_tables(spec, dim)
    bag = torch.nn.EmbeddingBag(spec.rows, dim, mode="sum", sparse=True)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(ps.initial_values(tables, "sparse", np.arange(spec.rows))))
    model = dlrm.make_model(spec, bag, dim=dim, seed=seed)
    opts = [torch.optim.Adagrad([bag.weight], lr=EMB_LR), torch.optim.Adagrad(model.dense_part.parameters(),
                                                                                lr=DENSE_LR)]
    return model, opts


def train_local_steps(model, opts, batches):
    """train_steps without a parameter server: forward, backward, local optimizer steps."""
    loss_fn = torch.nn.BCEWithLogitsLoss()
    losses: List[float] = []
    for d, k, y in batches:
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss = loss_fn(model(d, k), y)
        loss.backward()
        for o in opts:
            o.step()
        losses.append(loss.item())
    return losses


def train_steps(worker, model, dense, batches, synchronous=False, on_step=None, prefetch=1):
    """Runs the batches; returns the per-step losses. Synchronous: each step
    pulls after the previous push is applied (one worker then computes what
    a local optimizer would). Otherwise the pulls of the next `prefetch`
    batches are in flight while this step computes (step i computes on
    parameters up to `prefetch` steps stale)."""
    loss_fn = torch.nn.BCEWithLogitsLoss()
    losses: List[float] = []
    batches = list(batches)
    if not batches:
        return losses
    depth = 1 if synchronous else max(1, prefetch)

    def start(i):
        k = batches[i][1]
        return model.embedding.prefetch(k.reshape(-1, k.shape[-1])), dense.pull_async()

    pending = collections.deque(start(i) for i in range(min(depth, len(batches))))
    for i, (d, k, y) in enumerate(batches):
        rows_p, dense_p = pending.popleft()
        dense.pull(dense_p)
        rows = rows_p.wait()
        if not synchronous and i + depth < len(batches):
            pending.append(start(i + depth))
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model(d, k, rows=rows), y)
        loss.backward()  # the embedding gradients go out here (push_rows)
        dense.push(wait=False)
        del rows
        losses.append(loss.item())
        if on_step:
            on_step(i, losses[-1])
        if synchronous:
            worker.synchronize()
            if i + 1 < len(batches):
                pending.append(start(i + 1))
    worker.synchronize()
    return losses


def evaluate(model, dense, test, batch=512):
    """Held-out AUC and log loss of the server's current parameters (dense
    None: the model's own, local ones)."""
    if dense is not None:
        dense.pull()
    scores = []
    with torch.no_grad():
        for d, k, _ in test.batches(batch):
            scores.append(model(d, k))
    s = torch.cat(scores).numpy()
    y = test.labels[:len(s)]
    p = 1.0 / (1.0 + np.exp(-s))
    logloss = float(-np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)))
    return dlrm.auc(y, s), logloss


def data_spec(cfg):
    return dlrm.DataSpec(train=cfg["train"], test=cfg["test"], seed=cfg["data_seed"])


class Job:
    """One worker process's training (run by launch.py)."""

    def __init__(self, worker, tables, cfg, rank):
        torch.set_num_threads(1)
        self.w, self.cfg, self.rank = worker, cfg, rank
        self.spec = data_spec(cfg)
        self.train, self.test = dlrm.generate(self.spec)
        if worker is None:  # --ps local
            self.model, self.opts = local_model(self.spec)
            self.dense = None
            return
        self.model, self.dense = ps_model(worker, self.spec)
        if rank == 0:
            self.dense.assign()  # the model's initial dense weights (before any worker pulls: before "go")

    def run(self):
        cfg = self.cfg
        epochs = []
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        samples = 0
        for e in range(cfg["epochs"]):
            te = time.perf_counter()
            batches = list(self.train.batches(cfg["batch"], start=self.rank, stride=cfg["workers"]))
            if self.w is None:
                losses = train_local_steps(self.model, self.opts, batches)
            else:
                losses = train_steps(self.w, self.model, self.dense, batches, synchronous=cfg.get("sync", False),
                                     prefetch=cfg.get("prefetch", 1))
            samples += len(batches) * cfg["batch"]
            epochs.append({"loss": float(np.mean(losses)), "steps": losses, "seconds": time.perf_counter() - te})
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        report = {"rank": self.rank, "epochs": epochs, "samples": samples, "wall_s": wall, "cpu_us": cpu * 1e6}
        if self.rank == 0:
            # Let the other workers' last pushes land (they finish within a step of each other).
            time.sleep(0.2)
            report["auc"], report["test_logloss"] = evaluate(self.model, self.dense, self.test)
        return report


def run_one(system, a, out_dir, daemon_pids):
    spec = dlrm.DataSpec(train=a.train, test=a.test, seed=a.data_seed)
    rpc_host = a.target.rsplit(":", 1)[0] if (system != "ferry" and a.target) else "127.0.0.1"
    local = system == "local"
    r = launch.Run(system, model_tables(spec), 0 if local else a.shards, a.workers, out_dir, socket=a.socket,
                   server_socket=a.server_socket, target=a.target if system == "ferry" else None,
                   worker_netns=a.worker_netns, shard_netns=a.shard_netns, rpc_host=rpc_host,
                   daemon_pids=daemon_pids if system == "ferry" else [], rpc_threads=a.rpc_threads)
    reports, t = r.train("train", {"epochs": a.epochs, "batch": a.batch, "train": a.train, "test": a.test,
                                   "data_seed": a.data_seed, "sync": a.sync, "prefetch": a.prefetch})
    samples, train_wall = t["samples"], t["train_wall"]
    per_epoch = [float(np.mean([x["epochs"][e]["loss"] for x in reports])) for e in range(a.epochs)]
    return {
        "system": system, "workers": a.workers, "shards": 0 if local else a.shards, "epochs": a.epochs, "batch": a.batch,
        "epoch_loss": per_epoch, "auc": reports[0]["auc"], "test_logloss": reports[0]["test_logloss"],
        "samples": samples, "train_wall_s": train_wall, "samples_per_s": samples / train_wall,
        "cpu_us_per_sample": t["cpu_us"] / samples, "cpu_workers_us": t["cpu_trainers_us"],
        "cpu_shards_us": t["cpu_shards_us"], "cpu_daemons_us": t["cpu_daemon_us"],
        "step_losses": [s for x in reports[:1] for ep in x["epochs"] for s in ep["steps"]],
    }


def split_cpu(r, ceiling):
    """CPU per sample of run r split into the model's compute (the local
    ceiling's workers' CPU per sample: the same forward, backward and
    optimizer arithmetic) and communication (everything beyond it: the
    workers' extra CPU, shards, daemons); r["of_ceiling"] is r's samples/s as
    a fraction of the ceiling's."""
    compute = ceiling["cpu_workers_us"] / ceiling["samples"]
    workers = r["cpu_workers_us"] / r["samples"]
    r["of_ceiling"] = r["samples_per_s"] / ceiling["samples_per_s"]
    r["cpu_compute_us_per_sample"] = min(compute, workers)
    r["cpu_comm_workers_us_per_sample"] = workers - r["cpu_compute_us_per_sample"]
    r["cpu_comm_us_per_sample"] = r["cpu_us_per_sample"] - r["cpu_compute_us_per_sample"]


def plot(results, path, oracle):
    """The loss curves as a PNG at path; False (and nothing written) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        steps = np.asarray(r["step_losses"])
        k = max(1, len(steps) // 60)
        smooth = np.convolve(steps, np.ones(k) / k, mode="valid")
        samples = (np.arange(len(smooth)) + k) * r["batch"] * r["workers"]
        ax.plot(samples, smooth, label="%s (AUC %.3f, %.0f samples/s)" % (r["system"], r["auc"], r["samples_per_s"]))
    ax.set_xlabel("training samples (all workers)")
    ax.set_ylabel("training loss (worker 0, moving mean)")
    ax.set_title("DLRM-style CTR model: ferry.ps, torch.distributed.rpc, local tables (truth's AUC %.3f)" % oracle,
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(prog="train.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--train", type=int, default=120_000)
    ap.add_argument("--test", type=int, default=20_000)
    ap.add_argument("--data-seed", type=int, default=dlrm.DataSpec.seed)
    ap.add_argument("--sync", action="store_true", help="synchronous steps (no prefetch)")
    ap.add_argument("--prefetch", type=int, default=1, help="batches whose pulls are in flight while one computes")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--server-socket", default=None)
    ap.add_argument("--target", default=None)
    ap.add_argument("--ps", choices=SYSTEMS, default=None,
                    help="the one system to run: ferry (default), torch-rpc, or local (no PS: the compute ceiling)")
    ap.add_argument("--baseline", choices=["torch-rpc"], default=None, help="the same as --ps torch-rpc")
    ap.add_argument("--compare", action="store_true",
                    help="ferry, then torch.distributed.rpc, then local (the ceiling), same settings")
    ap.add_argument("--rpc-threads", type=int, default=int(os.environ.get("FERRY_RPC_THREADS", "8")))
    ap.add_argument("--worker-netns", default=None)
    ap.add_argument("--shard-netns", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot", default=None, help="loss-curve PNG (default OUT/loss-curve.png)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    a.socket = a.socket or os.environ.get("FERRY_SOCKET") or "/run/ferry/ferryd.sock"
    a.server_socket = a.server_socket or a.socket
    out = a.out or tempfile.mkdtemp(prefix="ferry-train-")
    systems = list(SYSTEMS) if a.compare else [a.ps or a.baseline or "ferry"]
    pids = [p for p in (launch.daemon_pid(s) for s in dict.fromkeys([a.socket, a.server_socket])) if p]
    spec = dlrm.DataSpec(train=a.train, test=a.test, seed=a.data_seed)
    oracle = dlrm.oracle_auc(dlrm.generate(spec)[1])
    print("training: %d workers x %d shards, %d epochs of %d samples (batch %d), held-out %d; truth's AUC %.3f"
          % (a.workers, a.shards, a.epochs, a.train, a.batch, a.test, oracle), flush=True)
    results = []
    for system in systems:
        r = run_one(system, a, os.path.join(out, system), pids)
        results.append(r)
        print("%-9s " % system + "  ".join("epoch %d loss %.4f" % (i + 1, l) for i, l in enumerate(r["epoch_loss"]))
              + "  | held-out loss %.4f AUC %.4f  %.0f samples/s  %.1f us CPU/sample" % (
                  r["test_logloss"], r["auc"], r["samples_per_s"], r["cpu_us_per_sample"]), flush=True)
    by = {r["system"]: r for r in results}
    if "ferry" in by and "torch-rpc" in by:
        f, t = by["ferry"], by["torch-rpc"]
        print("ferry / torch-rpc: samples/s %.2fx, CPU per sample %.2fx, AUC %.4f vs %.4f" % (
            f["samples_per_s"] / t["samples_per_s"], f["cpu_us_per_sample"] / t["cpu_us_per_sample"], f["auc"],
            t["auc"]))
    if "local" in by:
        ceiling = by["local"]
        for r in results:
            split_cpu(r, ceiling)
            if r is not ceiling:
                print("%-9s %.2f of the local ceiling's samples/s; CPU/sample %.1f us = model compute %.1f"
                      " + communication %.1f (workers %.1f, shards %.1f, daemons %.1f)" % (
                          r["system"], r["of_ceiling"], r["cpu_us_per_sample"], r["cpu_compute_us_per_sample"],
                          r["cpu_comm_us_per_sample"], r["cpu_comm_workers_us_per_sample"],
                          r["cpu_shards_us"] / r["samples"], r["cpu_daemons_us"] / r["samples"]), flush=True)
    png = a.plot or os.path.join(out, "loss-curve.png")
    if plot(results, png, oracle):
        print("loss curve: %s" % png)
    else:
        print("loss curve: not drawn (no matplotlib: pip install matplotlib, Debian: python3-matplotlib)")
        png = None
    if a.json:
        print(json.dumps({"oracle_auc": oracle, "results": [{k: v for k, v in r.items() if k != "step_losses"}
                                                            for r in results], "plot": png}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
