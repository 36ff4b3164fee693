"""ferry.ps on GPU tensors, against a real ferryd: EmbeddingBag (sum over 2-D
input, mean over 1-D input with offsets) and Embedding trained on CUDA
inputs give the same outputs, and leave the same rows on the shards, as on
the CPU, within 1e-5; the worker's arena is registered with CUDA once and
the rows reach the device from it. Without a CUDA device these tests SKIP
(reported as skipped); the CPU-only checks below run everywhere.

Runs without pytest (the lent GPU machine's Python has none):
``FERRYD=... python3 tests/python/test_gpu.py [TEST...]`` prints one
"PASS|SKIP|FAIL name" line per test and exits 1 if any failed, 77 (meson's
skip) if every one it ran was skipped; meson runs each test on its own so
a skip is reported as one.
"""

import os
import sys

import numpy as np
import torch

import ferry.ps as ps
import ferry.ps.torch as pst

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ferryd import Ferryd  # noqa: E402  (run without pytest: no conftest puts tests/lib on the path)

NO_GPU = "no CUDA device here (torch %s, cuda available: %s)" % (torch.__version__, torch.cuda.is_available())
TABLES = [ps.Embedding("bags", rows=20_000, dim=16, optimizer=ps.Adagrad(lr=0.1), init=ps.Uniform(0.1, seed=1)),
          ps.Embedding("means", rows=5_000, dim=16, optimizer=ps.SGD(lr=0.3), init=ps.Uniform(0.1, seed=2)),
          ps.Embedding("tokens", rows=1_000, dim=16, optimizer=ps.SGD(lr=0.2), init=ps.Uniform(0.1, seed=3))]


def _start_ferryd():
    """ferryd --runtime-dir DIR --transport tcp (FERRYD: its path, or a wrapper that runs it)."""
    exe = os.environ.get("FERRYD", "")
    if not exe:
        raise RuntimeError("FERRYD is not set to a built ferryd")
    return Ferryd(exe, prefix="ferry-gpu-")


def _batches(steps=8, seed=11):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        bags = torch.randint(0, 20_000, (64, 4), generator=g)
        means = torch.randint(0, 5_000, (64 * 3,), generator=g)
        offsets = torch.arange(0, 64 * 3, 3)
        tokens = torch.randint(0, 1_000, (64, 2), generator=g)
        y = torch.rand(64, generator=g)
        out.append((bags, means, offsets, tokens, y))
    return out


def _train(socket, device, prefix):
    """Outputs of every step and the rows each table holds afterwards."""
    shards = [ps.ShardServer(TABLES, i, 2, socket, service_prefix=prefix).start() for i in range(2)]
    try:
        with ps.Worker(TABLES, 2, socket, service_prefix=prefix) as w:
            torch.manual_seed(5)
            head = torch.nn.Linear(16 * 4, 1).to(device)
            opt = torch.optim.SGD(head.parameters(), lr=0.05)
            bag = pst.EmbeddingBag(w, "bags", mode="sum")
            mean = pst.EmbeddingBag(w, "means", mode="mean")
            emb = pst.Embedding(w, "tokens")
            outputs = []
            for bags, means, offsets, tokens, y in _batches():
                bags, means, offsets, tokens, y = (t.to(device) for t in (bags, means, offsets, tokens, y))
                a, b, c = bag(bags), mean(means, offsets), emb(tokens)
                x = torch.cat([a, b, c.reshape(64, 32)], 1)
                assert x.device.type == torch.device(device).type
                loss = torch.nn.functional.binary_cross_entropy_with_logits(head(x).squeeze(1), y)
                opt.zero_grad()
                loss.backward()  # the rows' gradients go from the device into the pushes
                opt.step()
                w.synchronize()
                outputs.append(x.detach().cpu())
            if device != "cpu":
                assert w.device is not None and w.device.type == "cuda"
                assert w._cuda is not None and w._cuda.registered  # the arena, registered once
                r = w.pull("bags", torch.arange(100))
                assert r.device_rows is not None and r.device_rows.is_cuda
                del r
            rows = {t.name: w.pull(t.name, np.arange(t.rows)).gather().clone() for t in TABLES}
        return outputs, rows
    finally:
        for s in shards:
            s.stop()


def _skip(why):
    raise _Skipped(why)


class _Skipped(Exception):
    pass


def test_embedding_bag_and_embedding_on_cuda_equal_the_cpu_within_1e5():
    if not torch.cuda.is_available():
        _skip(NO_GPU)
    d = _start_ferryd()
    try:
        cpu_out, cpu_rows = _train(d.socket, "cpu", "gpu-test-cpu-")
        gpu_out, gpu_rows = _train(d.socket, "cuda", "gpu-test-cuda-")
    finally:
        d.stop()
    for step, (x, y) in enumerate(zip(cpu_out, gpu_out)):
        diff = (x - y).abs().max().item()
        assert diff <= 1e-5, "step %d: outputs differ by %g" % (step, diff)
    for name in cpu_rows:
        diff = (cpu_rows[name] - gpu_rows[name]).abs().max().item()
        assert diff <= 1e-5, "table %s: rows differ by %g after training" % (name, diff)
        assert not torch.equal(cpu_rows[name], torch.from_numpy(ps.initial_values(TABLES, name,
                                                                                  np.arange(cpu_rows[name].shape[0]))))


def test_a_cpu_only_torch_imports_the_gpu_path_and_refuses_cuda_clearly():
    import ferry.ps._cuda as cuda  # imports without a GPU or the CUDA toolkit
    assert cuda.attach(None, "cpu") is None
    if torch.cuda.is_available():
        _skip("this machine has a GPU: the refusal is for machines without one")
    d = _start_ferryd()
    try:
        shards = [ps.ShardServer(TABLES, i, 2, d.socket, service_prefix="gpu-refuse-").start() for i in range(2)]
        with ps.Worker(TABLES, 2, d.socket, service_prefix="gpu-refuse-") as w:
            try:
                w.to("cuda")
            except RuntimeError as e:
                assert "no CUDA device" in str(e)
            else:
                raise AssertionError("Worker.to('cuda') worked without a GPU")
            assert w.device is None and w.pull("bags", [1, 2]).rows.shape == (2, 16)
        for s in shards:
            s.stop()
    finally:
        d.stop()


def main(names):
    """Runs the named tests (all when none): exit 1 if any failed, 77 if all were skipped, else 0."""
    tests = sorted((n, f) for n, f in globals().items() if n.startswith("test_") and callable(f))
    if names:
        tests = [(n, f) for n, f in tests if n in names]
        if len(tests) != len(names):
            print("no such test among %s" % names, flush=True)
            return 2
    failed = skipped = 0
    for name, f in tests:
        try:
            f()
            print("PASS", name, flush=True)
        except _Skipped as e:
            skipped += 1
            print("SKIP", name, "(%s)" % e, flush=True)
        except Exception as e:  # report and go on to the next test
            failed += 1
            print("FAIL", name, "%s: %s" % (type(e).__name__, e), flush=True)
    if failed:
        return 1
    return 77 if skipped == len(tests) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
