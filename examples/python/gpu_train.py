"""The DLRM-style training (dlrm.py) on a GPU with its tables on a parameter
server on the same host, in one run:

- ``ferry``: ferry.ps shard processes on a ferryd this script starts
  (``--ferryd-args`` are passed to it, e.g. ``--engines auto``); the
  trainers' rows land in their pinned arena and go to the GPU from there,
  gradients come back from the GPU straight into the push's requests;
- ``torch-rpc``: the same shards as torch.distributed.rpc (TensorPipe)
  processes (rpc_baseline.py); rows arrive in process memory and the model
  copies them to the GPU itself;
- ``gpu``: the tables on the GPU in each trainer (``nn.EmbeddingBag``,
  sparse Adagrad; no parameter server): the ceiling.

Each with 1 and 8 trainer processes sharing the GPU (``--trainers``). Per
run: samples/s, CPU per sample over every process (trainers, shards,
ferryd), the share of the wall time the GPU spent in host-to-device copies
(CUDA events around every such copy: batches, dense weights, rows), the
last epoch's training loss and the held-out AUC (rank 0, at the end).

    python3 examples/python/gpu_train.py [--device cuda] [--trainers 1 8] [--systems ferry torch-rpc gpu]
        [--steps 300] [--batch 1024] [--shards 2] [--ferryd PATH] [--ferryd-args "--engines auto"] [--json]

``--device cpu`` runs the same on the CPU (the test does, with a small
configuration). With --json the last line of stdout is one JSON object.
``GPU_TRAIN_DIAG`` in the environment (diagnosis of ferry on a GPU):
``push-cpu`` sends gradients through process memory instead of copying
them from the GPU into the requests, ``deliver-off`` lets the modules copy
the rows to the GPU instead of the worker's delivery, ``no-register``
leaves the arena unregistered with CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch

import dlrm
import launch
import train

SYSTEMS = {"ferry": "ferry", "torch-rpc": "torch-rpc", "gpu": "local"}


class CopyClock:
    """GPU time of host-to-device copies: CUDA events around each one (nothing on a CPU)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.pairs: List[tuple] = []

    def __enter__(self) -> "CopyClock":
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.start.record()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.pairs.append((self.start, end))

    def wrap(self, f: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self:
                return f(*args, **kwargs)
        return timed

    def total_ms(self) -> float:
        if not self.cuda:
            return 0.0
        torch.cuda.synchronize()
        return sum(a.elapsed_time(b) for a, b in self.pairs)


class Job:
    """One trainer process (run by launch.py as role gpu_train)."""

    def __init__(self, worker: Any, tables: Any, cfg: Dict[str, Any], rank: int) -> None:
        torch.set_num_threads(1)
        self.w, self.cfg, self.rank = worker, cfg, rank
        self.device = torch.device(cfg["device"])
        if self.device.type == "cuda":
            if self.device.index is None:  # "cuda": the current device, named, as set_device wants
                self.device = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(self.device)
        self.clock = CopyClock(self.device)
        self.spec = dlrm.DataSpec(train=cfg["train"], test=cfg["test"], seed=cfg["data_seed"])
        self.train, self.test = dlrm.generate(self.spec)
        if worker is None:  # gpu: the tables on the device, no parameter server
            self.model, self.opts = train.local_model(self.spec)
            self.model.to(self.device)
            for o in self.opts:  # Adagrad made its state beside the CPU parameters: move it too
                for state in o.state.values():
                    for k, v in state.items():
                        if torch.is_tensor(v) and v.dim() > 0:
                            state[k] = v.to(self.device)
            self.dense = None
            return
        if self.device.type == "cuda" and hasattr(worker, "to"):
            diag = os.environ.get("GPU_TRAIN_DIAG", "")
            if "no-register" in diag:  # diagnosis: the arena not registered with CUDA (pageable copies)
                from ferry.ps import _cuda as cuda_arena
                setattr(cuda_arena, "_register", lambda address, size: None)
                setattr(cuda_arena, "_unregister", lambda address: None)
            worker.to(self.device)  # the arena registered with CUDA once
            if "push-cpu" in diag:  # diagnosis: gradients through process memory, not into the requests
                w = worker
                worker._cuda.push_rows = lambda rows, g: w._w.push_rows(rows.op, g.float().cpu().contiguous().reshape(-1).numpy())
            if "deliver-off" in diag:  # diagnosis: the modules copy the rows to the GPU themselves
                worker._cuda.deliver = lambda rows: None
            worker._cuda.deliver = self.clock.wrap(worker._cuda.deliver)
        import ferry.ps.torch as pst
        # The baseline's copies of rows to the device happen in the modules: time them there.
        setattr(pst._PulledModule, "_weights", staticmethod(self.clock.wrap(pst._PulledModule._weights)))
        self.model, self.dense = train.ps_model(worker, self.spec)
        self.model.to(self.device)
        if rank == 0:
            self.dense.assign()

    def batches(self) -> List[tuple]:
        cfg = self.cfg
        out = list(self.train.batches(cfg["batch"], start=self.rank, stride=cfg["workers"]))
        return (out * (cfg["steps"] // max(1, len(out)) + 1))[:cfg["steps"]]

    def to_device(self, *tensors: torch.Tensor) -> List[torch.Tensor]:
        with self.clock:
            return [t.to(self.device, non_blocking=True) for t in tensors]

    def run(self) -> Dict[str, Any]:
        batches = self.batches()
        loss_fn = torch.nn.BCEWithLogitsLoss()
        losses: List[float] = []
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        if self.dense is None:
            opts = self.opts
            for d, k, y in batches:
                d, k, y = self.to_device(d, k, y)
                for o in opts:
                    o.zero_grad(set_to_none=True)
                loss = loss_fn(self.model(d, k), y)
                loss.backward()
                for o in opts:
                    o.step()
                losses.append(loss.item())
        else:
            dense = self.dense
            model = self.model

            def start(i: int) -> tuple:
                k = batches[i][1]
                return model.embedding.prefetch(k.reshape(-1, k.shape[-1])), dense.pull_async()

            pending = start(0)
            for i, (d, k, y) in enumerate(batches):
                rows_p, dense_p = pending
                with self.clock:
                    dense.pull(dense_p)  # into the device's weights
                rows = rows_p.wait()
                if i + 1 < len(batches):
                    pending = start(i + 1)  # the next step's pulls overlap this one's compute
                d, k, y = self.to_device(d, k, y)
                model.zero_grad(set_to_none=True)
                loss = loss_fn(model(d, k, rows=rows), y)
                loss.backward()  # the rows' gradients go out here
                dense.push(wait=False)
                del rows
                losses.append(loss.item())
            self.w.synchronize()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        report = {"rank": self.rank, "samples": len(batches) * self.cfg["batch"], "wall_s": wall,
                  "cpu_us": ((cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)) * 1e6,
                  "h2d_ms": self.clock.total_ms(), "loss": float(np.mean(losses[-max(1, len(losses) // 5):])),
                  "first_loss": float(np.mean(losses[:max(1, len(losses) // 5)]))}
        if self.rank == 0:
            time.sleep(0.2)  # the other trainers' last pushes land
            report["auc"] = self.evaluate()
        return report

    def evaluate(self) -> float:
        if self.dense is not None:
            self.dense.pull()
        scores = []
        with torch.no_grad():
            for d, k, _ in self.test.batches(2048):
                scores.append(self.model(d.to(self.device), k.to(self.device)).cpu())
        s = torch.cat(scores).numpy()
        return dlrm.auc(self.test.labels[:len(s)], s)


def start_ferryd(command: List[str], extra: List[str], out: str) -> tuple:
    rt = tempfile.mkdtemp(prefix="ferry-gpu-train-")
    log = open(os.path.join(out, "ferryd.log"), "w")
    p = subprocess.Popen(command + ["--runtime-dir", rt, "--transport", "tcp"] + extra, stdout=log,
                         stderr=subprocess.STDOUT)
    sock = os.path.join(rt, "ferryd.sock")
    deadline = time.monotonic() + 20
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("ferryd did not start: %s (log %s)" % (" ".join(command + extra), log.name))
        time.sleep(0.05)
    return p, rt, sock


def run_one(system: str, trainers: int, a: argparse.Namespace, out: str, socket: Optional[str]) -> Dict[str, Any]:
    spec = dlrm.DataSpec(train=a.train, test=a.test, seed=a.data_seed)
    kind = SYSTEMS[system]
    pids = [p for p in [launch.daemon_pid(socket)] if p] if kind == "ferry" and socket else []
    r = launch.Run(kind, train.model_tables(spec), 0 if kind == "local" else a.shards, trainers,
                   os.path.join(out, "%s-%d" % (system, trainers)), socket=socket, server_socket=socket,
                   daemon_pids=pids, rpc_threads=a.rpc_threads)
    reports, t = r.train("gpu_train", {"device": a.device, "batch": a.batch, "steps": a.steps, "train": a.train,
                                       "test": a.test, "data_seed": a.data_seed})
    samples, train_wall = t["samples"], t["train_wall"]
    return {"system": system, "trainers": trainers, "shards": 0 if kind == "local" else a.shards,
            "samples": samples, "samples_per_s": samples / train_wall, "cpu_us_per_sample": t["cpu_us"] / samples,
            "cpu_trainers_us": t["cpu_trainers_us"], "cpu_shards_us": t["cpu_shards_us"],
            "cpu_daemon_us": t["cpu_daemon_us"],
            "h2d_share": sum(x["h2d_ms"] for x in reports) / 1000.0 / sum(x["wall_s"] for x in reports),
            "loss": float(np.mean([x["loss"] for x in reports])),
            "first_loss": float(np.mean([x["first_loss"] for x in reports])), "auc": reports[0]["auc"],
            "train_wall_s": train_wall}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_train.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--trainers", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300, help="steps per trainer")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--train", type=int, default=120_000)
    ap.add_argument("--test", type=int, default=20_000)
    ap.add_argument("--data-seed", type=int, default=dlrm.DataSpec.seed)
    ap.add_argument("--rpc-threads", type=int, default=8)
    ap.add_argument("--ferryd", default=os.environ.get("FERRYD") or shutil.which("ferryd") or "ferryd",
                    help="the ferryd to start (a command; default $FERRYD, else ferryd on PATH)")
    ap.add_argument("--ferryd-args", default="", help='more ferryd options, one string (e.g. "--engines auto")')
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    out = a.out or tempfile.mkdtemp(prefix="ferry-gpu-train-")
    os.makedirs(out, exist_ok=True)
    daemon = None
    socket = None
    if "ferry" in a.systems:
        daemon, rt, socket = start_ferryd(shlex.split(a.ferryd), shlex.split(a.ferryd_args), out)
    gpu = torch.cuda.get_device_name(0) if a.device.startswith("cuda") else "none"
    print("gpu_train: device %s (%s), torch %s, %d shards, batch %d, %d steps per trainer, ferryd %s" % (
        a.device, gpu, torch.__version__, a.shards, a.batch, a.steps, a.ferryd_args or "(defaults)"), flush=True)
    results = []
    try:
        for trainers in a.trainers:
            for system in a.systems:
                r = run_one(system, trainers, a, out, socket)
                results.append(r)
                print("%-9s x%d  %9.0f samples/s  %7.2f us CPU/sample  H2D %5.1f%%  loss %.4f (first fifth %.4f)"
                      "  AUC %.4f" % (system, trainers, r["samples_per_s"], r["cpu_us_per_sample"],
                                      100 * r["h2d_share"], r["loss"], r["first_loss"], r["auc"]), flush=True)
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(10)
            shutil.rmtree(rt, ignore_errors=True)
    by = {(r["system"], r["trainers"]): r for r in results}
    for trainers in a.trainers:
        f, t, g = by.get(("ferry", trainers)), by.get(("torch-rpc", trainers)), by.get(("gpu", trainers))
        if f and t:
            print("x%d: ferry / torch-rpc samples/s %.2fx, CPU per sample %.2fx" % (
                trainers, f["samples_per_s"] / t["samples_per_s"], f["cpu_us_per_sample"] / t["cpu_us_per_sample"]))
        if f and g:
            print("x%d: ferry at %.2f of the tables-on-GPU ceiling" % (trainers, f["samples_per_s"] / g["samples_per_s"]))
    if a.json:
        print(json.dumps({"device": a.device, "gpu": gpu, "torch": torch.__version__, "ferryd_args": a.ferryd_args,
                          "batch": a.batch, "steps": a.steps, "shards": a.shards, "results": results,
                          "command": " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
