"""Training the DLRM-style model through ferry.ps (real ferryd, real shard
processes): with one worker and synchronous pull/push the per-step losses
equal a single-process PyTorch reference (same initial rows and weights, same
batches, torch.optim.Adagrad on nn.EmbeddingBag); and with 2 workers x 2
shards the model learns the planted truth (held-out AUC far above 0.5)."""

import json
import os
import subprocess
import sys

import numpy as np
import torch

import ferry.ps as ps
from ferry.ps import dlrm, train


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
    cmd = [sys.executable, "-m", "ferry.ps.train", "--workers", "2", "--shards", "2", "--epochs", "2",
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
    assert os.path.getsize(report["plot"]) > 10000
