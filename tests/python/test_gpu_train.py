"""The GPU training benchmark (examples/python/gpu_train.py) end to end on
the CPU with a small configuration: ferry.ps, torch.distributed.rpc and
local tables, with 1 and 2 trainers; every run trains (the loss falls, the
held-out AUC is well above chance) and reports its figures. On a GPU
machine the same script runs with --device cuda (tests/gpu/device-run.sh)."""

import json
import os
import subprocess
import sys

from conftest import EXAMPLES, FERRYD


def test_gpu_training_benchmark_runs_every_system_on_the_cpu(tmp_path):
    cmd = [sys.executable, os.path.join(EXAMPLES, "gpu_train.py"), "--device", "cpu", "--trainers", "1", "2",
           "--steps", "25", "--batch", "256", "--train", "20000", "--test", "4000", "--ferryd", FERRYD,
           "--ferryd-args", "--log-level info", "--out", str(tmp_path), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=dict(os.environ, OMP_NUM_THREADS="1"))
    print(p.stdout[-4000:], p.stderr[-4000:])
    assert p.returncode == 0
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["device"] == "cpu" and report["ferryd_args"] == "--log-level info"
    runs = {(r["system"], r["trainers"]): r for r in report["results"]}
    assert set(runs) == {(s, n) for s in ("ferry", "torch-rpc", "gpu") for n in (1, 2)}
    for (system, n), r in runs.items():
        assert r["samples"] == n * 25 * 256, (system, n)
        assert r["samples_per_s"] > 0 and r["cpu_us_per_sample"] > 0
        assert r["h2d_share"] == 0.0  # no device: no host-to-device copies
        assert r["loss"] < r["first_loss"], (system, n, r)
        assert r["auc"] > 0.65, (system, n, r)
    assert runs[("ferry", 2)]["cpu_daemon_us"] > 0 and runs[("ferry", 2)]["cpu_shards_us"] > 0
    assert "ferry / torch-rpc" in p.stdout
