"""Shard servers: ``ferry.ps.ShardServer`` serves one shard from a thread of
this process (the serving loop is C++, GIL-free); ``serve()`` blocks until a
signal; ``python3 -m ferry.ps.server`` is a shard process for launchers.
"""

import argparse
import json
import signal
import sys
import threading

from ferry import _ferry
from ferry.ps import tables as _tables

_ps = _ferry.ps


class ShardServer:
    """Shard ``index`` of ``shards`` of ``tables``, served over the ferryd at
    ``socket`` as ``service_prefix + str(index)``."""

    def __init__(self, tables, index, shards, socket=None, *, pool=64, max_count=65536, busy_poll=False,
                 service_prefix="ps-shard-"):
        self.tables = list(tables)
        self._s = _ps.ShardServer(_tables.specs(self.tables), index, shards, socket or "", pool, max_count, busy_poll,
                                  service_prefix)
        self.index, self.shards = index, shards

    @property
    def service(self):
        return self._s.service

    @property
    def running(self):
        return self._s.running

    def start(self):
        self._s.start()
        return self

    def stop(self):
        self._s.stop()

    def counters(self):
        """Requests served, refused, pulls/pushes/assigns, keys (after stop())."""
        return self._s.counters()

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
    """Serve a shard until SIGINT or SIGTERM; ready(server) is called once serving."""
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ShardServer(tables, index, shards, socket, **options) as server:
            if ready:
                ready(server)
            while not stop.wait(0.2):
                pass
        return server.counters()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m ferry.ps.server", description="serve one parameter-server shard")
    ap.add_argument("--tables", required=True, help="JSON list of Table.to_dict() objects, or @FILE")
    ap.add_argument("--shard", required=True, help="i/n")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--pool", type=int, default=64)
    ap.add_argument("--max-count", type=int, default=65536)
    ap.add_argument("--busy-poll", action="store_true")
    ap.add_argument("--service-prefix", default="ps-shard-")
    a = ap.parse_args(argv)
    text = open(a.tables[1:]).read() if a.tables.startswith("@") else a.tables
    tables = [_tables.Table.from_dict(d) for d in json.loads(text)]
    index, shards = (int(x) for x in a.shard.split("/"))

    def ready(server):
        print("ready %s" % server.service, flush=True)

    counters = serve(tables, index, shards, a.socket, ready=ready, pool=a.pool, max_count=a.max_count,
                     busy_poll=a.busy_poll, service_prefix=a.service_prefix)
    print("served %s" % json.dumps(counters), flush=True)
    return 0 if counters.get("result") == "Ok" else 1


if __name__ == "__main__":
    sys.exit(main())
