"""ferry: RDMA-aware parameter-server communication for Python and PyTorch.

A process attaches to the ferryd of its host and hands it buffers in a shared
arena: calls and messages go out without copies, and a call's response lands
in a buffer the caller chose (zero copy into numpy or torch)::

    import ferry, numpy as np
    with ferry.attach() as client:            # $FERRY_SOCKET or /run/ferry/ferryd.sock
        ep = client.open("HOST:PORT/SERVICE")
        req, resp = client.alloc(4096), client.alloc(4096)
        np.frombuffer(req, np.float32)[:] = 1.0   # write in place
        n = client.call(ep, req, resp).wait()     # or: n = await client.call(...)
        answer = np.frombuffer(resp, np.float32, count=n // 4)

The parameter server (sharded tables, server-side SGD/Adagrad, async pulls,
torch modules) is ``ferry.ps``. Every failure raises a ``ferry.Error`` subclass
whose ``status`` names the ferry status.
"""

from __future__ import annotations

import logging
from typing import Optional, Union

from ferry import _aio
from ferry._errors import *  # noqa: F401,F403 (the exception classes are the API)
from ferry._errors import Error, by_status
from ferry._ferry import Buffer, Client, Delivery, Handle, __version__, default_socket_path
from ferry._ferry import attach as _attach


_LOG_LEVELS = {"debug": 1, "info": 2, "warn": 3, "warning": 3, "error": 4, "off": 5}


def _log_level(level: Union[None, str, int]) -> int:
    """None -> 0 (libferry's default: $FERRY_LOG_LEVEL, else errors only);
    a name (debug, info, warn, error, off) or a logging level number -> libferry's level."""
    if level is None:
        return 0
    if isinstance(level, str):
        if level.lower() not in _LOG_LEVELS:
            raise ValueError("log_level %r: expected one of %s" % (level, ", ".join(_LOG_LEVELS)))
        return _LOG_LEVELS[level.lower()]
    if isinstance(level, int) and not isinstance(level, bool):
        for limit, ours in ((logging.DEBUG, 1), (logging.INFO, 2), (logging.WARNING, 3), (logging.CRITICAL, 4)):
            if level <= limit:
                return ours
        return 5
    raise TypeError("log_level must be None, a level name or a logging level, not %r" % (level,))


def attach(socket: Optional[str] = None, name: Optional[str] = None, *, tx_bytes: int = 0, rx_bytes: int = 0,
           sq_entries: int = 0, cq_entries: int = 0, busy_poll: bool = False,
           log_level: Union[None, str, int] = None) -> Client:
    """Attach to ferryd and return a ``ferry.Client``.

    socket: the daemon's client socket (default ``$FERRY_SOCKET``, else
    ``/run/ferry/ferryd.sock``); name: shown by ``ferryctl clients``;
    tx_bytes/rx_bytes/sq_entries/cq_entries: 0 takes the daemon's defaults;
    busy_poll: spin on the completion ring instead of sleeping (then fileno()
    and asyncio cannot be used); log_level: what libferry says about this
    client, to the ``logging`` logger "ferry" (a name: debug, info, warn,
    error, off, or a ``logging`` level; None: ``$FERRY_LOG_LEVEL``, else
    errors only).
    """
    return _attach(socket or "", name or "", tx_bytes, rx_bytes, sq_entries, cq_entries, busy_poll,
                   _log_level(log_level))


def _client_enter(self):
    return self


def _client_exit(self, *exc):
    self.close()
    return False


def _buffer_free(self):
    """Give the block back (same as ``client.free(buffer)``)."""
    self.client.free(self)


def _buffer_exit(self, *exc):
    if not self.freed:
        self.client.free(self)
    return False


def _delivery_release(self):
    """Hand the delivery back to the daemon (same as ``client.release(delivery)``)."""
    self.client.release(self)


# The compiled classes' methods written in Python (the stubs declare them).
for _cls, _name, _fn in ((Client, "__enter__", _client_enter), (Client, "__exit__", _client_exit),
                         (Buffer, "free", _buffer_free), (Buffer, "__enter__", _client_enter),
                         (Buffer, "__exit__", _buffer_exit), (Delivery, "release", _delivery_release),
                         (Handle, "__await__", _aio.handle_await), (Client, "recv_async", _aio.recv_async)):
    setattr(_cls, _name, _fn)
del _cls, _name, _fn

__all__ = ["attach", "Client", "Buffer", "Delivery", "Handle", "Error", "by_status", "default_socket_path",
           "__version__"] + [n for n in dir() if isinstance(globals()[n], type) and issubclass(globals()[n], Error)]
