"""Shard servers and a worker over them, for the Python suites."""

import contextlib

import ferry.ps as ps


@contextlib.contextmanager
def served(daemon, prefix, tables):
    """A worker over two fresh shard servers of `tables` (rows from their init); all stopped after."""
    shards = [ps.ShardServer(tables, i, 2, daemon.socket, service_prefix=prefix).start() for i in range(2)]
    worker = ps.Worker(tables, 2, daemon.socket, service_prefix=prefix)
    try:
        yield worker
    finally:
        worker.close()
        for s in shards:
            s.stop()
