"""torchrun with ferry.ps: two shard servers (``python3 -m ferry.ps.server
--store``) on one ferryd publish themselves in the job's torch.distributed
store; ``torchrun --nproc_per_node 2`` starts examples/python/torchrun_train.py
on another ferryd, whose trainers find the shards with
``ferry.ps.Worker.from_env`` and train (the loss falls on every rank).
Rank 0 saves a checkpoint; a second job, on fresh shards, resumes from it
and starts where the first one ended; so does one whose shards saved
their own parts and start from them (``--save-shards``, ``--restore``). Worker.from_env names what a launcher
left out of the environment."""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import EXAMPLES, Helper, free_port

import ferry.ps as ps


def job(two_daemons, tmp_path, tables, *args, shard_args=lambda i: []):
    """One torchrun job of two trainers against two fresh shard servers: (returncode, output, shards' logs)."""
    shards_daemon, trainers_daemon = two_daemons
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # --redirects 2 --tee 2: stderr to a log and to us. Debian 12's torch 1.13 on Python 3.11 cannot
    # parse the default "0" (IntFlag no longer iterates NONE) and fails before starting anything.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(port), "--redirects", "2", "--tee", "2", "--log_dir", str(tmp_path / ("logs%d" % port)),
           os.path.join(EXAMPLES, "torchrun_train.py"), "--tables", str(tables), "--json"] + list(args)
    env_t = dict(env, FERRY_SOCKET=trainers_daemon.socket)
    trainers = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env_t)
    shards = []
    try:
        # The shards come up after the launcher: they wait for its store, then publish.
        for i in range(2):
            shards.append(Helper("shard", shards_daemon.socket, "@" + str(tables), "%d/2" % i, "--store",
                                 "127.0.0.1:%d" % port, "--store-timeout", "60", *shard_args(i)))
        out, _ = trainers.communicate(timeout=240)
    finally:
        if trainers.poll() is None:
            trainers.kill()
            trainers.wait(10)
        served = [s.stop() for s in shards]
    print(out[-4000:])
    return trainers.returncode, out, served


def report_of(out):
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def test_torchrun_two_trainers_find_two_shards_on_another_ferryd(two_daemons, tmp_path):
    tables = tmp_path / "tables.json"
    example = os.path.join(EXAMPLES, "torchrun_train.py")
    subprocess.run([sys.executable, example, "--write-tables", str(tables)], check=True, timeout=60)
    ckpt = tmp_path / "ckpt.pt"
    rc, out, served = job(two_daemons, tmp_path, tables, "--steps", "120", "--save", str(ckpt))
    assert rc == 0
    assert "rank 0 step 0" in out and "rank 1 step 0" in out
    report = report_of(out)
    assert report["ranks"] == 2 and report["shards"] == 2
    assert report["final_loss"] < 0.8 * report["first_loss"], report  # it learned through the shards
    # Both shards served both trainers: each saw pulls and pushes.
    for log in served:
        counters = json.loads(log.split("served ", 1)[1].splitlines()[0])
        assert counters["pulls"] > 0 and counters["pushes"] > 0, counters
    saved = torch.load(str(ckpt))
    assert saved["model"]["bag.weight"].shape == (50_000, 16) and set(saved["ps"]) == {"bag"}
    # A new job on new shards (their rows start from init) resumes where the first one ended.
    rc, out, _ = job(two_daemons, tmp_path, tables, "--steps", "20", "--resume", str(ckpt))
    assert rc == 0
    resumed = report_of(out)
    assert resumed["first_loss"] < (report["first_loss"] + report["final_loss"]) / 2, (report, resumed)


def test_torchrun_resumes_from_the_shards_own_checkpoint(two_daemons, tmp_path):
    """--save-shards: each shard writes its part to its own directory; the next job's shards start from it."""
    tables = tmp_path / "tables.json"
    example = os.path.join(EXAMPLES, "torchrun_train.py")
    subprocess.run([sys.executable, example, "--write-tables", str(tables)], check=True, timeout=60)
    dirs = [tmp_path / ("shard%d" % i) for i in range(2)]
    for d in dirs:
        d.mkdir()
    ckpt = tmp_path / "head.pt"
    rc, out, _ = job(two_daemons, tmp_path, tables, "--steps", "120", "--save", str(ckpt), "--save-shards", "run1",
                     shard_args=lambda i: ["--checkpoint-dir", str(dirs[i])])
    assert rc == 0
    report = report_of(out)
    saved = torch.load(str(ckpt))
    assert saved["shards"] == "run1" and set(saved["model"]) == {"head.weight", "head.bias"}  # no table in it
    for i, d in enumerate(dirs):
        assert (d / "run1" / ("emb.shard-%d-of-2.json" % i)).exists()
    rc, out, _ = job(two_daemons, tmp_path, tables, "--steps", "20", "--resume", str(ckpt),
                     shard_args=lambda i: ["--checkpoint-dir", str(dirs[i]), "--restore", "run1"])
    assert rc == 0
    assert "table from the shards' checkpoint run1" in out
    resumed = report_of(out)
    assert resumed["first_loss"] < (report["first_loss"] + report["final_loss"]) / 2, (report, resumed)


def test_from_env_names_what_the_launcher_left_out(monkeypatch):
    tables = [ps.Embedding("t", rows=10, dim=4)]
    launcher = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    cases = [
        ({}, "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set (start the trainers with torchrun"),
        ({"MASTER_PORT": None}, "MASTER_PORT not set"),
        ({"RANK": "x"}, "RANK must be a number, got 'x'"),
        ({"WORLD_SIZE": ""}, "WORLD_SIZE must be a number, got ''"),
    ]
    for change, want in cases:
        env = dict(launcher, **change) if change else {}
        for v in launcher:
            monkeypatch.delenv(v, raising=False)
        for k, v in env.items():
            if v is not None:
                monkeypatch.setenv(k, v)
        with pytest.raises(RuntimeError) as e:
            ps.Worker.from_env(tables, store_timeout=1)
        assert want in str(e.value), str(e.value)
