"""asyncio integration: ``await handle`` and ``await client.recv_async()``.

One reader per (client, event loop) watches the client's fd
(``loop.add_reader``); when it is readable the reader collects completions
(``client._pump()``, which polls until the ring is empty and so re-arms the
fd) and resolves the futures of the handles that finished. Nothing blocks
the loop: the handle's result is read with ``wait(0)``.
"""

import asyncio
import weakref
from typing import Any, Dict, Generator

_reactors: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Dict[Any, _Reactor]]" = weakref.WeakKeyDictionary()  # loop -> {client: _Reactor}


class _Reactor:
    def __init__(self, client, loop):
        self.client = client
        self.loop = loop
        self.fd = client.fileno()
        self.handles = []    # (handle, future)
        self.receivers = []  # futures waiting for a delivery
        self.reading = False

    def _arm(self):
        if not self.reading:
            self.loop.add_reader(self.fd, self._readable)
            self.reading = True

    def _disarm(self):
        if self.reading and not self.handles and not self.receivers:
            self.loop.remove_reader(self.fd)
            self.reading = False

    def _readable(self):
        try:
            self.client._pump()
        except Exception as e:  # closed under us: fail every waiter
            for _, f in self.handles:
                if not f.done():
                    f.set_exception(e)
            for f in self.receivers:
                if not f.done():
                    f.set_exception(e)
            self.handles, self.receivers = [], []
            self._disarm()
            return
        self._settle()

    def _settle(self):
        pending = []
        for h, f in self.handles:
            if f.done():
                continue
            if h.done():
                f.set_result(None)
            else:
                pending.append((h, f))
        self.handles = pending
        if self.receivers:
            waiting = [f for f in self.receivers if not f.done()]
            self.receivers = []
            for f in waiting:
                try:
                    d = self.client.recv(0)
                except Exception as e:  # DaemonGone: nothing more will arrive
                    f.set_exception(e)
                    continue
                if d is None:
                    self.receivers.append(f)
                else:
                    f.set_result(d)
        self._disarm()

    def wait_handle(self, handle):
        f = self.loop.create_future()
        self.handles.append((handle, f))
        self._arm()
        self.client._pump()  # completions may already be in the ring: the fd would not fire for them
        self._settle()
        return f

    def wait_delivery(self):
        f = self.loop.create_future()
        self.receivers.append(f)
        self._arm()
        self.client._pump()
        self._settle()
        return f


def _reactor(client):
    loop = asyncio.get_running_loop()
    per_loop = _reactors.setdefault(loop, {})
    r = per_loop.get(id(client))
    if r is None or r.client is not client:
        r = per_loop[id(client)] = _Reactor(client, loop)
    return r


async def _await_handle(handle):
    await _reactor(handle.client).wait_handle(handle)
    return handle.wait(0)  # done: returns the call's length, or raises its ferry.Error


def handle_await(self: Any) -> Generator[Any, None, Any]:
    """``await handle``: the call's response length (None for send/reply), or its ferry.Error."""
    return _await_handle(self).__await__()


async def recv_async(self: Any) -> Any:
    """The next delivery (message or request) for a service this client serves."""
    d = self.recv(0)
    if d is not None:
        return d
    return await _reactor(self).wait_delivery()
