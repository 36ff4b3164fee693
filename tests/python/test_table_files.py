"""Whole tables to files and back (ferry.ps.save_tables / load_tables)
against real shard servers over a real ferryd: streamed a chunk at a time,
bit for bit with the optimizer state, atomic, and checked before anything
is assigned."""

import json
import os
import warnings

import numpy as np
import pytest

import ferry.ps as ps
from ps_served import served as _served

TABLES = [ps.Embedding("big", rows=5000, dim=8, optimizer=ps.Adagrad(lr=0.2), init=ps.Uniform(0.3, seed=5)),
          ps.Embedding("sgd", rows=900, dim=4, optimizer=ps.SGD(lr=0.5), init=ps.Uniform(0.3, seed=6)),
          ps.Dense("head", size=300, optimizer=ps.Adagrad(lr=0.1), init=ps.Uniform(0.2, seed=7)),
          ps.Embedding("any", rows=0, dim=4, optimizer=ps.SGD(lr=0.5))]


def served(daemon, prefix, tables=TABLES):
    """A worker over two fresh shard servers of `tables` (this file's by default)."""
    return _served(daemon, prefix, tables)


def train(w, steps, seed):
    """Pushes that change rows, Adagrad sums and the dense table."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        keys = rng.integers(0, 5000, 700)
        w.push("big", keys, rng.standard_normal((700, 8)).astype(np.float32))
        keys = rng.integers(0, 900, 200)
        w.push("sgd", keys, rng.standard_normal((200, 4)).astype(np.float32))
        w.push_dense("head", rng.standard_normal(300).astype(np.float32))


def snapshot(w):
    every, few = np.arange(5000), np.arange(900)
    return {"big": np.array(w.pull("big", every).gather()), "big.state": np.array(w.pull_state("big", every).gather()),
            "sgd": np.array(w.pull("sgd", few).gather()), "head": np.array(w.pull_dense("head")),
            "head.state": np.array(w.pull_dense_state("head"))}


def same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


class Counting:
    """A worker whose pulls and assigns are counted by size (the streaming)."""

    def __init__(self, w):
        self._w, self.sizes = w, []

    def __getattr__(self, name):
        attr = getattr(self._w, name)
        if name in ("pull_async", "pull_state_async", "assign", "assign_state"):
            def counted(table, keys, *a, **kw):
                self.sizes.append(len(keys))
                return attr(table, keys, *a, **kw)
            return counted
        return attr


def test_tables_saved_in_chunks_restore_bit_for_bit_and_train_on_the_same(daemon, tmp_path):
    out = str(tmp_path / "ckpt")
    with served(daemon, "tf-a-") as w:
        train(w, 3, 1)
        before = snapshot(w)
        counted = Counting(w)
        with pytest.warns(UserWarning, match="'any' .rows=0. left out"):
            saved = ps.save_tables(counted, out, chunk_bytes=1000 * (8 * 4 + 16))
        assert saved == {"big": 5000, "sgd": 900, "head": 300}
        # 5 chunks of 1,000 rows for big's values and 5 for its state, 1 of 900 for sgd: never a whole table.
        assert sorted(counted.sizes) == [900] + [1000] * 10
        train(w, 2, 2)
        after = snapshot(w)
    m = ps.read_manifest(out)
    assert m["tables"]["big"] == {"kind": "embedding", "rows": 5000, "dim": 8, "optimizer": "adagrad",
                                  "values": "big.values.npy", "state": "big.state.npy"}
    assert m["tables"]["sgd"]["state"] is None and m["tables"]["head"]["state"] == "head.state.npy"
    assert np.array_equal(np.load(os.path.join(out, "big.values.npy")), before["big"])  # plain numpy files
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no partial directory left

    with served(daemon, "tf-b-") as fresh:
        counted = Counting(fresh)
        assert ps.load_tables(counted, out, chunk_bytes=2000 * (8 * 4 + 16)) == {"big": 5000, "sgd": 900, "head": 300}
        assert sorted(counted.sizes) == [900, 1000, 1000] + [2000] * 4
        same(snapshot(fresh), before)
        train(fresh, 2, 2)  # the same pushes as after the save: the same rows, Adagrad sums included
        restored = snapshot(fresh)
    same(restored, after)


def test_a_save_refuses_an_existing_directory_and_overwrite_replaces_it_whole(daemon, tmp_path):
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with served(daemon, "tf-c-") as w:
        with pytest.raises(FileExistsError, match="overwrite=True"):
            ps.save_tables(w, str(out), ["sgd"])
        assert os.listdir(out) == ["mine.txt"]
        assert ps.save_tables(w, str(out), ["sgd"], overwrite=True) == {"sgd": 900}
        assert sorted(os.listdir(out)) == ["manifest.json", "sgd.values.npy"]
        with pytest.raises(ValueError, match="no row count"):
            ps.save_tables(w, str(tmp_path / "other"), ["any"])
        with pytest.raises(KeyError, match="no table 'nope'"):
            ps.save_tables(w, str(tmp_path / "other"), ["nope"])
        assert not (tmp_path / "other").exists()


def test_a_table_whose_name_is_no_file_name_is_saved_under_its_id(daemon, tmp_path):
    odd = [ps.Embedding("../emb 1", rows=10, dim=2, optimizer=ps.SGD(lr=0.1), init=ps.Uniform(0.3, seed=2))]
    out = str(tmp_path / "ckpt")
    with served(daemon, "tf-k-", odd) as w:
        w.push("../emb 1", [3], [[1.0, 2.0]])
        values = np.array(w.pull("../emb 1", np.arange(10)).gather())
        ps.save_tables(w, out)
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    assert ps.read_manifest(out)["tables"]["../emb 1"]["values"] == "table-0.values.npy"
    with served(daemon, "tf-l-", odd) as w:
        ps.load_tables(w, out)
        assert np.array_equal(np.array(w.pull("../emb 1", np.arange(10)).gather()), values)


def test_a_save_that_fails_half_way_leaves_nothing(daemon, tmp_path):
    class Failing(Counting):
        def __getattr__(self, name):
            if name == "pull_state_async":
                raise RuntimeError("the shards went away")
            return super().__getattr__(name)

    with served(daemon, "tf-d-") as w:
        with pytest.raises(RuntimeError, match="went away"):
            ps.save_tables(Failing(w), str(tmp_path / "ckpt"), ["sgd", "big"])
    assert os.listdir(tmp_path) == []


def test_a_load_checks_everything_before_it_assigns_anything(daemon, tmp_path):
    out = str(tmp_path / "ckpt")
    with served(daemon, "tf-e-") as w:
        train(w, 1, 3)
        ps.save_tables(w, out, ["big", "sgd"])
    other = [ps.Embedding("big", rows=5000, dim=8, optimizer=ps.Adagrad(lr=0.2), init=ps.Uniform(0.3, seed=9)),
             ps.Embedding("sgd", rows=900, dim=5, optimizer=ps.SGD(lr=0.5)),
             ps.Embedding("plain", rows=5000, dim=8, optimizer=ps.SGD(lr=0.5))]
    with served(daemon, "tf-f-", other) as w:
        untouched = np.array(w.pull("big", np.arange(5000)).gather())
        with pytest.raises(ValueError, match=r"table 'sgd': saved as .*'dim': 4.*the worker's is embedding \[900, 5\]"):
            ps.load_tables(w, out)  # big comes first and is fine, and still nothing is assigned
        assert np.array_equal(np.array(w.pull("big", np.arange(5000)).gather()), untouched)
        with pytest.raises(ValueError, match="holds no table 'plain'"):
            ps.load_tables(w, out, ["plain"])
        with pytest.raises(ValueError, match="no manifest.json"):
            ps.load_tables(w, str(tmp_path))
        # A truncated file is refused by its shape, before any assign.
        path = os.path.join(out, "big.state.npy")
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 4)
        with pytest.raises(ValueError, match="big.state.npy is not a readable .npy"):
            ps.load_tables(w, out, ["big"])
        assert np.array_equal(np.array(w.pull("big", np.arange(5000)).gather()), untouched)
        m = json.load(open(os.path.join(out, "manifest.json")))
        m["version"] = 2
        json.dump(m, open(os.path.join(out, "manifest.json"), "w"))
        with pytest.raises(ValueError, match="version 2, this ferry reads version 1"):
            ps.load_tables(w, out)


def test_an_sgd_save_loads_into_adagrad_with_a_warning_and_not_back(daemon, tmp_path):
    sgd_out, ada_out = str(tmp_path / "sgd"), str(tmp_path / "ada")
    as_sgd = [ps.Embedding("big", rows=5000, dim=8, optimizer=ps.SGD(lr=0.2), init=ps.Uniform(0.3, seed=4))]
    as_ada = [ps.Embedding("big", rows=5000, dim=8, optimizer=ps.Adagrad(lr=0.2), init=ps.Uniform(0.3, seed=4))]
    with served(daemon, "tf-g-", as_sgd) as w:
        ps.save_tables(w, sgd_out)
        values = np.array(w.pull("big", np.arange(5000)).gather())
    with served(daemon, "tf-h-", as_ada) as w:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert ps.load_tables(w, sgd_out) == {"big": 5000}
        assert any("its Adagrad state restarts" in str(c.message) for c in caught)
        assert np.array_equal(np.array(w.pull("big", np.arange(5000)).gather()), values)
        ps.save_tables(w, ada_out)
    with served(daemon, "tf-i-", as_sgd) as w:
        with pytest.raises(ValueError, match="saved with adagrad state, the worker's table keeps none"):
            ps.load_tables(w, ada_out)


CHUNK = 1 << 21
SAVE_IN_A_PROCESS = r"""
import resource, sys
import ferry.ps as ps
tables = [ps.Embedding("huge", rows=1_000_000, dim=16, optimizer=ps.SGD(lr=0.1), init=ps.Uniform(0.1, seed=3))]
w = ps.Worker(tables, 2, sys.argv[1], service_prefix=sys.argv[2])
w.pull("huge", list(range(4096)))  # the arena and the binding warmed up
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert ps.save_tables(w, sys.argv[3], chunk_bytes=int(sys.argv[4])) == {"huge": 1_000_000}
saved = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
assert ps.load_tables(w, sys.argv[3], chunk_bytes=int(sys.argv[4])) == {"huge": 1_000_000}
print((saved - before) * 1024, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - saved) * 1024)
w.close()
"""


def test_a_table_larger_than_the_savers_budget_passes_through_a_few_chunks_of_memory(daemon, tmp_path):
    """64 MB of rows saved and loaded in 2 MB chunks: the process's peak
    memory grows by a few chunks, not by the table (in one 64 MB chunk:
    about 190 MB)."""
    import subprocess
    import sys
    tables = [ps.Embedding("huge", rows=1_000_000, dim=16, optimizer=ps.SGD(lr=0.1), init=ps.Uniform(0.1, seed=3))]
    shards = [ps.ShardServer(tables, i, 2, daemon.socket, service_prefix="tf-j-").start() for i in range(2)]
    try:
        out = str(tmp_path / "ckpt")
        run = subprocess.run([sys.executable, "-c", SAVE_IN_A_PROCESS, daemon.socket, "tf-j-", out, str(CHUNK)],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        saving, loading = (int(x) for x in run.stdout.split()[-2:])
        assert saving < 24 << 20, "peak memory grew %d bytes saving 64 MB in 2 MB chunks" % saving
        assert loading < 24 << 20, "peak memory grew %d bytes loading 64 MB in 2 MB chunks" % loading
        saved = np.load(os.path.join(out, "huge.values.npy"), mmap_mode="r")
        keys = np.array([0, 1, 77_777, 999_999])
        assert np.array_equal(saved[keys], ps.initial_values(tables, "huge", keys))
    finally:
        for s in shards:
            s.stop()
