"""The arrays the extension takes and gives, checked element by element
against values computed one at a time: a pull's index and keys, initial
values, placement, the bag gradient; arguments of every shape numpy and
torch hand over. The extension reaches numpy only through the buffer
protocol and numpy's Python API (client/python/src/py_arrays.h): under
numpy 2 with pybind11 before 2.12, pybind11's own arrays held their first
element n times (the GPU training defect of docs/benchmarks/gpu-training.md),
and these checks, run under that numpy, are what would see it again.

Runs without pytest too, as on the lent GPU machine (its Python has numpy 2
and no pytest): ``FERRYD=... python3 tests/python/test_arrays.py`` prints a
"PASS|FAIL name" line per test and exits 1 if any failed."""

import os
import re
import sys

import numpy as np
import torch

import ferry
import ferry.ps as ps
from ferry import _ferry

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from ferryd import Ferryd  # noqa: E402  (run without pytest: no conftest puts tests/lib on the path)

SRC = os.path.join(HERE, "..", "..", "client", "python", "src")
TABLES = [ps.Embedding("emb", rows=1000, dim=4, optimizer=ps.SGD(lr=0.5), init=ps.Uniform(0.1, seed=3))]


def raises(kind, f, *args):
    """The exception f(*args) raises, which must be a `kind`."""
    try:
        f(*args)
    except kind as e:
        return e
    raise AssertionError("%s did not raise %s" % (f.__name__, kind.__name__))


def test_the_extension_does_not_use_numpys_c_api():
    used = []
    for name in sorted(os.listdir(SRC)):
        with open(os.path.join(SRC, name)) as f:
            text = f.read()
        if re.search(r"#include\s*<pybind11/numpy\.h>|\barray_t\s*<", text):
            used.append(name)
    assert used == [], "pybind11's numpy layer in %s: use py_arrays.h" % used


def test_a_pulls_index_and_keys_name_each_keys_own_row():
    d = Ferryd(os.environ["FERRYD"], prefix="ferry-arrays-")
    shards = [ps.ShardServer(TABLES, i, 3, d.socket, service_prefix="arrays-").start() for i in range(3)]
    try:
        pull_and_check(d.socket)
    finally:
        for s in shards:
            s.stop()
        d.stop()


def pull_and_check(socket):
    keys = np.array([7, 500, 7, 999, 42, 500, 3, 7, 1, 998], dtype=np.int64)
    with ps.Worker(TABLES, 3, socket, service_prefix="arrays-") as w:
        r = w.pull("emb", keys)
        assert r.index.shape == (10,) and r.keys.shape == (7,)
        assert sorted(r.keys.tolist()) == sorted(set(keys.tolist()))
        for i, k in enumerate(keys):
            assert int(r.keys[r.index[i]]) == k, "position %d" % i
            one = w.pull("emb", np.array([k]))
            assert torch.equal(r.rows[r.index[i]], one.rows[0]), "key %d" % k
            del one
        assert len(set(r.index.tolist())) == 7
        assert torch.equal(r.gather(), torch.from_numpy(ps.initial_values(TABLES, "emb", keys)))
        r.index[0] = r.index[1]  # the arrays are the caller's own copies, writable
        del r


def test_arrays_made_by_the_extension_hold_each_value():
    spec = ps.tables.specs(TABLES)[0]
    keys = np.array([5, 0, 999, 17, 5], dtype=np.int64)
    many = _ferry.ps.initial_values(spec, keys)
    assert many.shape == (5, 4) and many.dtype == np.float32 and many.flags.writeable
    for i, k in enumerate(keys):
        assert np.array_equal(many[i], _ferry.ps.initial_values(spec, np.array([k]))[0])
    assert not np.array_equal(many[0], many[1])
    placed = _ferry.ps.shard_of(spec.id, keys, 4)
    assert placed.dtype == np.uint32 and placed.shape == (5,)
    assert placed.tolist() == [int(_ferry.ps.shard_of(spec.id, np.array([k]), 4)[0]) for k in keys]
    assert len(set(_ferry.ps.shard_of(spec.id, np.arange(64), 4).tolist())) == 4
    empty = _ferry.ps.initial_values(spec, np.array([], dtype=np.int64))
    assert empty.shape == (0, 4)


def test_the_bag_gradient_adds_each_bags_gradient_into_its_rows():
    index = np.array([2, 0, 2, 1, 0, 2], dtype=np.int64)  # position -> row
    order = np.argsort(np.array([9, 4, 9, 6, 4, 9]), kind="stable")
    grad_out = np.arange(6, dtype=np.float32).reshape(3, 2)  # 3 bags of 2 positions
    got = _ferry.ps.bag_grad(order, index, np.array([], dtype=np.int64), 2, grad_out, 3)
    want = np.zeros((3, 2), np.float32)
    for p in range(6):
        want[index[p]] += grad_out[p // 2]
    assert got.shape == (3, 2) and np.array_equal(got, want)


def test_arguments_convert_as_numpy_converts_them():
    spec = ps.tables.specs(TABLES)[0]
    keys = np.array([5, 0, 999, 17], dtype=np.int64)
    grad_out = np.arange(8, dtype=np.float32).reshape(2, 4)
    args = (np.array([0, 1, 2, 3]), np.array([0, 1, 0, 1]), np.array([], dtype=np.int64), 2)
    variants = {
        "a list": lambda a: a.tolist(),
        "another dtype": lambda a: a.astype(np.float64),
        "strided": lambda a: np.repeat(a, 2, axis=-1)[..., ::2],
        "a torch tensor": lambda a: torch.from_numpy(a.copy()),
        "the other byte order": lambda a: a.astype(a.dtype.newbyteorder()),
    }
    for what, make in variants.items():
        assert np.array_equal(_ferry.ps.initial_values(spec, make(keys)), _ferry.ps.initial_values(spec, keys)), what
        assert np.array_equal(_ferry.ps.bag_grad(*args, make(grad_out), 2), _ferry.ps.bag_grad(*args, grad_out, 2)), \
            what


def test_what_no_array_can_be_is_refused_clearly():
    spec = ps.tables.specs(TABLES)[0]
    assert "incompatible function arguments" in str(raises(TypeError, _ferry.ps.initial_values, spec, "not keys"))
    raises(TypeError, _ferry.ps.initial_values, spec, [object()])
    raises(ferry.BadRequest, _ferry.ps.bag_grad, np.array([0]), np.array([0]), np.array([], dtype=np.int64), 1,
           np.ones(4, np.float32), 1)  # grad_out must be 2-D


def main():
    """Runs every test: exit 1 if any failed."""
    failed = 0
    for name, f in sorted((n, f) for n, f in globals().items() if n.startswith("test_") and callable(f)):
        try:
            f()
            print("PASS", name, flush=True)
        except Exception as e:  # report and go on to the next test
            failed += 1
            print("FAIL", name, "%s: %s" % (type(e).__name__, e), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
