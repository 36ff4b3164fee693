"""Shard servers: ``ferry.ps.ShardServer`` serves one shard from a thread of
this process (the serving loop is C++, GIL-free); ``serve()`` blocks until a
signal. ``python3 -m ferry.ps.server`` (server.py) is a shard process.
"""

import signal
import threading

from ferry import _ferry
from ferry.ps import tables as _tables

_ps = _ferry.ps


MAX_MESSAGE_BYTES = 1 << 20  # ferryd's default max-message-bytes


def default_max_count(specs):
    """The most keys (or dense elements) one request may carry so that a push
    of the widest table still fits one message."""
    widest = max([s.dim for s in specs] + [1])
    return max(1, (MAX_MESSAGE_BYTES - 64) // (8 + 4 * widest))


class ShardServer:
    """Shard ``index`` of ``shards`` of ``tables``, served over the ferryd at
    ``socket`` as ``service_prefix + str(index)``."""

    def __init__(self, tables, index, shards, socket=None, *, pool=64, max_count=None, busy_poll=False,
                 service_prefix="ps-shard-", allow_non_finite=False):
        self.tables = list(tables)
        specs = _tables.specs(self.tables)
        if max_count is None:
            max_count = default_max_count(specs)
        self._s = _ps.ShardServer(specs, index, shards, socket or "", pool, max_count, busy_poll, service_prefix,
                                  allow_non_finite)
        self.index, self.shards = index, shards

    @property
    def service(self):
        return self._s.service

    @property
    def running(self):
        """True while serving; False after stop() or once ferryd went away
        (counters()["result"] then says DaemonGone)."""
        return self._s.running

    def start(self):
        self._s.start()
        return self

    def stop(self):
        self._s.stop()

    def counters(self):
        """Requests served, refused (non_finite, forbidden, table_full among
        them), pulls/pushes/assigns, keys, and the serving loop's result
        (after stop(), or once running is False)."""
        return self._s.counters()

    def usage(self):
        """{table name: {"rows": n, "bytes": b}} this shard holds now (also while serving)."""
        names = {s.id: s.name for s in _tables.specs(self.tables)}
        return {names[i]: u for i, u in self._s.usage().items()}

    def find(self, table, key):
        """A parameter's values after stop() (None when this shard never held it)."""
        tid = next(s.id for s in _tables.specs(self.tables) if s.name == table)
        return self._s.find(tid, key)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def serve(tables, index, shards, socket=None, *, ready=None, **options):
    """Serve a shard until SIGINT or SIGTERM, or until ferryd goes away;
    ready(server) is called once serving. Returns the counters, whose
    "result" is "Ok" after a signal and the daemon's status (DaemonGone)
    when it went away; "tables" holds usage()."""
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ShardServer(tables, index, shards, socket, **options) as server:
            if ready:
                ready(server)
            # The serving loop ends by itself when ferryd goes away: a shard
            # that stayed would leave its workers with ServiceNotFound once a
            # new ferryd starts, so it ends too (a supervisor restarts it).
            while server.running and not stop.wait(0.05):
                pass
        counters = server.counters()
        counters["tables"] = server.usage()
        return counters
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
