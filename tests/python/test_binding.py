"""The ferry binding's contract, against real ferryd processes and real
serving processes (tests/python/helpers.py): buffers and the buffer
protocol, zero copy from a numpy view to the serving process, errors as
ferry.Error subclasses with their status, DaemonGone when ferryd dies
mid-call, another thread making progress while one waits, use after free
and after close raising, asyncio."""

import asyncio
import ctypes
import logging
import os
import threading
import time

import numpy as np
import pytest
import torch

import ferry


def address(obj):
    """The address of the first byte of a writable buffer."""
    return ctypes.addressof(ctypes.c_char.from_buffer(memoryview(obj)))


def test_alloc_free_and_the_buffer_protocol(daemon):
    with ferry.attach(daemon.socket, "t-alloc") as c:
        assert c.state == "Ok"
        b = c.alloc(100)
        assert len(b) == 100 and b.capacity >= 100
        mv = memoryview(b)
        assert mv.nbytes == 100 and not mv.readonly
        mv[:5] = b"hello"
        arr = np.frombuffer(b, dtype=np.uint8)
        t = torch.frombuffer(b, dtype=torch.uint8)
        # All three are the same memory: the arena block.
        assert address(b) == arr.ctypes.data == t.data_ptr()
        t[5] = ord("!")
        assert bytes(mv[:6]) == b"hello!" and arr[5] == ord("!")
        assert b.exports == 2  # the memoryview and the tensor (numpy keeps the Buffer itself)
        del mv, t, arr
        assert b.exports == 0
        c.free(b)
        assert b.freed
        # Blocks come back: many allocations of the whole default arena size in turn.
        for _ in range(200):
            c.free(c.alloc(256 * 1024))


def test_zero_copy_numpy_write_read_on_the_serving_side(daemon, helpers, tmp_path):
    out = tmp_path / "seen.txt"
    helpers("record", daemon.socket, "recorder", out)
    with ferry.attach(daemon.socket, "t-zero-copy") as c:
        ep = c.open("recorder")
        req, resp = c.alloc(4096), c.alloc(8)
        view = np.frombuffer(req, dtype=np.float32)  # no copy: the array is the arena block
        view[:] = np.arange(1024, dtype=np.float32) * 0.5
        n = c.call(ep, req, resp).wait(10)
        assert n == 8 and int.from_bytes(bytes(resp), "little") == 4096
        seen = bytes.fromhex(out.read_text().split()[0])
        assert np.array_equal(np.frombuffer(seen, dtype=np.float32), np.arange(1024, dtype=np.float32) * 0.5)
        # The serving process answers into our response buffer: write through it and read the next answer there.
        resp_view = np.frombuffer(resp, dtype=np.uint64)
        resp_view[0] = 0
        view[:] = 7
        assert c.call(ep, req, resp, length=16).wait(10) == 8
        assert resp_view[0] == 16  # the answer landed where the array looks


def test_errors_are_ferry_errors_with_their_status(daemon):
    with ferry.attach(daemon.socket, "t-errors") as c:
        with pytest.raises(ferry.ServiceNotFound) as e:
            c.open("no-such-service")
        assert e.value.status == "ServiceNotFound" and isinstance(e.value, ferry.Error)
        for n in (0, -1):
            with pytest.raises(ferry.BadRequest, match=r"alloc\(%d\): a buffer needs at least one byte" % n):
                c.alloc(n)
        with pytest.raises(ferry.BadRequest):
            c.alloc(c.max_message_bytes + 1)
        c.serve("mine")
        with ferry.attach(daemon.socket, "t-errors-2") as other:
            with pytest.raises(ferry.ServiceExists, match=r"a client of this ferryd serves that name already"):
                other.serve("mine")
        # A name or target of the wrong form: the error says what the form is.
        name_rule = "a service name is 1 to 64 letters, digits, '.', '_' or '-'"
        for bad in ("", "a b", "x" * 65):
            with pytest.raises(ferry.BadRequest) as e:
                c.serve(bad)
            assert str(e.value) == "serve(%r): BadRequest (%s)" % (bad, name_rule)
        for bad in ("a b/c", "host:0/svc", "host/"):
            with pytest.raises(ferry.BadRequest) as e:
                c.open(bad)
            assert str(e.value) == "open(%r): BadRequest (a target is SERVICE or HOST[:PORT]/SERVICE; %s)" % (
                bad, name_rule)
        b = c.alloc(8)
        with pytest.raises(ferry.BadRequest):
            c.send(1234567, b, length=9)  # longer than the buffer: refused before anything is sent
        with pytest.raises(ferry.EndpointClosed):
            c.send(1234567, b).wait(10)  # no such endpoint: the daemon's answer
    with pytest.raises(ferry.DaemonGone):
        ferry.attach(os.path.join(daemon.dir, "nothing-here.sock"))
    assert issubclass(ferry.Timeout, TimeoutError) and issubclass(ferry.BadRequest, ValueError)


