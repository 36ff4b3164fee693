"""Operations of any size through real ferryd and shard processes: a table
of 1,000,000 rows x dim 64 (256 MB) assigned, pulled, pushed and pulled
again, each in one call of ferry.ps (and of its async forms), the same for a
dense table of as many floats; a pull past one message that lands zero copy
in a span of the arena, and the benchmark of that; and the one size that
can never be sent, a row larger than a message, refused up front with a
clear error."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import EXAMPLES

import ferry
import ferry.ps as ps

N, DIM = 1_000_000, 64


def start_shards(helpers, daemon, tables, n):
    tj = json.dumps([t.to_dict() for t in tables])
    return [helpers("shard", daemon.socket, tj, "%d/%d" % (i, n)) for i in range(n)]


def rows_of(r):
    """The requested keys' rows, [n, dim] numpy, in request order."""
    return r.rows.numpy()[r.index.numpy()]


def test_a_million_rows_of_dim_64_in_one_call_each(daemon, helpers):
    tables = [ps.Embedding("big", rows=N, dim=DIM, optimizer=ps.SGD(lr=1.0), init=ps.Zeros()),
              ps.Dense("flat", N * DIM, optimizer=ps.SGD(lr=0.5), init=ps.Zeros())]
    start_shards(helpers, daemon, tables, 2)
    rng = np.random.default_rng(1)
    keys = rng.permutation(N).astype(np.int64)  # every row once, in no particular order
    values = (keys[:, None] % 1000).astype(np.float32) + np.arange(DIM, dtype=np.float32)[None, :] / 64
    with ps.Worker(tables, 2, daemon.socket, timeout=30.0) as w:
        assert w.max_count < N  # so each call below is split into many requests
        a = w.assign("big", keys, values, wait=False)  # the async form of assign
        a.wait()
        r = w.pull("big", keys)
        assert not r.zero_copy  # 256 MB: in process memory, copied once per request as it landed
        assert r.rows.shape == (N, DIM)
        assert np.array_equal(rows_of(r), values)

        w.push("big", keys, np.ones((N, DIM), np.float32))
        w.push_rows(r, torch.full((N, DIM), 2.0), wait=True)  # in r's row order
        g = w.push("big", keys[::-1].copy(), np.full((N, DIM), 0.5, np.float32), wait=False)  # async push
        g.wait()
        del r
        assert np.array_equal(rows_of(w.pull_async("big", keys).wait()), values - 3.5)  # async pull

        flat = np.arange(N * DIM, dtype=np.float32) % 4096
        w.assign_dense("flat", flat, wait=False).wait()
        d = w.pull_dense("flat")
        assert d.shape == (N * DIM,) and np.array_equal(d.numpy(), flat)
        del d
        w.push_dense("flat", np.full(N * DIM, 2.0, np.float32))
        pending = w.pull_dense_async("flat")
        assert np.array_equal(pending.wait().values.numpy(), flat - 1.0)
        del pending, a, g
        w.synchronize()
        assert w.live_ops == 0  # every request and every staged block given back


def test_a_small_pull_stays_zero_copy_in_the_arena(daemon, helpers):
    tables = [ps.Embedding("emb", rows=100_000, dim=16, init=ps.Uniform(0.1, seed=2))]
    start_shards(helpers, daemon, tables, 2)
    with ps.Worker(tables, 2, daemon.socket) as w:
        keys = np.arange(0, 100_000, 7)  # 14,286 rows x 64 B: under one arena block
        r = w.pull("emb", keys)
        assert r.zero_copy
        assert np.array_equal(rows_of(r), ps.initial_values(tables, "emb", keys))
        # The quickstart's table assigned whole in one call (it used to need a loop).
        w.assign("emb", np.arange(100_000), np.zeros((100_000, 16), np.float32))
        assert not rows_of(w.pull("emb", keys)).any()


def test_a_pull_past_one_message_lands_zero_copy_in_a_span_of_the_arena(daemon, helpers):
    tables = [ps.Embedding("emb", rows=200_000, dim=64, init=ps.Uniform(0.1, seed=4))]
    start_shards(helpers, daemon, tables, 2)
    with ps.Worker(tables, 2, daemon.socket) as w:
        keys = np.arange(0, 200_000, 4)  # 50,000 rows x 256 B = 12.8 MB: many messages, under half the arena
        for _ in range(3):  # the span goes back to the arena with the rows, and serves the next pull
            r = w.pull("emb", keys)
            assert r.zero_copy and r.rows.shape == (keys.size, 64)
            assert np.array_equal(rows_of(r), ps.initial_values(tables, "emb", keys))
            del r
            assert w.live_ops == 0
        # Two pulls of half the arena each, the first one's rows held: the second would leave no room for its
        # requests (none in flight to give any back), so it lands in process memory instead of failing NoMemory.
        half = np.arange(16 * 2**20 // 256)
        first = w.pull("emb", half)
        second = w.pull("emb", half)
        assert first.zero_copy and not second.zero_copy
        assert np.array_equal(rows_of(second), ps.initial_values(tables, "emb", half))
        del first, second
        # Past half the tx arena (32 MiB by default) the rows land in process memory, as before.
        big = np.arange(200_000)  # 51 MB
        r = w.pull("emb", big)
        assert not r.zero_copy and np.array_equal(rows_of(r), ps.initial_values(tables, "emb", big))


def test_the_pull_benchmark_runs_both_arms(daemon):
    """examples/python/pull_bench.py (docs/benchmarks/large-pulls.md), small: each arm's pulls land where it
    says (the script checks Rows.zero_copy) and it reports both medians."""
    import os
    import subprocess
    import sys

    from conftest import EXAMPLES
    cmd = [sys.executable, os.path.join(EXAMPLES, "pull_bench.py"), "--rows", "20000", "--sizes-mb", "3",
           "--repeat", "3", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ, FERRY_SOCKET=daemon.socket))
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    (r,) = report["results"]
    assert r["keys"] == 3 * 2**20 // 256 and r["span_ms"] > 0 and r["staged_ms"] > 0


def test_a_row_larger_than_any_message_is_refused_with_a_clear_error(helpers):
    from conftest import start_daemon
    small = start_daemon(extra=["--max-message-bytes", "8192"])
    try:
        tj = json.dumps([ps.Embedding("wide", rows=10, dim=8).to_dict()])
        helpers("shard", small.socket, tj, "0/1", "--max-count", "100")  # its answers fit 8 KB
        # The worker's rows are 16 KB (dim 4096, the largest): no message of 8 KB carries one.
        wide = [ps.Embedding("wide", rows=10, dim=4096)]
        with ps.Worker(wide, 1, small.socket) as w:
            with pytest.raises(ferry.ResponseTooLarge) as e:
                w.pull("wide", [1])
            assert "larger than the largest message" in str(e.value)
            with pytest.raises(ferry.ResponseTooLarge):
                w.push("wide", [1], np.zeros(4096, np.float32))
            assert w.live_ops == 0
    finally:
        small.stop()
