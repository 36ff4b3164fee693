"""ferry.ps against real ferryd and shard processes: a pull returns what the
pushes made, the optimizers' arithmetic equals torch.optim's, duplicate keys
are coalesced, a key outside a table is named and changes nothing, a worker
whose tables or shard count differ from its shards' is told so, reprs say
what an object is and its state, pulls are zero copy (the tensor is the
response block), dense tables, a shard killed mid-training gives the worker
an error within its timeout, the documented placement hash, and the torch
modules."""

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import ferry
import ferry.ps as ps
from ferry.ps.torch import EmbeddingBag


def start_shards(helpers, daemon, tables, n):
    tj = json.dumps([t.to_dict() for t in tables])
    return [helpers("shard", daemon.socket, tj, "%d/%d" % (i, n)) for i in range(n)]


def test_pull_returns_what_pushes_made(daemon, helpers):
    tables = [ps.Embedding("emb", rows=1000, dim=8, optimizer=ps.SGD(lr=0.5), init=ps.Uniform(0.1, seed=3))]
    start_shards(helpers, daemon, tables, 2)
    with ps.Worker(tables, 2, daemon.socket) as w:
        keys = np.array([3, 500, 999, 42])
        before = w.pull("emb", keys).gather().clone()
        assert torch.equal(before, torch.from_numpy(ps.initial_values(tables, "emb", keys)))
        g = torch.arange(32, dtype=torch.float32).view(4, 8) / 8
        w.push("emb", keys, g)
        w.push("emb", keys[:2], g[:2])
        after = w.pull("emb", keys).gather()
        want = before - 0.5 * g
        want[:2] -= 0.5 * g[:2]
        assert torch.equal(after, want)


def test_optimizer_arithmetic_matches_torch_optim(daemon, helpers):
    tables = [ps.Embedding("ada", rows=64, dim=4, optimizer=ps.Adagrad(lr=0.3, initial_accumulator_value=0.1),
                           init=ps.Uniform(0.5, seed=1)),
              ps.Dense("sgd", 10, optimizer=ps.SGD(lr=0.25), init=ps.Uniform(1.0, seed=2))]
    start_shards(helpers, daemon, tables, 2)
    keys = np.arange(64)
    ada = torch.nn.Parameter(torch.from_numpy(ps.initial_values(tables, "ada", keys)))
    dense = torch.nn.Parameter(torch.from_numpy(ps.initial_values(tables, "sgd", np.arange(10)).reshape(-1)))
    opt_a = torch.optim.Adagrad([ada], lr=0.3, initial_accumulator_value=0.1)
    opt_s = torch.optim.SGD([dense], lr=0.25)
    gen = torch.Generator().manual_seed(5)
    with ps.Worker(tables, 2, daemon.socket) as w:
        for _ in range(5):
            ga = torch.randn(64, 4, generator=gen)
            gs = torch.randn(10, generator=gen)
            w.push("ada", keys, ga)
            w.push_dense("sgd", gs)
            ada.grad, dense.grad = ga, gs
            opt_a.step()
            opt_s.step()
        # Bit for bit: the shards round as torch's (fused multiply-add) CPU kernels do.
        assert torch.equal(w.pull("ada", keys).gather(), ada.detach())
        assert torch.equal(w.pull_dense("sgd"), dense.detach())


def test_duplicate_keys_are_coalesced(daemon, helpers):
    tables = [ps.Embedding("emb", rows=100, dim=2, optimizer=ps.Adagrad(lr=0.5), init=ps.Zeros())]
    start_shards(helpers, daemon, tables, 2)
    with ps.Worker(tables, 2, daemon.socket) as w:
        keys = torch.tensor([7, 7, 7, 9, 7])
        r = w.pull("emb", keys)
        assert r.rows.shape == (2, 2)  # each distinct key once
        assert sorted(r.keys.tolist()) == [7, 9]
        assert [r.keys[i].item() for i in r.index] == keys.tolist()
        # A push with duplicates sums them first: Adagrad sees one gradient per key.
        w.push("emb", keys, torch.ones(5, 2))
        ref = torch.nn.Parameter(torch.zeros(100, 2))
        opt = torch.optim.Adagrad([ref], lr=0.5)
        ref.grad = torch.zeros(100, 2).index_add_(0, keys, torch.ones(5, 2))
        opt.step()
        got = w.pull("emb", np.array([7, 9])).gather()
        assert torch.allclose(got, ref.detach()[[7, 9]], atol=1e-7, rtol=0)
        del r


