"""Checkpoints of the torch modules: ``state_dict()`` holds each table as
``weight`` (pulled from the shards), ``load_state_dict()`` assigns it, so a
checkpoint moves between torch's own EmbeddingBag/Embedding and ferry.ps
ones either way, through torch.save and torch.load, against real shard
servers over a real ferryd; and the shards' Adagrad state, checkpointed
apart, makes a resumed run train exactly as an uninterrupted one."""

import io
import warnings

import numpy as np
import pytest
import torch

import ferry
import ferry.ps as ps
from ps_served import served as _served
import ferry.ps.torch as pst

TABLES = [ps.Embedding("bag", rows=3000, dim=8, optimizer=ps.Adagrad(lr=0.2), init=ps.Uniform(0.3, seed=5)),
          ps.Embedding("emb", rows=700, dim=4, optimizer=ps.SGD(lr=0.5), init=ps.Uniform(0.3, seed=6)),
          ps.Embedding("any", rows=0, dim=4, optimizer=ps.SGD(lr=0.5))]


def served(daemon, prefix, tables=TABLES):
    """A worker over two fresh shard servers of `tables` (this file's by default)."""
    return _served(daemon, prefix, tables)


class Model(torch.nn.Module):
    """A bag table, a plain embedding table and a dense head, built with
    either torch's modules (local) or ferry.ps's (worker given)."""

    def __init__(self, worker=None, **kw):
        super().__init__()
        if worker is None:
            self.bag = torch.nn.EmbeddingBag(3000, 8, mode="sum")
            self.emb = torch.nn.Embedding(700, 4)
        else:
            self.bag = pst.EmbeddingBag(worker, "bag", mode="sum", **kw)
            self.emb = pst.Embedding(worker, "emb", **kw)
        self.head = torch.nn.Linear(12, 1)

    def forward(self, ids, one):
        return self.head(torch.cat([self.bag(ids), self.emb(one)], 1)).squeeze(1)


def batch(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 3000, (64, 5), generator=g), torch.randint(0, 700, (64,), generator=g)


def roundtrip(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf)


def test_a_local_checkpoint_loads_into_ferry_and_back_bit_for_bit(daemon):
    torch.manual_seed(1)
    local = Model()
    saved = roundtrip(local.state_dict())
    with served(daemon, "ckpt-a-") as w:
        remote = Model(w)
        assert remote.load_state_dict(saved) is not None  # strict: nothing missing, nothing unexpected
        ids, one = batch(2)
        with torch.no_grad():
            assert torch.equal(remote(ids, one), local(ids, one))
        # Train the ferry model (the shards apply Adagrad and SGD), then its
        # checkpoint is what the shards hold, and a local model loads it.
        opt = torch.optim.SGD(remote.head.parameters(), lr=0.1)
        for step in range(4):
            ids, one = batch(10 + step)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(remote(ids, one), (ids[:, 0] % 2).float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            w.synchronize()
        state = remote.state_dict()
        assert set(state) == set(local.state_dict())
        assert state["bag.weight"].shape == (3000, 8) and state["emb.weight"].shape == (700, 4)
        held = torch.as_tensor(w.pull("bag", np.arange(3000)).gather()).clone()
        assert torch.equal(state["bag.weight"], held)
        assert not torch.equal(state["bag.weight"], saved["bag.weight"])  # training moved the rows
        back = Model()
        back.load_state_dict(roundtrip(state))
        ids, one = batch(99)
        with torch.no_grad():
            assert torch.equal(back(ids, one), remote(ids, one))


def test_a_ferry_checkpoint_restores_fresh_shards(daemon):
    with served(daemon, "ckpt-b-") as w:
        model = Model(w)
        w.assign("emb", np.arange(700), np.full((700, 4), 0.25, np.float32))
        state = roundtrip(model.state_dict())
        assert torch.equal(state["emb.weight"], torch.full((700, 4), 0.25))
    with served(daemon, "ckpt-c-") as w:  # new shards: rows start from their init again
        model = Model(w)
        fresh = model.state_dict()
        assert not torch.equal(fresh["emb.weight"], state["emb.weight"])
        model.load_state_dict(state)
        assert torch.equal(model.state_dict()["emb.weight"], state["emb.weight"])
        assert torch.equal(model.state_dict()["bag.weight"], state["bag.weight"])


def test_a_wrong_or_missing_weight_is_reported_as_torch_reports_it(daemon):
    with served(daemon, "ckpt-d-") as w:
        model = Model(w)
        before = model.state_dict()
        bad = dict(before)
        bad["bag.weight"] = torch.zeros(2999, 8)
        with pytest.raises(RuntimeError, match="size mismatch for bag.weight"):
            model.load_state_dict(bad)
        assert torch.equal(model.state_dict()["bag.weight"], before["bag.weight"])  # nothing assigned
        missing = {k: v for k, v in before.items() if k != "emb.weight"}
        with pytest.raises(RuntimeError, match="Missing key.*emb.weight"):
            model.load_state_dict(missing)
        result = model.load_state_dict(missing, strict=False)  # reported, not raised, as for torch's own
        assert list(result.missing_keys) == ["emb.weight"] and list(result.unexpected_keys) == []


def test_left_out_tables_and_tables_without_a_row_count(daemon):
    with served(daemon, "ckpt-e-") as w:
        model = Model(w, checkpoint=False)
        assert set(model.state_dict()) == {"head.weight", "head.bias"}
        with pytest.raises(RuntimeError, match="Unexpected key.*bag.weight"):
            model.load_state_dict(Model().state_dict())
        anywhere = pst.Embedding(w, "any")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert anywhere.state_dict() == {}
        assert any("'any'" in str(c.message) and "rows=0" in str(c.message) for c in caught)
        with pytest.raises(ValueError, match="no row count"):
            anywhere.pull_weight()
        with pytest.raises(ValueError, match=r"is \[700, 4\]; the weight given is \[4, 700\]"):
            pst.Embedding(w, "emb").assign_weight(torch.zeros(4, 700))


def test_a_table_past_the_checkpoint_limit_is_an_error_not_a_pull(daemon):
    with served(daemon, "ckpt-f-") as w:
        assert pst.checkpoint_limit() > 0  # half the machine's memory
        model = Model(w)
        try:
            assert pst.checkpoint_limit(700 * 4 * 4) == 700 * 4 * 4  # emb fits exactly, bag (96,000 bytes) does not
            with pytest.raises(ValueError, match="'bag' is 96000 bytes, more than .*checkpoint=False"):
                model.state_dict()
            assert set(Model(w, checkpoint=False).state_dict()) == {"head.weight", "head.bias"}
            assert pst.Embedding(w, "emb").state_dict()["weight"].shape == (700, 4)
            with pytest.raises(ValueError, match="byte count"):
                pst.checkpoint_limit(-5)
        finally:
            pst.checkpoint_limit(None)


def train_steps(model, worker, opt, seeds):
    losses = []
    for seed in seeds:
        ids, one = batch(seed)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(ids, one), (ids[:, 0] % 2).float())
        opt.zero_grad()
        loss.backward()
        opt.step()
        worker.synchronize()
        losses.append(loss.item())
    return losses


