"""Shard-side checkpoints (ferry.ps.save_shards, ``python3 -m
ferry.ps.server --checkpoint-dir DIR --restore NAME``) with real shard
processes, each with a directory of its own as if on its own host: every
shard writes its part, plain .npy files; shards started from it hold the
same rows, values and Adagrad state bit for bit, a table of any 64-bit key
included, and so does one shard started from both parts (resharding); and
what is refused says why."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import ferry
import ferry.ps as ps

TABLES = [ps.Embedding("big", rows=5000, dim=8, optimizer=ps.Adagrad(lr=0.2), init=ps.Uniform(0.3, seed=5)),
          ps.Embedding("any", rows=0, dim=4, optimizer=ps.SGD(lr=0.5), init=ps.Uniform(0.3, seed=6)),
          ps.Dense("head", size=300, optimizer=ps.Adagrad(lr=0.1), init=ps.Uniform(0.2, seed=7))]
ANY_KEYS = (np.arange(3000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).astype(np.int64)


def start_shard(daemon, index, shards, *extra, tables=TABLES):
    tj = json.dumps([t.to_dict() for t in tables])
    p = subprocess.Popen([sys.executable, "-m", "ferry.ps.server", "--socket", daemon.socket, "--tables", tj,
                          "--shard", "%d/%d" % (index, shards)] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("ready "):
        p.kill()
        out, err = p.communicate(timeout=10)
        pytest.fail("shard %d did not start: %s%s%s" % (index, line, out, err))
    return p


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err


def train(w, seed):
    rng = np.random.default_rng(seed)
    for _ in range(4):
        w.push("big", rng.integers(0, 5000, 700), rng.standard_normal((700, 8)).astype(np.float32))
        w.push("any", ANY_KEYS[rng.integers(0, len(ANY_KEYS), 500)], rng.standard_normal((500, 4)).astype(np.float32))
        w.push_dense("head", rng.standard_normal(300).astype(np.float32))


def snapshot(w):
    every = np.arange(5000)
    return {"big": np.array(w.pull("big", every).gather()),
            "big.state": np.array(w.pull_state("big", every).gather()),
            "any": np.array(w.pull("any", ANY_KEYS).gather()),
            "head": np.array(w.pull_dense("head")), "head.state": np.array(w.pull_dense_state("head"))}


def test_each_shard_saves_its_part_on_its_host_and_starts_from_it_bit_for_bit(daemon, tmp_path):
    dirs = [tmp_path / "host0", tmp_path / "host1"]
    for d in dirs:
        d.mkdir()
    shards = [start_shard(daemon, i, 2, "--checkpoint-dir", str(dirs[i])) for i in range(2)]
    try:
        with ps.Worker(TABLES, 2, daemon.socket) as w:
            train(w, 1)
            before = snapshot(w)
            saved = ps.save_shards(w, "step-4", step_bytes=4096)  # many steps a shard
    finally:
        stop(shards)
    assert set(saved) == {"big", "any", "head"}
    assert sum(saved["head"]) == 300
    assert 0 < sum(saved["any"]) <= len(ANY_KEYS)
    for i, d in enumerate(dirs):
        part = d / "step-4" / ("big.shard-%d-of-2" % i)
        meta = json.loads((d / "step-4" / ("big.shard-%d-of-2.json" % i)).read_text())
        assert meta["table"] == "big" and meta["shard"] == i and meta["shards"] == 2 and meta["dim"] == 8
        assert meta["rows"] == saved["big"][i]
        keys = np.load(str(part) + ".keys.npy", mmap_mode="r")
        values = np.load(str(part) + ".values.npy", mmap_mode="r")
        state = np.load(str(part) + ".state.npy", mmap_mode="r")
        assert keys.dtype == np.uint64 and values.shape == (saved["big"][i], 8) and state.shape == values.shape
        assert np.array_equal(values, before["big"][keys.astype(np.int64)])  # numpy reads the part as it is
        assert np.array_equal(ps.shard_of(0, keys.astype(np.int64), 2), np.full(len(keys), i))
        assert not [f for f in os.listdir(d / "step-4") if f.startswith(".")]  # nothing half written

    restored = [start_shard(daemon, i, 2, "--checkpoint-dir", str(dirs[i]), "--restore", "step-4") for i in range(2)]
    try:
        with ps.Worker(TABLES, 2, daemon.socket) as w:
            after = snapshot(w)
            for k in before:
                assert np.array_equal(before[k], after[k]), k
            again = ps.save_shards(w, "step-4b")  # the restored shards hold exactly the rows saved
    finally:
        stop(restored)
    assert again == saved

    # One shard from the two's checkpoint (resharding): it needs both parts in its directory.
    r = subprocess.run([sys.executable, "-m", "ferry.ps.server", "--socket", daemon.socket, "--tables",
                        json.dumps([t.to_dict() for t in TABLES]), "--shard", "0/1", "--checkpoint-dir", str(dirs[0]),
                        "--restore", "step-4"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "give every shard all 2 parts (copy them here" in r.stderr
    merged = tmp_path / "merged" / "step-4"
    merged.mkdir(parents=True)
    for d in dirs:
        for f in os.listdir(d / "step-4"):
            os.link(d / "step-4" / f, merged / f)
    one = start_shard(daemon, 0, 1, "--checkpoint-dir", str(tmp_path / "merged"), "--restore", "step-4")
    try:
        with ps.Worker(TABLES, 1, daemon.socket) as w:
            resharded = snapshot(w)
    finally:
        stop([one])
    for k in before:
        assert np.array_equal(before[k], resharded[k]), k


def test_what_shard_side_saves_refuse(daemon, tmp_path):
    (tmp_path / "ckpt").mkdir()
    plain = start_shard(daemon, 0, 1, "--service-prefix", "plain-")
    with_dir = start_shard(daemon, 0, 1, "--service-prefix", "saves-", "--checkpoint-dir", str(tmp_path / "ckpt"))
    try:
        with ps.Worker(TABLES, 1, daemon.socket, service_prefix="plain-") as w:
            with pytest.raises(ferry.Error) as e:
                ps.save_shards(w, "x")
            assert e.value.status == "NotSupported"
            assert "started without a checkpoint directory (--checkpoint-dir)" in str(e.value)
        with ps.Worker(TABLES, 1, daemon.socket, service_prefix="saves-") as w:
            assert ps.save_shards(w, "one", tables=["head"]) == {"head": [300]}
            with pytest.raises(ferry.Error) as e:
                ps.save_shards(w, "one", tables=["head"])
            assert "Exists" in str(e.value) and "choose another name" in str(e.value)
            for bad in ("../up", ".hidden", "a b"):
                with pytest.raises(ferry.Error) as e:
                    ps.save_shards(w, bad)
                assert "BadField" in str(e.value)
            with pytest.raises(ValueError):
                ps.save_shards(w, "")
            with pytest.raises(KeyError):
                ps.save_shards(w, "two", tables=["nope"])
    finally:
        stop([plain, with_dir])

    def server(*extra):
        tj = json.dumps([t.to_dict() for t in TABLES])
        return subprocess.run([sys.executable, "-m", "ferry.ps.server", "--socket", daemon.socket, "--tables", tj]
                              + list(extra), capture_output=True, text=True, timeout=60)

    r = server("--shard", "0/1", "--checkpoint-dir", str(tmp_path / "ckpt"), "--save-stall-s", "-1")
    assert r.returncode == 2 and "--save-stall-s: from 0 (no limit) to 86400 seconds" in r.stderr
    with pytest.raises(ValueError):
        ps.ShardServer(TABLES, 0, 1, daemon.socket, save_stall_s=float("nan"))
    r = server("--shard", "0/1", "--restore", "one")
    assert r.returncode == 2 and "--restore NAME needs --checkpoint-dir" in r.stderr
    r = server("--shard", "0/1", "--checkpoint-dir", str(tmp_path / "ckpt"), "--restore", "one")
    assert r.returncode == 2  # a restore that cannot be is a configuration the shard refuses (BadRequest)
    assert r.stderr.strip().splitlines() == [
        "ferry.ps.server: shard 0/1: checkpoint 'one' has no part of table 'big' for shard 0 of 1 (%s.json is "
        "missing: that save did not finish, or went to another host)" % (tmp_path / "ckpt" / "one" / "big.shard-0-of-1")]
    r = server("--shard", "0/1", "--checkpoint-dir", str(tmp_path / "none"))
    assert r.returncode == 2 and "is not a directory" in r.stderr


def test_a_shard_serves_while_its_save_step_waits_for_the_disk(daemon, tmp_path):
    """A save step's files are written by the shard's writer thread: while
    they block (the keys file is a FIFO, so the writer's open() waits until
    this test reads it), the shard process answers pulls and pushes; the
    step is answered after, once, with what went wrong (a FIFO cannot be
    synced), and the next save writes its part."""
    d = tmp_path / "host0"
    (d / "blocked").mkdir(parents=True)
    fifo = d / "blocked" / ".big.shard-0-of-1.keys.npy.tmp"
    os.mkfifo(fifo)
    shard = start_shard(daemon, 0, 1, "--checkpoint-dir", str(d))
    try:
        with ps.Worker(TABLES, 1, daemon.socket) as w:
            train(w, 3)
            op = w._w.save(w.table("big").id, "blocked", [0], 1 << 16)
            keys = np.arange(0, 5000, 7)
            before = np.array(w.pull("big", keys).gather())
            w.push("big", keys, np.ones((len(keys), 8), np.float32))
            assert not np.array_equal(np.array(w.pull("big", keys).gather()), before)
            assert not op.done()
            with open(fifo, "rb") as f:  # the writer goes on: header and keys into the FIFO
                while f.read(65536):
                    pass
            with pytest.raises(ferry.Error) as e:
                op.wait(30)
            assert "IoFailed" in str(e.value)
            op.release()
            assert not fifo.exists() and not any((d / "blocked").iterdir())
            saved = ps.save_shards(w, "after", tables=["big"])
            assert 0 < saved["big"][0] <= 5000
    finally:
        stop([shard])
    assert (d / "after" / "big.shard-0-of-1.json").exists()


def test_a_shard_whose_disk_hangs_mid_save_still_serves_and_stops(daemon, tmp_path):
    """A save step whose files never open (the keys file a FIFO no one
    reads: a disk or network filesystem that hangs) holds up neither the
    shard's answers nor its exit: SIGTERM stops it cleanly, and the step's
    call fails instead of waiting forever."""
    d = tmp_path / "host0"
    (d / "hung").mkdir(parents=True)
    os.mkfifo(d / "hung" / ".big.shard-0-of-1.keys.npy.tmp")
    shard = start_shard(daemon, 0, 1, "--checkpoint-dir", str(d))
    try:
        with ps.Worker(TABLES, 1, daemon.socket) as w:
            train(w, 4)
            op = w._w.save(w.table("big").id, "hung", [0], 1 << 16)
            assert np.array(w.pull("big", np.arange(10)).gather()).shape == (10, 8)
            shard.terminate()
            out, err = shard.communicate(timeout=30)
            assert shard.returncode == 0, err
            with pytest.raises(ferry.Error):
                op.wait(30)
            op.release()
    finally:
        stop([shard])


def test_a_save_whose_disk_hangs_fails_after_the_stall_limit_and_later_ones_at_once(daemon, tmp_path):
    """--save-stall-s: a save step whose writer sits in one filesystem call
    that long (its keys file a FIFO no one reads) is answered IoFailed, with
    a line on the shard's stderr saying why; while that call has not
    returned, saves are refused at once (no second thread joins it there)
    and everything else is served; once it returns, saves work again. Each
    failed step counts in ferry_ps_shard_save_failed_total."""
    import urllib.request
    from conftest import free_port
    d = tmp_path / "host0"
    (d / "hung").mkdir(parents=True)
    fifo = d / "hung" / ".big.shard-0-of-1.keys.npy.tmp"
    os.mkfifo(fifo)
    port = free_port(1)
    shard = start_shard(daemon, 0, 1, "--checkpoint-dir", str(d), "--save-stall-s", "0.5",
                        "--metrics", "127.0.0.1:%d" % port)
    try:
        with ps.Worker(TABLES, 1, daemon.socket) as w:
            train(w, 5)
            began = time.monotonic()
            with pytest.raises(ferry.Error) as e:
                ps.save_shards(w, "hung", tables=["big"])
            assert "IoFailed" in str(e.value) and time.monotonic() - began >= 0.5
            began = time.monotonic()
            with pytest.raises(ferry.Error) as e:
                ps.save_shards(w, "next", tables=["big"])
            assert "IoFailed" in str(e.value) and time.monotonic() - began < 0.5
            assert not (d / "next").exists()
            assert np.array(w.pull("big", np.arange(10)).gather()).shape == (10, 8)
            with open(fifo, "rb") as f:  # the stuck open() returns; the writer finds its step given up
                while f.read(65536):
                    pass
            deadline = time.monotonic() + 30
            while (fifo.exists() or any((d / "hung").iterdir())) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not any((d / "hung").iterdir())
            saved = ps.save_shards(w, "after", tables=["big"])
            assert 0 < saved["big"][0] <= 5000
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            text = r.read().decode()
        base = 'service="ps-shard-0",shard="0",shards="1"'
        assert "ferry_ps_shard_save_failed_total{%s} 2\n" % base in text
    finally:
        shard.terminate()
        out, err = shard.communicate(timeout=30)
    assert shard.returncode == 0, err
    assert "its writer has been in one filesystem call for over 500 ms" in err
    assert "save of 'next' refused: an earlier save is still stuck in the filesystem" in err
    assert (d / "after" / "big.shard-0-of-1.json").exists()


def test_an_operator_saves_from_outside_the_job(daemon, tmp_path):
    """python3 -m ferry.ps.save NAME: a worker of its own has the shards save; one JSON line, or one error line."""
    d = tmp_path / "ckpt"
    d.mkdir()
    tj = json.dumps([t.to_dict() for t in TABLES])
    shards = [start_shard(daemon, i, 2, "--checkpoint-dir", str(d)) for i in range(2)]
    try:
        with ps.Worker(TABLES, 2, daemon.socket) as w:
            train(w, 3)

        def save(*args):
            return subprocess.run([sys.executable, "-m", "ferry.ps.save", "--socket", daemon.socket, "--tables", tj,
                                   "--shards", "2"] + list(args), capture_output=True, text=True, timeout=120)

        r = save("nightly", "--table", "big", "--table", "head")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["name"] == "nightly" and set(out["tables"]) == {"big", "head"} and sum(out["tables"]["head"]) == 300
        files = {"big": ("json", "keys.npy", "values.npy", "state.npy"), "head": ("json", "values.npy", "state.npy")}
        assert sorted(os.listdir(d / "nightly")) == sorted(
            "%s.shard-%d-of-2.%s" % (t, i, f) for t in files for i in range(2) for f in files[t])
        r = save("nightly", "--table", "head")
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Exists" in r.stderr
        r = save("x", "--table", "nope")
        assert r.returncode == 2 and "--table 'nope': not among the tables" in r.stderr
    finally:
        stop(shards)


def test_the_checkpoint_benchmark_runs_every_arm(daemon):
    """examples/python/checkpoint_bench.py (docs/benchmarks/checkpoints.md), small: every arm runs and reports."""
    from conftest import EXAMPLES
    cmd = [sys.executable, os.path.join(EXAMPLES, "checkpoint_bench.py"), "--rows", "20000", "--dim", "16",
           "--repeat", "1", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=dict(os.environ, FERRY_SOCKET=daemon.socket))
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    for arm in ("save_tables", "load_tables", "save_shards", "start", "restore", "whole"):
        assert report[arm]["s"] > 0 and report[arm]["worker_cpu_s"] >= 0, (arm, report)
    for phase in ("idle", "saving"):
        r = report["pulls"][phase]
        assert r["pulls"] > 0 and 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"], (phase, report)


def test_a_save_after_a_ferryd_restart_attaches_again_and_saves_the_rows_kept(daemon, tmp_path):
    """ferryd restarted under the job: the shard keeps its rows, and a save as
    the worker's first operation after it attaches again and saves them."""
    import select
    d = tmp_path / "ckpt"
    d.mkdir()
    shard = start_shard(daemon, 0, 1, "--checkpoint-dir", str(d))
    try:
        with ps.Worker(TABLES, 1, daemon.socket, timeout=30) as w:
            train(w, 4)
            before = snapshot(w)
            daemon.restart()
            deadline = time.monotonic() + 30
            seen = b""
            while b"is back" not in seen:  # the shard's line once it serves on the new ferryd
                assert time.monotonic() < deadline, "the shard did not attach again: %r" % seen
                if select.select([shard.stderr], [], [], 1)[0]:  # the pipe itself: no text buffer to hide lines
                    chunk = os.read(shard.stderr.fileno(), 4096)
                    assert chunk, "the shard exited: %r" % seen
                    seen += chunk
            saved = ps.save_shards(w, "after-restart")
            assert w.reattached == 1
            assert sum(saved["head"]) == 300 and sum(saved["big"]) > 0
            for k, v in snapshot(w).items():  # the rows the shard kept across the restart
                assert np.array_equal(v, before[k]), k
    finally:
        stop([shard])
    restored = start_shard(daemon, 0, 1, "--checkpoint-dir", str(d), "--restore", "after-restart")
    try:
        with ps.Worker(TABLES, 1, daemon.socket) as w:
            for k, v in snapshot(w).items():
                assert np.array_equal(v, before[k]), k
    finally:
        stop([restored])
