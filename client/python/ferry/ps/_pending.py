"""ferry.ps.Pending: an operation of a ferry.ps.Worker in flight, waited
for with ``wait()``, ``Worker.wait_all()`` or ``await``. A read whose
ferryd went away in flight is issued again here, once ferryd is back
(``Again``, ferry/ps/_reattach.py)."""

from __future__ import annotations

import time
from typing import Any, Callable, Generator, Optional, Tuple

from ferry._errors import Error, by_status
from ferry.ps._reattach import Again

_Timeout = by_status("Timeout")
_AGAIN_PAUSE = 0.05  # between tries to issue a read again while ferryd is not back


def seconds_left(deadline: Optional[float]) -> Optional[float]:
    """Seconds until deadline (a time.monotonic()), never negative; None for none."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _wake(fut: Any) -> None:
    """An fd reader's callback: resolve the future its waiter sleeps on, once."""
    if not fut.done():
        fut.set_result(None)


class Pending:
    """An operation in flight. ``wait()`` (or ``await``) gives its result: the
    Rows of a pull, the tensor of a dense pull, None for a push. A read
    whose ferryd went away in flight is issued again once ferryd is back
    (ferry/ps/_reattach.py); the wait goes on meanwhile."""

    __slots__ = ("op", "_finish", "_result", "_done", "_read", "_again")

    def __init__(self, op: Any, finish: Optional[Callable[[Any], Any]] = None,
                 read: Optional[Tuple[Any, ...]] = None) -> None:
        self.op = op
        self._finish = finish
        self._done = False
        self._result: Any = None
        self._read = read  # a read: (worker, name, *args), to start it again (Again)
        self._again: Optional[Again] = None

    def __repr__(self) -> str:
        return "<ferry.ps.Pending: %s>" % ("done" if self._done else (self.op.status or "in flight"))

    def done(self) -> bool:
        """Whether the operation finished (collects completions first)."""
        return self._done or bool(self.op.done())

    def wait(self, timeout: Optional[float] = None) -> Any:
        """Block until done (timeout in seconds); the result, or the operation's ferry.Error."""
        if self._done:
            return self._result
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                self.op.wait(seconds_left(deadline))
                break
            except Error as e:
                if self._read is None or e.status != "DaemonGone":
                    raise
            while not self._issue_again():
                if deadline is not None and time.monotonic() >= deadline:
                    raise _Timeout("pull still in flight after the wait's timeout: its ferryd went away, and it "
                                   "waits to be issued again once ferryd is back")
                left = seconds_left(deadline)
                time.sleep(_AGAIN_PAUSE if left is None else min(_AGAIN_PAUSE, left))
        self._settle()
        return self._result

    def _issue_again(self) -> bool:
        """Whether the read was issued again (a new ``op``); False while ferryd is not back."""
        assert self._read is not None
        if self._again is None:
            self._again = Again(*self._read)
        op = self._again.next()
        if op is None:
            return False
        self.op = op
        return True

    def _failed_daemon_gone(self) -> bool:
        return self._read is not None and self.op.status == "DaemonGone"

    def _settle(self) -> None:
        self._result = self._finish(self.op) if self._finish else None
        self._done = True

    def __await__(self) -> Generator[Any, None, Any]:
        return self._await().__await__()

    async def _await(self) -> Any:
        import asyncio
        loop = asyncio.get_running_loop()
        while True:
            fd = self.op.fileno()
            while not self.done():
                if fd < 0:  # a busy-polling worker has no fd
                    await asyncio.sleep(0)
                    continue
                fut: "asyncio.Future[None]" = loop.create_future()
                loop.add_reader(fd, _wake, fut)
                try:
                    if self.done():  # done() collected completions: the fd may not fire for them
                        break
                    # Bounded: another waiter on this fd may have collected ours.
                    await asyncio.wait([fut], timeout=0.05)
                finally:
                    loop.remove_reader(fd)
            if self._done or not self._failed_daemon_gone():
                return self.wait(0)
            while not self._issue_again():  # ferryd went away: the read again, once it is back
                await asyncio.sleep(_AGAIN_PAUSE)