def test_a_resumed_run_trains_exactly_as_an_uninterrupted_one_with_the_optimizer_state(daemon):
    """Train 3 steps, checkpoint (model, head optimizer, shards' Adagrad
    state), train 3 more: a run restored from the checkpoint on fresh shards
    gives the same losses and rows bit for bit; without the shards' state
    (Adagrad's accumulators restart) it does not."""
    with served(daemon, "ckpt-g-") as w:
        torch.manual_seed(3)
        model = Model(w)
        opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
        train_steps(model, w, opt, [1, 2, 3])
        saved = roundtrip({"model": model.state_dict(), "opt": opt.state_dict(),
                           "ps": pst.optimizer_state_dict(model)})
        assert set(saved["ps"]) == {"bag"}  # emb's SGD keeps no state
        sums = saved["ps"]["bag"]["sum"]
        assert sums.shape == (3000, 8) and float(sums.min()) >= 0 and float(sums.max()) > 0
        want = train_steps(model, w, opt, [4, 5, 6])
        want_rows = model.state_dict()["bag.weight"]
    results = []
    for with_state in (True, False):
        with served(daemon, "ckpt-h%d-" % with_state) as w:
            model = Model(w)
            model.load_state_dict(saved["model"])
            if with_state:
                pst.load_optimizer_state_dict(model, saved["ps"])
                assert torch.equal(pst.optimizer_state_dict(model)["bag"]["sum"], sums)
            opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
            opt.load_state_dict(saved["opt"])
            results.append((train_steps(model, w, opt, [4, 5, 6]), model.state_dict()["bag.weight"]))
    (got, got_rows), (restarted, restarted_rows) = results
    assert got == want and torch.equal(got_rows, want_rows)
    assert not torch.equal(restarted_rows, want_rows)


def test_optimizer_state_errors_name_what_is_wrong_and_assign_nothing(daemon):
    with served(daemon, "ckpt-i-") as w:
        model = Model(w)
        state = pst.optimizer_state_dict(model)
        with pytest.raises(ValueError, match=r"missing for \['bag'\]"):
            pst.load_optimizer_state_dict(model, {})
        with pytest.raises(ValueError, match=r"unknown \['emb'\]"):
            pst.load_optimizer_state_dict(model, dict(state, emb={"sum": torch.zeros(700, 4)}))
        with pytest.raises(ValueError, match="optimizer state given is"):
            pst.load_optimizer_state_dict(model, {"bag": {"sum": torch.zeros(3, 8)}})
        with pytest.raises(ValueError, match="want"):
            pst.load_optimizer_state_dict(model, {"bag": torch.zeros(3000, 8)})
        with pytest.raises(ValueError, match="never negative"):
            pst.load_optimizer_state_dict(model, {"bag": {"sum": -torch.ones(3000, 8)}})
        with pytest.raises(ferry.BadRequest, match="never negative"):
            w.assign_state("bag", [1], [-1.0] * 8)
        assert torch.equal(pst.optimizer_state_dict(model)["bag"]["sum"], state["bag"]["sum"])  # nothing assigned
        with pytest.raises(ferry.BadRequest, match="keeps no optimizer state"):
            w.pull_state("emb", [1])
        assert not pst.Embedding(w, "emb").has_optimizer_state
        assert set(pst.optimizer_state_dict(Model(w, checkpoint=False))) == set()
