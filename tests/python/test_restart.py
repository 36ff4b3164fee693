"""ferryd and shard restarts under the Python package: a shard server
attaches again to its restarted ferryd with its rows, or exits when ferryd
stays away; a worker attaches again after its own ferryd restarted, finds a
shard started again (behind its own ferryd or another), issues its reads in
flight again once ferryd is back, and a training loop goes on across the
restart."""

import signal
import time

import numpy as np
import pytest
import torch

import ferry
import ferry.ps as ps
from conftest import shard_process

def test_shard_server_exits_when_its_ferryd_stays_away(daemon):
    # --reattach-s 1: it tries to attach again for a second, then exits 1
    # for its supervisor (an old package served on, unattached, for ever).
    tables = [ps.Embedding("emb", rows=100, dim=4)]
    p = shard_process(daemon, tables, "0/1", "--reattach-s", "1")
    try:
        assert p.stdout.readline().startswith("ready ")
        with ps.Worker(tables, 1, daemon.socket) as w:
            w.pull("emb", [1, 2, 3])
        daemon.kill()
        out, err = p.communicate(timeout=15)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1
    assert "ferryd went away (DaemonGone) and was not back within --reattach-s 1 s" in err, err
    assert '"result": "DaemonGone"' in out


def test_a_worker_finds_a_shard_started_again(daemon):
    # The operation that sees the shard go fails naming it; once the shard
    # is started again, the same Worker's operations find it (before, every
    # later one failed ServiceGone until a new Worker was made).
    tables = [ps.Embedding("emb", rows=100, dim=4)]
    p = shard_process(daemon, tables)
    try:
        assert p.stdout.readline().startswith("ready ")
        with ps.Worker(tables, 1, daemon.socket, timeout=5) as w:
            first = w.pull("emb", [1, 2, 3]).gather().clone()
            p.kill()
            p.wait()
            with pytest.raises((ferry.ServiceGone, ferry.PeerReset), match="shard 0"):
                w.pull("emb", [1, 2, 3])
            with pytest.raises(ferry.ServiceNotFound,  # nothing serves it yet
                               match="pull not started: ServiceNotFound [(]shard 0: 'ps-shard-0' is not served now"):
                w.pull("emb", [1, 2, 3])
            p = shard_process(daemon, tables)
            assert p.stdout.readline().startswith("ready ")
            deadline = time.monotonic() + 10
            while True:  # a failed reopen waits up to 2 s before the next
                try:
                    again = w.pull("emb", [1, 2, 3]).gather()
                    break
                except ferry.ServiceNotFound:
                    assert time.monotonic() < deadline, "the worker never found the shard again"
                    time.sleep(0.05)
            assert torch.equal(again, first)  # a new shard: the tables' initial values
            w.push("emb", [1], np.ones((1, 4), np.float32))
            w.synchronize()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_worker_finds_a_shard_whose_ferryd_restarted(daemon):
    # The shard behind another ferryd: that ferryd and the shard die and are
    # started again on the same port; the worker's next operations find them.
    from conftest import free_port, start_daemon
    listen = "127.0.0.1:%d" % free_port()
    b = start_daemon(listen=listen)
    tables = [ps.Embedding("emb", rows=100, dim=4)]
    p = shard_process(b, tables, "0/1", "--reattach-s", "0")  # its ferryd comes back in another directory
    try:
        assert p.stdout.readline().startswith("ready ")
        with ps.Worker(tables, 1, daemon.socket, target=listen, timeout=5) as w:
            first = w.pull("emb", [7]).gather().clone()
            b.kill()
            p.wait(10)
            with pytest.raises((ferry.PeerReset, ferry.ServiceGone, ferry.PeerUnreachable, ferry.EndpointClosed)):
                w.pull("emb", [7])
            with pytest.raises(ferry.PeerUnreachable, match="[(]shard 0: '%s/ps-shard-0': its ferryd does not answer"
                               % listen):
                w.pull("emb", [7])
            b.stop()
            b = start_daemon(listen=listen)
            p = shard_process(b, tables)
            assert p.stdout.readline().startswith("ready ")
            deadline = time.monotonic() + 10
            while True:
                try:
                    again = w.pull("emb", [7]).gather()
                    break
                except (ferry.PeerUnreachable, ferry.PeerReset, ferry.ServiceNotFound):
                    assert time.monotonic() < deadline, "the worker never found the shard again"
                    time.sleep(0.05)
            assert torch.equal(again, first)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        b.stop()


