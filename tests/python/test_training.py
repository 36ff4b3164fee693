"""Training the DLRM-style model through ferry.ps (real ferryd, real shard
processes): with one worker and synchronous pull/push the per-step losses
equal a single-process PyTorch reference (same initial rows and weights, same
batches, torch.optim.Adagrad on nn.EmbeddingBag); and with 2 workers x 2
shards the model learns the planted truth (held-out AUC far above 0.5)."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import torch

import ferry.ps as ps
from conftest import EXAMPLES

sys.path.insert(0, EXAMPLES)
import dlrm  # noqa: E402 (examples/python: the demo and benchmarks live outside the package)
import train  # noqa: E402


def test_one_worker_synchronous_equals_the_pytorch_reference(daemon, helpers):
    torch.set_num_threads(1)
    spec = dlrm.DataSpec(train=256 * 40, test=256)
    tables = train.model_tables(spec)
    tj = json.dumps([t.to_dict() for t in tables])
    for i in range(2):
        helpers("shard", daemon.socket, tj, "%d/2" % i)
    data, _ = dlrm.generate(spec)
    batches = list(data.batches(256))

    # The reference: one process, nn.EmbeddingBag with the shards' initial rows.
    bag = torch.nn.EmbeddingBag(spec.rows, train.DIM, mode="sum")
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(ps.initial_values(tables, "sparse", np.arange(spec.rows))))
    ref = dlrm.make_model(spec, bag)
    opts = [torch.optim.Adagrad([bag.weight], lr=train.EMB_LR),
            torch.optim.Adagrad(ref.dense_part.parameters(), lr=train.DENSE_LR)]
    loss_fn = torch.nn.BCEWithLogitsLoss()
    ref_losses = []
    for d, k, y in batches:
        for o in opts:
            o.zero_grad()
        loss = loss_fn(ref(d, k), y)
        loss.backward()
        for o in opts:
            o.step()
        ref_losses.append(loss.item())

    with ps.Worker(tables, 2, daemon.socket) as w:
        model, dense = train.ps_model(w, spec)
        dense.assign()  # the same initial dense weights (make_model's seed)
        losses = train.train_steps(w, model, dense, batches, synchronous=True)
    diff = np.abs(np.asarray(losses) - np.asarray(ref_losses))
    assert len(losses) == 40
    assert diff.max() <= 1e-5, "step %d differs by %g" % (diff.argmax(), diff.max())
    assert ref_losses[-1] < ref_losses[0]  # the comparison covers real learning, not a flat start


def test_two_workers_two_shards_learn_the_planted_truth(daemon, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, os.path.join(EXAMPLES, "train.py"), "--workers", "2", "--shards", "2", "--epochs", "2",
           "--train", "40000", "--test", "10000", "--socket", daemon.socket, "--out", str(out), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    print(p.stdout)
    print(p.stderr[-3000:])
    assert p.returncode == 0
    report = json.loads(p.stdout.strip().splitlines()[-1])
    r = report["results"][0]
    assert r["system"] == "ferry"
    # The truth's own AUC is ~0.94; a model that learned nothing scores 0.5.
    assert report["oracle_auc"] > 0.9
    assert r["auc"] > 0.75, r
    assert r["epoch_loss"][1] < r["epoch_loss"][0]
    assert r["samples"] == 2 * 2 * (20000 // 256) * 256
    assert r["samples_per_s"] > 0 and r["cpu_us_per_sample"] > 0 and r["cpu_daemons_us"] > 0
    if importlib.util.find_spec("matplotlib") is not None:
        assert os.path.getsize(report["plot"]) > 10000
    else:  # a venv without it: the run still completes and says so
        assert report["plot"] is None and "no matplotlib" in p.stdout


def test_local_tables_mode_is_the_compute_ceiling_without_a_daemon(tmp_path):
    # --ps local: the same workers and model with the table in each worker
    # (no parameter server, no ferryd): it must learn and report its own CPU.
    out = tmp_path / "local"
    cmd = [sys.executable, os.path.join(EXAMPLES, "train.py"), "--ps", "local", "--workers", "2", "--epochs", "1",
           "--train", "30000", "--test", "5000", "--socket", str(tmp_path / "no-daemon.sock"), "--out", str(out),
           "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    print(p.stdout)
    print(p.stderr[-3000:])
    assert p.returncode == 0
    r = json.loads(p.stdout.strip().splitlines()[-1])["results"][0]
    assert r["system"] == "local" and r["shards"] == 0
    assert r["auc"] > 0.75, r
    assert r["samples"] == 2 * (15000 // 256) * 256
    assert r["cpu_workers_us"] > 0 and r["cpu_shards_us"] == 0 and r["cpu_daemons_us"] == 0
    assert r["of_ceiling"] == 1.0 and r["cpu_comm_us_per_sample"] == 0.0


def test_split_cpu_parts_add_up():
    ceiling = {"cpu_workers_us": 1000.0, "samples": 100, "samples_per_s": 200.0}
    r = {"cpu_workers_us": 1500.0, "samples": 100, "samples_per_s": 100.0, "cpu_us_per_sample": 25.0}
    train.split_cpu(r, ceiling)
    assert r["of_ceiling"] == 0.5
    assert r["cpu_compute_us_per_sample"] == 10.0
    assert r["cpu_comm_workers_us_per_sample"] == 5.0
    assert r["cpu_comm_us_per_sample"] == 15.0
