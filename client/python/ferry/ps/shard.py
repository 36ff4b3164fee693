"""Shard servers: ``ferry.ps.ShardServer`` serves one shard from a thread of
this process (the serving loop is C++, GIL-free); ``serve()`` blocks until a
signal. ``python3 -m ferry.ps.server`` (server.py) is a shard process.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from ferry import _ferry
from ferry.ps import tables as _tables

_ps = _ferry.ps


MAX_MESSAGE_BYTES = 1 << 20  # ferryd's default max-message-bytes


def default_max_count(specs: Sequence[Any]) -> int:
    """The most keys (or dense elements) one request may carry so that a push
    of the widest table still fits one message."""
    widest = max([s.dim for s in specs] + [1])
    return max(1, (MAX_MESSAGE_BYTES - 64) // (8 + 4 * widest))


def _ms(name: str, seconds: float, zero: str) -> int:
    """Seconds in milliseconds; ValueError unless 0 <= seconds <= 86400."""
    if not 0 <= seconds <= 86400:
        raise ValueError("%s: from 0 (%s) to 86400 seconds, got %r" % (name, zero, seconds))
    return int(round(seconds * 1000)) or (1 if seconds > 0 else 0)


def _stall_ms(seconds: float) -> int:
    return _ms("save_stall_s", seconds, "no limit")


class ShardServer:
    """Shard ``index`` of ``shards`` of ``tables``, served over the ferryd at
    ``socket`` as ``service_prefix + str(index)``.

    ``checkpoint_dir``: a directory on this host where workers may save the
    shard's part of every table (``ferry.ps.save_shards``); without it such
    saves are refused. ``restore``: the name of a checkpoint there to start
    from (this shard's parts of every table; taken with another number of
    shards, every part, of which it keeps the rows it owns now).
    ``save_stall_s``: a save whose writer sits this long in one filesystem
    call (a disk or network filesystem that hangs) fails IoFailed, and
    saves are refused IoFailed until that call returns; 0: wait however
    long it takes. ``reattach_s``: when its ferryd goes away (restarted for
    an upgrade, or crashed) the shard keeps its rows and, for this long,
    attaches again (at most every 100 ms, doubling to 2 s) and serves them
    on the new ferryd; 0: it stops serving at once (``running`` turns False,
    ``counters()["result"]`` says DaemonGone)."""

    def __init__(self, tables: Sequence[_tables.Table], index: int, shards: int, socket: Optional[str] = None, *,
                 pool: int = 64, max_count: Optional[int] = None, busy_poll: bool = False,
                 service_prefix: str = "ps-shard-", allow_non_finite: bool = False,
                 checkpoint_dir: Optional[str] = None, restore: Optional[str] = None,
                 save_stall_s: float = 60.0, reattach_s: float = 60.0) -> None:
        self.tables = _tables.table_list(tables)
        specs = _tables.specs(self.tables)
        if max_count is None:
            max_count = default_max_count(specs)
        self._s = _ps.ShardServer(specs, index, shards, socket or "", pool, max_count, busy_poll, service_prefix,
                                  allow_non_finite, os.fspath(checkpoint_dir) if checkpoint_dir else "",
                                  restore or "", _stall_ms(save_stall_s),
                                  _ms("reattach_s", reattach_s, "stop serving at once"))
        self.index, self.shards = index, shards
        self.max_count = max_count  # keys (or elements) per request it accepts: workers must not send more

    @property
    def service(self) -> str:
        """The service it serves (PREFIX<index>)."""
        return self._s.service

    @property
    def running(self) -> bool:
        """True while serving (or waiting for its ferryd to come back); False
        after stop() or once ferryd went away for longer than reattach_s
        (counters()["result"] then says DaemonGone)."""
        return self._s.running

    @property
    def reattached(self) -> int:
        """How many times it attached again, and served its rows on, after its ferryd went away."""
        return int(self._s.reattached)

    def start(self) -> "ShardServer":
        """Begin answering (a C++ thread, GIL-free); returns self."""
        self._s.start()
        return self

    def stop(self) -> None:
        """Stop answering and detach from ferryd."""
        self._s.stop()

    def counters(self) -> Dict[str, Any]:
        """Requests served, refused (non_finite, forbidden, table_full and
        save_failed among them), pulls/pushes/assigns, save steps, keys, and the serving loop's
        result ("Running" while it serves): a snapshot, also while serving."""
        return self._s.counters()

    def usage(self) -> Dict[str, Dict[str, int]]:
        """{table name: {"rows": n, "bytes": b}} this shard holds now (also while serving)."""
        names = {s.id: s.name for s in _tables.specs(self.tables)}
        return {names[i]: u for i, u in self._s.usage().items()}

    def find(self, table: str, key: int) -> Optional[List[float]]:
        """A parameter's values after stop() (None when this shard never held it)."""
        tid = next(s.id for s in _tables.specs(self.tables) if s.name == table)
        return self._s.find(tid, key)

    def __repr__(self) -> str:
        return "<ferry.ps.ShardServer %s: shard %d of %d of %s, %s>" % (
            self.service, self.index, self.shards, ", ".join(repr(t.name) for t in self.tables),
            "running" if self.running else "stopped")

    def __enter__(self) -> "ShardServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(tables: Sequence[_tables.Table], index: int, shards: int, socket: Optional[str] = None, *,
          ready: Optional[Callable[[ShardServer], None]] = None,
          reattached: Optional[Callable[[ShardServer], None]] = None, **options: Any) -> Dict[str, Any]:
    """Serve a shard until SIGINT or SIGTERM, or until ferryd goes away for
    longer than ``reattach_s``; ready(server) is called once serving,
    reattached(server) each time it serves again on a restarted ferryd.
    Returns the counters, whose "result" is "Ok" after a signal and the
    daemon's status (DaemonGone) when it went away; "tables" holds usage()."""
    # The handler only sets a flag: one that took a lock (Event.set) could
    # run while the main thread holds that same lock inside Event.wait, and
    # wait for itself for ever (seen: a shard that never exited on SIGTERM).
    stopping: List[int] = []
    previous = {s: signal.signal(s, lambda *_: stopping.append(1)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ShardServer(tables, index, shards, socket, **options) as server:
            if ready:
                ready(server)
            # The serving loop ends by itself when ferryd went away and did
            # not come back in time: a shard that stayed would leave its
            # workers with ServiceNotFound once a new ferryd starts, so it
            # ends too (a supervisor restarts it).
            seen = 0
            while not stopping and server.running:
                if reattached is not None and server.reattached != seen:
                    seen = server.reattached
                    reattached(server)
                time.sleep(0.05)  # so a signal stops it within 50 ms
            if reattached is not None and server.reattached != seen:  # in the last 50 ms
                reattached(server)
        counters = server.counters()
        counters["tables"] = server.usage()
        return counters
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