def test_a_key_outside_the_table_is_named_and_changes_nothing(daemon, helpers):
    tables = [ps.Embedding("emb", rows=100, dim=2, optimizer=ps.Adagrad(lr=0.5), init=ps.Zeros())]
    start_shards(helpers, daemon, tables, 2)
    with ps.Worker(tables, 2, daemon.socket) as w:
        calls = [
            ("pull", 100, lambda: w.pull("emb", [1, 100])),
            ("push", 250, lambda: w.push("emb", [5, 7, 250], torch.ones(3, 2))),
            ("assign", -1, lambda: w.assign("emb", np.array([-1, 3]), torch.ones(2, 2))),
            ("pull_state", 101, lambda: w.pull_state("emb", [101])),
            ("assign_state", 102, lambda: w.assign_state("emb", [4, 102], torch.ones(2, 2))),
            ("pull", 150, lambda: EmbeddingBag(w, "emb", mode="sum")(torch.tensor([[2, 150]]))),
        ]
        for what, key, call in calls:
            with pytest.raises(ferry.BadRequest) as e:
                call()
            assert str(e.value) == "%s not started: key %d is outside table 'emb', whose keys are 0..99" % (what, key)
        # Refused whole: the valid keys of the refused push, assign and assign_state kept their rows.
        assert torch.equal(w.pull("emb", [3, 4, 5, 7]).gather(), torch.zeros(4, 2))
        assert torch.equal(w.pull_state("emb", [3, 4, 5, 7]).gather(), torch.zeros(4, 2))


def test_a_worker_that_disagrees_with_its_shards_is_told_how(daemon, helpers):
    tables = [ps.Embedding("emb", rows=100, dim=4, init=ps.Zeros())]
    start_shards(helpers, daemon, tables, 2)
    hint = "the worker's tables or shard count differ from the shard's"
    wider = [ps.Embedding("emb", rows=100, dim=8)]
    longer = [ps.Embedding("emb", rows=1000, dim=4)]
    with ps.Worker(wider, 2, daemon.socket) as w, pytest.raises(ferry.BadRequest, match="BadDim; " + hint):
        w.pull("emb", [1, 2])
    with ps.Worker(longer, 2, daemon.socket) as w, pytest.raises(ferry.BadRequest, match="BadKey; " + hint):
        w.pull("emb", [500])
    # One shard where there are two: every key goes to shard 0, which refuses those it does not hold.
    with ps.Worker(tables, 1, daemon.socket) as w, pytest.raises(ferry.BadRequest, match="BadKey; " + hint):
        w.assign("emb", np.arange(10), torch.ones(10, 4))
    with ps.Worker(tables, 2, daemon.socket) as w:
        assert torch.equal(w.pull("emb", np.arange(10)).gather(), torch.zeros(10, 4))  # the refused assign changed nothing