def test_a_worker_and_a_shard_carry_on_after_their_ferryd_restarts(daemon):
    # ferryd restarted under a training job (an upgrade's `systemctl restart
    # ferryd`): the push in flight ends DaemonGone (whether it was applied is
    # unknown), the pull in flight waits and is issued again once ferryd is
    # back, the worker's new operations while ferryd is down fail at once;
    # the shard keeps its rows and serves them on the new ferryd, and the
    # same Worker attaches again. Rows pulled before stay readable.
    tables = [ps.Embedding("emb", rows=100, dim=4, optimizer=ps.SGD(lr=1.0))]
    p = shard_process(daemon, tables)
    try:
        assert p.stdout.readline().startswith("ready ")
        with ps.Worker(tables, 1, daemon.socket, timeout=10) as w:
            before = w.pull("emb", [1, 2, 3])
            first = before.gather().clone()
            w.push("emb", [4], np.ones((1, 4), np.float32))
            pushed = w.pull("emb", [4]).gather().clone()  # the initial value less the gradient
            step = w.pull("emb", [8, 9])  # a training step's pull, whose push comes after the restart
            step_rows = step.rows.clone()
            p.send_signal(signal.SIGSTOP)  # the next operations stay in flight
            in_flight = w.pull_async("emb", [1, 2, 3])
            pushing = w.push("emb", [50], np.ones((1, 4), np.float32), wait=False)
            daemon.kill()
            with pytest.raises(ferry.DaemonGone, match="push failed: DaemonGone .*attaches again at its next operation"):
                pushing.wait(10)
            with pytest.raises(ferry.DaemonGone, match="push failed: DaemonGone"):
                w.synchronize()  # the push nobody waited for reports it too
            with pytest.raises(ferry.Timeout, match="pull still in flight .* issued again once ferryd is back"):
                in_flight.wait(0.3)  # the read waits for ferryd
            p.send_signal(signal.SIGCONT)
            for _ in range(2):  # nothing listens: a new operation fails at once
                t0 = time.monotonic()
                with pytest.raises(ferry.DaemonGone, match="ferryd went away, and attaching again failed"):
                    w.pull("emb", [1, 2, 3])
                assert time.monotonic() - t0 < 3
            daemon.restart()
            assert torch.equal(in_flight.wait(20).gather(), first)  # issued again, once ferryd and the shard were back
            assert w.reattached == 1
            again = w.pull("emb", [1, 2, 3, 4]).gather()
            assert torch.equal(again[:3], first)
            assert torch.equal(again[3:], pushed)  # the shard's rows survived the restart
            assert torch.equal(before.gather(), first)  # the old attachment's rows, still mapped
            w.push("emb", [4], np.ones((1, 4), np.float32))
            w.synchronize()
            assert torch.equal(w.pull("emb", [4]).gather(), pushed - 1)
            w.push_rows(step, torch.ones(2, 4), wait=True)  # rows of the old attachment: pushed by their keys
            after = w.pull("emb", [8, 9])
            assert torch.equal(after.rows[after.index], step_rows[step.index] - 1)
        assert p.poll() is None, "the shard exited"
        p.terminate()
        out, err = p.communicate(timeout=15)
        assert p.returncode == 0, err
        assert "ferryd went away and is back: serving ps-shard-0 again, with its rows (1 time)" in err, (out, err)
        assert '"reattached": 1' in out, out
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_every_read_in_flight_is_issued_again_once_ferryd_is_back(daemon):
    # Pulls of rows, of a dense table and of optimizer state, waited for
    # alone, with wait_all (beside a push, which fails) and with await: each
    # gives what it would have given had ferryd never gone.
    import asyncio
    tables = [ps.Embedding("emb", rows=100, dim=4, optimizer=ps.Adagrad(lr=0.5)),
              ps.Dense("bias", size=6, optimizer=ps.Adagrad(lr=0.5))]
    p = shard_process(daemon, tables)
    try:
        assert p.stdout.readline().startswith("ready ")
        with ps.Worker(tables, 1, daemon.socket, timeout=20) as w:
            w.push("emb", [3, 4], np.ones((2, 4), np.float32))
            w.push_dense("bias", np.ones(6, np.float32))
            want = {"rows": w.pull("emb", [4, 3, 4]).gather().clone(), "dense": w.pull_dense("bias").clone(),
                    "state": w.pull_state("emb", [3]).gather().clone()}
            p.send_signal(signal.SIGSTOP)
            alone = w.pull_async("emb", [4, 3, 4])
            together = [w.pull_async("emb", [4, 3, 4]), w.pull_dense_async("bias")]
            lost = w.push("emb", [7], np.ones((1, 4), np.float32), wait=False)
            awaited = w.pull_async("emb", [4, 3, 4])
            state = w.pull_state_async("emb", [3])
            daemon.kill()
            time.sleep(0.3)  # every one of them failed in flight by now
            p.send_signal(signal.SIGCONT)
            daemon.restart()
            assert torch.equal(alone.wait(20).gather(), want["rows"])
            with pytest.raises(ferry.DaemonGone, match="push failed"):
                w.wait_all(together + [lost], 20)
            assert torch.equal(together[0].wait(0).gather(), want["rows"])
            assert torch.equal(together[1].wait(0).values, want["dense"])

            async def read():
                return await awaited

            assert torch.equal(asyncio.run(read()).gather(), want["rows"])
            assert torch.equal(state.wait(20).gather(), want["state"])
            assert w.reattached == 1
            with pytest.raises(ferry.DaemonGone):
                w.synchronize()  # the lost push, reported where nobody waited for it
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_read_in_flight_fails_once_ferryd_stays_away_past_the_timeout(daemon):
    tables = [ps.Embedding("emb", rows=100, dim=4)]
    p = shard_process(daemon, tables)
    try:
        assert p.stdout.readline().startswith("ready ")
        w = ps.Worker(tables, 1, daemon.socket, timeout=1)
        p.send_signal(signal.SIGSTOP)
        pending = w.pull_async("emb", [1])
        daemon.kill()
        t0 = time.monotonic()
        with pytest.raises(ferry.DaemonGone, match="could not be issued again within the worker's timeout, 1.0 s: "
                                                   ".*attaching again failed"):
            pending.wait()
        assert 0.9 < time.monotonic() - t0 < 5
        with pytest.raises(ferry.DaemonGone, match="could not be issued again"):
            pending.wait()  # the same outcome, at once
        p.kill()
        w.close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_training_loop_goes_on_across_a_ferryd_restart(daemon):
    # The README's loop (an EmbeddingBag on ferry.ps, an in-process shard),
    # ferryd restarted in the middle: the loop goes on with the same objects,
    # catching DaemonGone around a step if one fails, and learns.
    from ferry.ps.torch import EmbeddingBag
    torch.manual_seed(0)
    tables = [ps.Embedding("emb", rows=1000, dim=8, optimizer=ps.Adagrad(lr=0.3))]
    shard = ps.ShardServer(tables, 0, 1, daemon.socket).start()
    worker = ps.Worker(tables, 1, daemon.socket, timeout=5)
    try:
        bag = EmbeddingBag(worker, "emb", mode="sum")
        head = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        losses, failed = [], 0
        for step in range(80):
            if step == 40:
                daemon.restart()
            ids = torch.randint(0, 200, (64, 4))
            y = ((ids % 2).sum(1) >= 2).float()
            try:
                loss = torch.nn.functional.binary_cross_entropy_with_logits(head(bag(ids)).squeeze(1), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                worker.synchronize()
                losses.append(loss.item())
            except ferry.DaemonGone:
                failed += 1
        assert worker.reattached == 1 and shard.reattached == 1
        assert failed <= 2 and len(losses) >= 78
        assert sum(losses[-10:]) < sum(losses[:10]) * 0.8, losses  # it learned, across the restart
        assert shard.running
    finally:
        worker.close()
        shard.stop()


def test_in_process_shard_server_stops_running_when_ferryd_goes_away(daemon):
    server = ps.ShardServer([ps.Embedding("emb", rows=10, dim=2)], 0, 1, daemon.socket, reattach_s=0).start()
    assert server.running
    daemon.kill()
    deadline = time.monotonic() + 5
    while server.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not server.running
    assert server.counters()["result"] == "DaemonGone"
    assert server.reattached == 0
    server.stop()


def test_in_process_shard_server_stop_ends_its_wait_for_ferryd(daemon):
    # Waiting to attach again (reattach_s, default 60 s), stop() ends it at once.
    server = ps.ShardServer([ps.Embedding("emb", rows=10, dim=2)], 0, 1, daemon.socket).start()
    daemon.kill()
    time.sleep(0.3)
    assert server.running  # waiting for ferryd, its rows kept
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 2
    assert not server.running
    assert server.counters()["result"] == "Ok"