def test_use_after_free_and_after_close_raise(daemon):
    c = ferry.attach(daemon.socket, "t-uaf")
    b = c.alloc(64)
    t = torch.frombuffer(b, dtype=torch.float32)
    with pytest.raises(ferry.BufferInUse):
        c.free(b)  # a live tensor: the memory must stay
    del t
    c.free(b)
    with pytest.raises(ferry.BufferFreed):
        memoryview(b)
    with pytest.raises(ferry.BufferFreed):
        np.frombuffer(b, dtype=np.uint8)
    with pytest.raises(ferry.BufferFreed):
        c.free(b)
    with pytest.raises(ferry.BufferFreed):
        c.send(1, b)
    # numpy.frombuffer keeps the Buffer object, not a view: the block stays
    # reserved while the array lives. Closing with views alive detaches at
    # once and keeps the memory mapped (unused) until they are gone.
    kept = c.alloc(64)
    arr = np.frombuffer(kept, dtype=np.uint8)
    arr[:] = 3
    tensor = torch.frombuffer(c.alloc(16), dtype=torch.uint8)
    tensor[:] = 5
    c.close()
    assert c.state == "Closed"
    assert arr.sum() == 3 * 64 and tensor.sum().item() == 5 * 16  # still mapped: reading is safe
    with pytest.raises(ferry.BufferFreed):
        memoryview(kept)
    with pytest.raises(ferry.Closed):
        c.alloc(8)


def test_daemon_gone_mid_call(daemon, helpers):
    helpers("serve", daemon.socket, "slow", 5000)  # answers after 5 s
    c = ferry.attach(daemon.socket, "t-gone")
    ep = c.open("slow")
    req, resp = c.alloc(16), c.alloc(16)
    h = c.call(ep, req, resp)
    time.sleep(0.3)
    assert not h.done()
    daemon.kill()
    t0 = time.monotonic()
    with pytest.raises(ferry.DaemonGone):
        h.wait(10)
    assert time.monotonic() - t0 < 5
    assert c.state == "DaemonGone"
    with pytest.raises(ferry.DaemonGone):
        c.call(ep, req, resp)


def test_waits_for_deliveries_end_when_the_daemon_goes(daemon):
    # A server's loop (recv with or without a timeout, wait, recv_async)
    # learns that its ferryd died at once, instead of waiting for ever or
    # being told "nothing yet" for ever.
    c = ferry.attach(daemon.socket, "t-gone-server")
    c.serve("gone")

    async def pending_recv_async():
        waiting = asyncio.ensure_future(c.recv_async())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        daemon.kill()
        t0 = time.monotonic()
        with pytest.raises(ferry.DaemonGone):
            await asyncio.wait_for(waiting, 5)
        return time.monotonic() - t0

    took = asyncio.run(pending_recv_async())
    assert took < 1, "a pending recv_async heard of it after %.2f s" % took
    assert c.state == "DaemonGone"
    for what, wait in (("recv()", lambda: c.recv()), ("recv(30)", lambda: c.recv(30)),
                       ("wait(30)", lambda: c.wait(30)),
                       ("recv_async", lambda: asyncio.run(asyncio.wait_for(c.recv_async(), 30)))):
        t0 = time.monotonic()
        with pytest.raises(ferry.DaemonGone):
            wait()
        assert time.monotonic() - t0 < 1, "%s took %.2f s" % (what, time.monotonic() - t0)
    assert c.poll() == []  # never blocks: says what is left
    c.close()


def test_libferry_speaks_through_logging_only_when_asked(daemon, caplog, capfd):
    caplog.set_level(logging.DEBUG, logger="ferry")
    quiet = ferry.attach(daemon.socket, "t-quiet")  # default: errors only
    told = ferry.attach(daemon.socket, "t-told", log_level="info")
    daemon.kill()
    for c in (quiet, told):
        deadline = time.monotonic() + 10
        while c.state == "Ok" and time.monotonic() < deadline:
            try:
                c.wait(0.1)
            except ferry.DaemonGone:
                break
        assert c.state == "DaemonGone"
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [("ferry", logging.INFO,
                     "the daemon connection closed; 0 operations in flight fail with DaemonGone")]
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    with pytest.raises(ValueError):
        ferry.attach(daemon.socket, "t-bad-level", log_level="loud")