def test_reprs_say_what_an_object_is_and_its_state(daemon):
    tables = [ps.Embedding("emb", rows=100, dim=4), ps.Dense("mlp", 6)]
    server = ps.ShardServer(tables, 0, 1, daemon.socket, service_prefix="repr-").start()
    assert repr(server) == "<ferry.ps.ShardServer repr-0: shard 0 of 1 of 'emb', 'mlp', running>"
    w = ps.Worker(tables, 1, daemon.socket, service_prefix="repr-")
    assert repr(w) == "<ferry.ps.Worker of 'emb', 'mlp' over 1 shard: 0 live ops>"
    rows = w.pull("emb", [1, 2, 2])
    assert repr(rows) == "<ferry.ps.Rows of 'emb': 3 keys, 2 rows x 4, zero copy>"
    assert repr(w) == "<ferry.ps.Worker of 'emb', 'mlp' over 1 shard: 1 live ops>"
    pending = w.pull_dense_async("mlp")
    assert repr(pending) in ("<ferry.ps.Pending: in flight>", "<ferry.ps.Pending: Ok>")
    values = pending.wait()
    assert repr(pending) == "<ferry.ps.Pending: done>"
    assert repr(values) == "<ferry.ps.DenseValues: 6 floats>"
    c = ferry.attach(daemon.socket, "repr client")
    assert repr(c) == "<ferry.Client %d: Ok, 0 in flight>" % c.client_id
    c.close()
    assert repr(c) == "<ferry.Client: closed>"
    del rows, values
    w.close()
    assert repr(w) == "<ferry.ps.Worker of 'emb', 'mlp' over 1 shard: closed>"
    server.stop()
    assert repr(server).endswith(", stopped>")


def test_pull_is_zero_copy_and_keeps_its_block(daemon, helpers):
    tables = [ps.Embedding("emb", rows=5000, dim=16, init=ps.Uniform(0.1))]
    start_shards(helpers, daemon, tables, 2)
    with ps.Worker(tables, 2, daemon.socket) as w:
        r = w.pull("emb", np.arange(0, 5000, 7))
        view = memoryview(r.op)
        import ctypes
        block = ctypes.addressof(ctypes.c_char.from_buffer(view))
        assert r.rows.data_ptr() == block  # the tensor is the response block, where both shards wrote
        shard_rows = r.op.shard_rows()
        assert shard_rows[0] == 0 and shard_rows[-1] == r.rows.shape[0] and 0 < shard_rows[1] < shard_rows[2]
        del view
        with pytest.raises(ferry.BufferInUse):
            r.op.release()  # the tensor still views the block
        live = w.live_ops
        rows = r.rows
        del r
        assert w.live_ops == live  # the tensor alone keeps the block
        del rows
        assert w.live_ops == live - 1
        kept = w.pull("emb", np.arange(10)).rows.clone(), w.pull("emb", np.arange(10)).rows
    # Closed (the with block) while a tensor views rows: still readable, and equal.
    assert torch.equal(kept[0], kept[1])


def test_dense_tables(daemon, helpers):
    tables = [ps.Dense("w", 1001, optimizer=ps.SGD(1.0), init=ps.Zeros())]
    start_shards(helpers, daemon, tables, 3)
    with ps.Worker(tables, 3, daemon.socket) as w:
        w.assign_dense("w", torch.arange(1001, dtype=torch.float32))
        w.push_dense("w", torch.ones(1001))
        assert torch.equal(w.pull_dense("w"), torch.arange(1001, dtype=torch.float32) - 1)
        with pytest.raises(ferry.BadRequest):
            w.push_dense("w", torch.ones(1000))


