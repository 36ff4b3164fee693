"""ferry.ps.Worker after its own ferryd went away (an upgrade's
``systemctl restart ferryd``, a crash).

The operations in flight then end ``DaemonGone``. The worker's next
operation attaches to ferryd again, once it is back, and opens every shard
again (a Python shard server attached to that ferryd attaches again too,
with its rows: ferry.ps.ShardServer's reattach_s); that operation, and the
ones after it, go on as before. Until ferryd answers, each operation fails
``DaemonGone`` at once: attaching is tried again at most every 100 ms,
doubling to 2 s while it fails.

A read in flight then (a pull, a dense pull, their optimizer state's) is
not lost: it is idempotent, so its wait issues it again once ferryd is back,
for up to the worker's ``timeout`` seconds from the failure, and gives the
rows as if nothing had happened (``Again``). A write in flight (a push, an
assign) fails ``DaemonGone``: whether its shard applied it is unknown, and
the caller decides.

Rows pulled before stay readable: their operations keep the earlier
attachment (and its shared memory) until the last of them is gone.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from ferry._errors import Error, by_status

_DaemonGone = by_status("DaemonGone")
_FIRST_PAUSE, _MAX_PAUSE = 0.1, 2.0
# What a new attachment meets while ferryd, or a shard attached to it, is not back yet.
_NOT_BACK = ("DaemonGone", "ServiceNotFound")


def refused_as_gone(e: Error, w: Any) -> bool:
    """Whether ``e``, raised by starting an operation on the extension
    worker ``w``, is its refusal because ``w``'s ferryd had just gone:
    nothing of the operation left this process."""
    return e.status == "DaemonGone" and bool(w.daemon_gone)


class Reattach:
    """Mixin; the class sets ``self._w`` (the extension worker) and calls
    ``_reattach_init(make)`` with what makes a new one, in its constructor."""

    _w: Any
    _timeout: float

    def _reattach_init(self, make: Callable[[], Any]) -> None:
        self._make_core = make
        self._reattach_lock = threading.Lock()
        self._retry_at = 0.0
        self._pause = _FIRST_PAUSE
        self._last_failure: Optional[Error] = None
        self.reattached = 0  # how many times this worker attached again after its ferryd went away

    def _core(self) -> Any:
        """The extension worker to start an operation on: a new one, attached
        to ferryd again, when the current one's ferryd went away."""
        w = self._w
        if not w.daemon_gone:
            return w
        with self._reattach_lock:
            if self._w is not w:  # another thread attached again meanwhile
                return self._w
            now = time.monotonic()
            if now < self._retry_at:
                raise _DaemonGone("this worker's ferryd went away, and attaching again failed (%s); the next try "
                                  "is in %.1f s, at an operation then" % (self._last_failure, self._retry_at - now))
            try:
                new = self._make_core()
            except Error as e:
                self._last_failure = e
                self._retry_at = time.monotonic() + self._pause
                self._pause = min(_MAX_PAUSE, self._pause * 2)
                raise type(e)("this worker's ferryd went away, and attaching again failed: %s" % e) from None
            self._w = new
            self._retry_at, self._pause, self._last_failure = 0.0, _FIRST_PAUSE, None
            self.reattached += 1
            self._attached_again()
            return new

    def _start(self, name: str, *args: Any) -> Any:
        """Operation ``name`` of the extension worker, started. One refused
        because ferryd had just gone (before the worker's look at its socket
        said so) never left this process: it is started once more, after
        attaching again."""
        w = self._core()
        try:
            return getattr(w, name)(*args)
        except Error as e:
            if not refused_as_gone(e, w):
                raise
        return getattr(self._core(), name)(*args)

    def _attached_again(self) -> None:
        """After a new attachment: what the class set up on the old one (a GPU registration)."""


class Again:
    """A read (``name`` of the extension worker, with ``args``) whose try
    in flight failed ``DaemonGone``: ``next()`` starts it on a new
    attachment once ferryd and the shards are back, for up to the worker's
    timeout from the first failure. The args (the keys) are sent again as
    they are then: like any operation in flight, the caller leaves them
    alone until its wait returns. Made only after such a failure: a pull
    keeps just the tuple ``(worker, name, *args)`` for it."""

    __slots__ = ("worker", "name", "args", "until", "gave_up")

    def __init__(self, worker: Reattach, name: str, *args: Any) -> None:
        self.worker, self.name, self.args = worker, name, args
        self.until: Optional[float] = None
        self.gave_up = ""  # once the time was up: why, raised again by every later wait

    def next(self) -> Any:
        """The operation started again, or None while ferryd or a shard is
        not back (try later); DaemonGone once the time is up."""
        if self.gave_up:
            raise _DaemonGone(self.gave_up)
        now = time.monotonic()
        if self.until is None:
            self.until = now + self.worker._timeout
        try:
            return self.worker._start(self.name, *self.args)
        except Error as e:
            if e.status not in _NOT_BACK:
                raise
            if now < self.until:
                return None
            self.gave_up = ("pull failed: DaemonGone (this host's ferryd went away with it in flight, and it could "
                            "not be issued again within the worker's timeout, %.1f s: %s)" % (self.worker._timeout, e))
            raise _DaemonGone(self.gave_up) from None