def test_another_thread_makes_progress_while_one_waits(daemon, helpers):
    helpers("serve", daemon.socket, "slow", 5000)  # far longer than 50 fast calls on a loaded machine
    helpers("serve", daemon.socket, "fast", 0)
    c = ferry.attach(daemon.socket, "t-threads")
    slow, fast = c.open("slow"), c.open("fast")
    slow_req, slow_resp = c.alloc(16), c.alloc(16)
    memoryview(slow_req)[:] = bytes(range(16))
    events = {}

    def blocked_waiter():
        events["slow_started"] = time.monotonic()
        n = c.call(slow, slow_req, slow_resp).wait(20)
        events["slow_done"] = time.monotonic()
        events["slow_n"] = n

    t = threading.Thread(target=blocked_waiter)
    t.start()
    time.sleep(0.2)  # the waiter is now blocked inside wait(), without the GIL
    req, resp = c.alloc(32), c.alloc(32)
    for i in range(50):
        memoryview(req)[:] = bytes([i]) * 32
        assert c.call(fast, req, resp).wait(10) == 32
        assert bytes(resp) == bytes([i]) * 32
    events["fast_done"] = time.monotonic()
    counted = 0
    while "slow_done" not in events and counted < 1000:  # Python keeps running too
        counted += 1
    t.join(20)
    assert not t.is_alive()
    assert events["fast_done"] < events["slow_done"], "the 50 fast calls waited for the slow one"
    assert events["slow_n"] == 16 and bytes(slow_resp) == bytes(range(16))[::-1]
    c.close()


def test_asyncio_await_calls_and_receive(daemon, helpers):
    helpers("serve", daemon.socket, "echo", 0)

    async def main(c, server):
        ep = c.open("echo")
        reqs = [c.alloc(8) for _ in range(8)]
        resps = [c.alloc(8) for _ in range(8)]
        for i, r in enumerate(reqs):
            memoryview(r)[:] = bytes([i]) * 8
        lengths = await asyncio.gather(*[c.call(ep, q, p) for q, p in zip(reqs, resps)])
        assert lengths == [8] * 8
        assert [bytes(p)[0] for p in resps] == list(range(8))
        # A server side awaits its requests.
        sid = server.serve("aio-served")
        ep2 = c.open("aio-served")
        h = c.call(ep2, reqs[0], resps[0])
        d = await asyncio.wait_for(server.recv_async(), 10)
        assert d.kind == "request" and d.service == sid and bytes(d) == bytes([0]) * 8
        ans = server.alloc(3)
        memoryview(ans)[:] = b"abc"
        await server.reply(d, ans)
        server.release(d)
        assert await asyncio.wait_for(h, 10) == 3 and bytes(resps[0])[:3] == b"abc"

    with ferry.attach(daemon.socket, "t-aio") as c, ferry.attach(daemon.socket, "t-aio-server") as server:
        asyncio.run(main(c, server))


def test_messages_and_release(daemon):
    with ferry.attach(daemon.socket, "t-msg-rx") as rx, ferry.attach(daemon.socket, "t-msg-tx") as tx:
        rx.serve("inbox")
        ep = tx.open("inbox")
        b = tx.alloc(5)
        memoryview(b)[:] = b"12345"
        tx.send(ep, b).wait(10)
        d = rx.recv(10)
        assert d.kind == "message" and bytes(d) == b"12345"
        arr = np.asarray(memoryview(d))
        with pytest.raises(ferry.BufferInUse):
            rx.release(d)
        del arr
        rx.release(d)
        with pytest.raises(ferry.BufferFreed):
            bytes(d)
        assert rx.recv(0) is None
        # Five bytes came inside the completion ring; 4 KiB come in an rx block.
        assert rx.stats["inline_deliveries"] == 1
        big = tx.alloc(4096)
        memoryview(big)[:] = bytes(range(256)) * 16
        tx.send(ep, big).wait(10)
        d = rx.recv(10)
        assert bytes(d) == bytes(range(256)) * 16
        rx.release(d)
        assert rx.stats["inline_deliveries"] == 1
        assert rx.stats["release_failures"] == 0


def test_wait_returns_when_something_completes(daemon, helpers):
    helpers("serve", daemon.socket, "slow", 10000)  # still out after every step below, however slow
    helpers("serve", daemon.socket, "fast", 0)
    with ferry.attach(daemon.socket, "t-wait") as c:
        slow, fast = c.open("slow"), c.open("fast")
        bufs = [c.alloc(8) for _ in range(4)]
        pending = c.call(slow, bufs[0], bufs[1])
        t0 = time.monotonic()
        assert c.wait(0.3) == [] and not pending.done()  # nothing completed: the whole timeout
        assert 0.25 <= time.monotonic() - t0 < 5
        h = c.call(fast, bufs[2], bufs[3])
        t0 = time.monotonic()
        c.wait(10)  # returns once the fast call completes, though the slow one is still out
        assert time.monotonic() - t0 < 5 and h.done() and not pending.done()
        assert pending.wait(20) == 8