def test_shard_killed_mid_training_fails_within_the_timeout(daemon, helpers):
    tables = [ps.Embedding("emb", rows=10000, dim=8)]
    shards = start_shards(helpers, daemon, tables, 2)
    w = ps.Worker(tables, 2, daemon.socket, timeout=3.0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        r = w.pull("emb", rng.integers(0, 10000, 256))
        w.push_rows(r, torch.ones_like(r.rows), wait=True)
    shards[1].kill()
    t0 = time.monotonic()
    with pytest.raises(ferry.Error) as e:
        for _ in range(1000):  # the first step that reaches the dead shard fails
            r = w.pull("emb", rng.integers(0, 10000, 256))
            w.push_rows(r, torch.ones_like(r.rows), wait=True)
    elapsed = time.monotonic() - t0
    assert elapsed < 3.0 + 2.0, "the failure took %.1f s" % elapsed
    assert e.value.status in ("ServiceGone", "PeerReset", "Timeout", "EndpointClosed"), e.value.status
    del r
    w.close()


def test_a_shard_process_does_not_load_torch():
    """python3 -m ferry.ps.server needs numpy, not torch (about 190 MB and 0.9 s
    of start-up less per shard); ferry.ps.Worker and the other worker names
    still come from `ferry.ps`, loading it when first asked for."""
    code = ("import sys, ferry.ps.server; assert 'torch' not in sys.modules, 'torch loaded'\n"
            "import ferry.ps as ps; from ferry.ps import Worker, Rows\n"
            "from ferry.ps import worker\n"
            "assert ps.Worker is Worker is worker.Worker and ps.Rows is Rows and ps.Pending is worker.Pending\n"
            "assert {'Worker', 'DenseValues'} <= set(dir(ps)) and set(ps.__all__) <= set(dir(ps))\n"
            "assert not hasattr(ps, 'Nothing')\n"
            "print('torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "True\n"  # a worker, where torch is, hands out tensors


def test_placement_is_the_documented_hash():
    keys = np.arange(0, 200000, 13, dtype=np.uint64)
    mask = (1 << 64) - 1

    def mix64(x):
        x = x ^ (x >> np.uint64(30))
        x = (x * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(mask)
        x = x ^ (x >> np.uint64(27))
        x = (x * np.uint64(0x94D049BB133111EB)) & np.uint64(mask)
        return x ^ (x >> np.uint64(31))

    for table in (0, 5):
        salt = np.uint64((0x9E3779B97F4A7C15 * (table + 1)) & mask)
        h = mix64(keys ^ salt)
        want = ((h >> np.uint64(32)) * np.uint64(3)) >> np.uint64(32)
        assert np.array_equal(ps.shard_of(table, keys.astype(np.int64), 3), want.astype(np.uint32))


def test_embedding_bag_module_trains_like_torch(daemon, helpers):
    tables = [ps.Embedding("emb", rows=50, dim=4, optimizer=ps.Adagrad(lr=0.2), init=ps.Uniform(0.3, seed=9))]
    start_shards(helpers, daemon, tables, 2)
    ref = torch.nn.EmbeddingBag(50, 4, mode="mean")
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(ps.initial_values(tables, "emb", np.arange(50))))
    opt = torch.optim.Adagrad(ref.parameters(), lr=0.2)
    gen = torch.Generator().manual_seed(3)
    with ps.Worker(tables, 2, daemon.socket) as w:
        bag = EmbeddingBag(w, "emb", mode="mean")
        for _ in range(10):
            x = torch.randint(0, 50, (8, 3), generator=gen)
            target = torch.randn(8, 4, generator=gen)
            loss = ((bag(x) - target) ** 2).sum()
            loss_ref = ((ref(x) - target) ** 2).sum()
            assert abs(loss.item() - loss_ref.item()) <= 1e-5
            loss.backward()
            w.synchronize()
            opt.zero_grad()
            loss_ref.backward()
            opt.step()
        assert bag.last_push is not None


def test_embedding_module_trains_like_torch(daemon, helpers):
    from ferry.ps.torch import Embedding
    tables = [ps.Embedding("emb", rows=40, dim=3, optimizer=ps.SGD(lr=0.1), init=ps.Uniform(0.5, seed=4))]
    start_shards(helpers, daemon, tables, 2)
    ref = torch.nn.Embedding(40, 3)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(ps.initial_values(tables, "emb", np.arange(40))))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(8)
    with ps.Worker(tables, 2, daemon.socket) as w:
        emb = Embedding(w, "emb")
        for _ in range(10):
            x = torch.randint(0, 40, (6, 5), generator=gen)
            target = torch.randn(6, 5, 3, generator=gen)
            out = emb(x)
            assert out.shape == (6, 5, 3)
            loss = ((out - target) ** 2).mean()
            loss_ref = ((ref(x) - target) ** 2).mean()
            assert abs(loss.item() - loss_ref.item()) <= 1e-5
            loss.backward()
            w.synchronize()
            opt.zero_grad()
            loss_ref.backward()
            opt.step()
        got = w.pull("emb", np.arange(40)).gather()
        assert torch.allclose(got, ref.weight.detach(), atol=1e-6, rtol=0)
