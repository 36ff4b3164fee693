"""The torch modules' step: deferred results (every table's pull of a step in
flight before any is waited for) train exactly as immediate ones;
EmbeddingBagCollection equals separate bags; the modules refuse what
torch's refuse, the same way, before they pull; and the step-time benchmark
(examples/python/step_time.py) runs and reports its ratio."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ferry.ps as ps
import ferry.ps.torch as pst
from conftest import EXAMPLES

TABLES = [ps.Embedding("a", rows=1000, dim=4, optimizer=ps.SGD(lr=0.5), init=ps.Uniform(0.3, seed=1)),
          ps.Embedding("b", rows=500, dim=4, optimizer=ps.Adagrad(lr=0.2), init=ps.Uniform(0.3, seed=2))]


def shards(daemon, prefix):
    return [ps.ShardServer(TABLES, i, 2, daemon.socket, service_prefix=prefix).start() for i in range(2)]


def data(steps=6, seed=4):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 1000, (32, 3), generator=g), torch.randint(0, 500, (32 * 2,), generator=g),
             torch.arange(0, 64, 2), torch.rand(32, generator=g)) for _ in range(steps)]


def train(worker, defer, collection=False):
    torch.manual_seed(3)
    head = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    if collection:
        ebc = pst.EmbeddingBagCollection(worker, ["a", "b"], mode="sum")
    else:
        bag_a = pst.EmbeddingBag(worker, "a", mode="sum", defer=defer)
        bag_b = pst.EmbeddingBag(worker, "b", mode="sum", defer=defer)
    losses = []
    for ids_a, ids_b, offsets_b, y in data():
        if collection:
            ea, eb = ebc([ids_a, ids_b], [None, offsets_b])
        else:
            ea, eb = bag_a(ids_a), bag_b(ids_b, offsets_b)
            if defer:
                # Both pulls were sent; neither result is computed until the model uses one.
                assert isinstance(ea, torch.Tensor) and ea.shape == (32, 4) and eb.shape == (32, 4)
                assert ea._value is None and eb._value is None
        loss = torch.nn.functional.binary_cross_entropy_with_logits(head(torch.cat([ea, eb], 1)).squeeze(1), y)
        if defer and not collection:
            assert ea._value is not None and eb._value is not None  # computed together at first use
        opt.zero_grad()
        loss.backward()
        opt.step()
        worker.synchronize()
        losses.append(loss.item())
    rows = worker.pull("a", np.arange(1000)).gather().clone()
    return losses, rows


def test_deferred_results_train_exactly_as_immediate_ones(daemon):
    results = []
    for name, defer, collection in (("immediate", False, False), ("deferred", True, False),
                                    ("collection", None, True)):
        servers = shards(daemon, "mod-%s-" % name)
        with ps.Worker(TABLES, 2, daemon.socket, service_prefix="mod-%s-" % name) as w:
            results.append(train(w, defer, collection))
        for s in servers:
            s.stop()
    (l0, r0), (l1, r1), (l2, r2) = results
    assert l0 == l1 == l2, (l0, l1, l2)  # bit for bit: the same arithmetic, only the waiting differs
    assert torch.equal(r0, r1) and torch.equal(r0, r2)
    assert l0[-1] != l0[0]  # the rows and the head did change


def test_deferred_result_under_no_grad_and_repr(daemon):
    servers = shards(daemon, "mod-nograd-")
    with ps.Worker(TABLES, 2, daemon.socket, service_prefix="mod-nograd-") as w:
        bag = pst.EmbeddingBag(w, "a", mode="mean")
        with torch.no_grad():
            out = bag(torch.tensor([[1, 2], [3, 4]]))
        assert not out.requires_grad and "tensor" in repr(out)
        want = torch.from_numpy(ps.initial_values(TABLES, "a", np.array([1, 2, 3, 4]))).view(2, 2, 4).mean(1)
        assert torch.allclose(out, want)
        del out
    for s in servers:
        s.stop()


def test_the_modules_refuse_what_torch_refuses_before_they_pull(daemon):
    tables = TABLES + [ps.Dense("mlp", 10)]
    servers = [ps.ShardServer(tables, i, 2, daemon.socket, service_prefix="mod-refuse-").start() for i in range(2)]
    with ps.Worker(tables, 2, daemon.socket, service_prefix="mod-refuse-") as w:
        with pytest.raises(ValueError, match="table 'mlp' is dense: its parameters go in .*DenseParameters"):
            pst.EmbeddingBag(w, "mlp")
        with pytest.raises(ValueError, match="table 'mlp' is dense"):
            pst.Embedding(w, "mlp")
        with pytest.raises(ValueError, match="table 'a' is an embedding table: DenseParameters keeps"):
            pst.DenseParameters(w, "a", torch.nn.Linear(2, 2))
        ids = torch.tensor([1, 2, 3])
        bad = [(torch.zeros(2, 2, 2, dtype=torch.long), None, "input has to be 1D or 2D Tensor"),
               (ids, None, "offsets has to be a 1D Tensor but got None"),
               (ids, torch.tensor([[0]]), "offsets has to be a 1D Tensor"),
               (ids.view(1, 3), torch.tensor([0]), "if input is 2D, then offsets has to be None")]
        for defer in (True, False):
            bag = pst.EmbeddingBag(w, "a", mode="sum", defer=defer)
            local = torch.nn.EmbeddingBag(1000, 4, mode="sum")
            for input, offsets, want in bad:
                with pytest.raises(ValueError, match=want):
                    local(input, offsets)  # the same refusal as torch's own module
                with pytest.raises(ValueError, match=want):
                    bag(input, offsets)
        assert w.live_ops == 0  # nothing was pulled
    for s in servers:
        s.stop()


def test_step_time_benchmark_reports_its_ratio(daemon):
    cmd = [sys.executable, os.path.join(EXAMPLES, "step_time.py"), "--steps", "40", "--warmup", "5", "--rounds", "2",
           "--socket", daemon.socket, "--collection", "--immediate", "--profile", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ, OMP_NUM_THREADS="1"))
    print(p.stdout, p.stderr[-3000:])
    assert p.returncode == 0
    r = json.loads(p.stdout.strip().splitlines()[-1])
    for k in ("local_ms", "ferry_ms", "immediate_ms", "collection_ms", "ferry_ratio", "immediate_ratio",
              "collection_ratio", "immediate_pull_ms_per_step", "collection_pull_many_ms_per_step"):
        assert r[k] > 0, k
    for name in ("ferry", "immediate", "collection"):  # each round's ratio is to that round's local step
        assert r[name + "_ratio_rounds"] == [f / l for f, l in zip(r[name + "_ms_rounds"], r["local_ms_rounds"])]
    assert "ratio" in p.stdout.splitlines()[0]


def test_bag_gradient_is_torchs_own_to_the_bit():
    """ferry._ferry.ps.bag_grad (the sum-mode bag's backward on the CPU) gives
    the same bits as torch's dense backward of embedding_bag, for 2-D input
    and for offsets with empty bags, with and without include_last_offset."""
    from ferry import _ferry
    g = torch.Generator().manual_seed(7)
    for trial in range(24):
        if trial % 2 == 0:
            lens = torch.randint(0, 12, (64,), generator=g)  # zeros: empty bags
            offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)[:-1]])
            inp = torch.randint(0, 200, (int(lens.sum()),), generator=g)
            last = trial % 4 == 0
            if last:
                offsets = torch.cat([offsets, torch.tensor([inp.numel()])])
        else:
            inp, offsets, last = torch.randint(0, 200, (64, 5), generator=g), None, False
        keys = inp.reshape(-1)
        uniq, index = torch.unique(keys, return_inverse=True)
        grad_out = torch.randn(64, 16, generator=g)
        w = torch.randn(200, 16, requires_grad=True)
        torch.nn.functional.embedding_bag(inp, w, offsets, mode="sum", include_last_offset=last).backward(grad_out)
        starts, per_bag = pst._starts(inp, offsets, last)
        order = torch.sort(keys)[1]
        got = _ferry.ps.bag_grad(order.numpy(), index.numpy(), starts.numpy(), per_bag, grad_out.numpy(),
                                 uniq.numel())
        assert torch.equal(torch.from_numpy(got), w.grad[uniq]), "trial %d" % trial


def test_bag_gradient_refuses_indices_out_of_range():
    from ferry import _ferry
    order, index, none = np.arange(4), np.array([0, 1, 1, 0]), np.zeros(0, np.int64)
    grad_out = np.ones((2, 3), np.float32)
    assert _ferry.ps.bag_grad(order, index, none, 2, grad_out, 2).tolist() == [[2.0] * 3, [2.0] * 3]
    for bad in [dict(order=np.array([0, 1, 2, 4])), dict(index=np.array([0, 1, 2, 0])),
                dict(per_bag=1), dict(per_bag=0), dict(starts=np.array([1, 2]))]:
        args = dict(order=order, index=index, starts=none, per_bag=2, grad_out=grad_out, rows=2)
        args.update(bad)
        with pytest.raises(ValueError):  # ferry.BadRequest
            _ferry.ps.bag_grad(**args)
