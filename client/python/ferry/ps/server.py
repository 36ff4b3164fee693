"""``python3 -m ferry.ps.server``: one parameter-server shard as a process
(for launchers: it prints ``ready SERVICE`` once serving, ``served {...}``
when SIGTERM or SIGINT stops it). With ``--store HOST:PORT`` it also
publishes where it is in that torch.distributed store (a torchrun job's
MASTER_ADDR:MASTER_PORT), for ``ferry.ps.Worker.from_env()``. Under
systemd (``ferry-ps-shard@.service``, Type=notify) it sends READY=1 once
serving and STOPPING=1 when stopped."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import List, Optional, Sequence, Tuple

from ferry._errors import Error
from ferry.ps import _metrics
from ferry.ps import tables as _tables
from ferry.ps.shard import serve


def _parse_tables(ap: argparse.ArgumentParser, arg: str) -> List[_tables.Table]:
    """--tables: a JSON list of Table.to_dict() objects, or @FILE holding one; ap.error() when it is not."""
    text = arg
    if arg.startswith("@"):
        try:
            with open(arg[1:]) as f:
                text = f.read()
        except OSError as e:
            ap.error("--tables %s: %s" % (arg, e.strerror))
    try:
        listed = json.loads(text)
    except json.JSONDecodeError as e:
        ap.error("--tables: not JSON (%s)" % e)
    if not isinstance(listed, list) or not listed:
        ap.error("--tables: a non-empty JSON list of tables (Table.to_dict() objects), got %.80s" % text)
    try:
        return [_tables.Table.from_dict(d) for d in listed]
    except ValueError as e:
        ap.error("--tables: %s" % e)


def _parse_shard(ap: argparse.ArgumentParser, arg: str) -> Tuple[int, int]:
    """--shard i/n, 0 <= i < n; ap.error() when it is not."""
    parts = arg.split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) or not 0 <= int(parts[0]) < int(parts[1]):
        ap.error("--shard: INDEX/SHARDS with 0 <= INDEX < SHARDS (e.g. 0/2), got %r" % arg)
    return int(parts[0]), int(parts[1])


def _notify(state: str) -> None:
    """sd_notify(3) without libsystemd: a datagram to $NOTIFY_SOCKET (systemd's
    Type=notify; ferry-ps-shard@.service), nothing when it is unset."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path or path[0] not in "/@":
        return
    address = "\0" + path[1:] if path[0] == "@" else path  # '@': the abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.sendto(state.encode(), address)
    except OSError as e:
        print("ferry.ps.server: cannot notify systemd at %s: %s" % (path, e.strerror), file=sys.stderr, flush=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Serve one shard until SIGTERM or SIGINT; the exit status (0: served without error)."""
    ap = argparse.ArgumentParser(prog="python3 -m ferry.ps.server", description="serve one parameter-server shard")
    ap.add_argument("--tables", required=True, help="JSON list of Table.to_dict() objects, or @FILE")
    ap.add_argument("--shard", required=True, help="INDEX/SHARDS, e.g. 0/2")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--pool", type=int, default=64)
    ap.add_argument("--max-count", type=int, default=None)
    ap.add_argument("--busy-poll", action="store_true")
    ap.add_argument("--service-prefix", default="ps-shard-")
    ap.add_argument("--allow-non-finite", action="store_true",
                    help="accept NaN and infinite gradients and values (refused NonFinite by default)")
    ap.add_argument("--checkpoint-dir", default=None,
                    help="directory on this host where workers may save this shard's part of each table "
                         "(ferry.ps.save_shards); must exist")
    ap.add_argument("--restore", default=None, metavar="NAME",
                    help="start from the checkpoint NAME in --checkpoint-dir (taken with another shard count: "
                         "every part of it must be there)")
    ap.add_argument("--save-stall-s", type=float, default=60.0, metavar="SECONDS",
                    help="fail a save whose writer sits this long in one filesystem call (a disk that hangs), "
                         "and refuse saves until that call returns; 0: no limit (default 60)")
    ap.add_argument("--reattach-s", type=float, default=60.0, metavar="SECONDS",
                    help="when ferryd goes away, keep the rows and attach again for this long (0: exit at once)")
    ap.add_argument("--metrics", default=None, metavar="HOST:PORT",
                    help="serve this shard's counters and table usage for Prometheus at http://HOST:PORT/metrics")
    ap.add_argument("--store", default=None, help="HOST:PORT of a torch.distributed TCPStore to publish this shard in")
    ap.add_argument("--advertise", default=None,
                    help="HOST:PORT workers reach this shard's ferryd at (default: that ferryd's --listen)")
    ap.add_argument("--store-timeout", type=float, default=300.0, help="seconds to wait for the store to answer")
    a = ap.parse_args(argv)
    tables = _parse_tables(ap, a.tables)
    index, shards = _parse_shard(ap, a.shard)
    if a.restore and not a.checkpoint_dir:
        ap.error("--restore NAME needs --checkpoint-dir, the directory NAME is in")
    if not 0 <= a.save_stall_s <= 86400:
        ap.error("--save-stall-s: from 0 (no limit) to 86400 seconds, got %r" % a.save_stall_s)
    if not 0 <= a.reattach_s <= 86400:
        ap.error("--reattach-s: from 0 (exit at once) to 86400 seconds, got %r" % a.reattach_s)
    metrics = None
    if a.metrics:
        where = _metrics.parse_address(a.metrics)
        if where is None:
            ap.error("--metrics: HOST:PORT (e.g. 127.0.0.1:9470), got %r" % a.metrics)
        try:
            metrics = _metrics.MetricsServer(*where)
        except OSError as e:
            print("ferry.ps.server: shard %d/%d: --metrics %s: %s" % (index, shards, a.metrics, e.strerror),
                  file=sys.stderr, flush=True)
            return 1

    store = None
    if a.store:
        from ferry.ps import store as _store
        store = _store.connect(a.store, a.store_timeout)
        advertise = a.advertise or _store.daemon_listen(a.socket)

    def ready(server):
        if store is not None:
            entry = _store.shard_entry(server.service, server.max_count, tables, a.socket, advertise)
            _store.publish(store, index, shards, entry, a.service_prefix)
        if metrics is not None:
            metrics.start(server)
        print("ready %s" % server.service, flush=True)
        _notify("READY=1\nSTATUS=serving %s (shard %d of %d)" % (server.service, index, shards))

    def reattached(server):
        print("ferry.ps.server: shard %d/%d: ferryd went away and is back: serving %s again, with its rows "
              "(%d time%s)" % (index, shards, server.service, server.reattached,
                               "" if server.reattached == 1 else "s"), file=sys.stderr, flush=True)
        _notify("STATUS=serving %s (shard %d of %d; attached again %d times after ferryd restarted)"
                % (server.service, index, shards, server.reattached))

    try:
        counters = serve(tables, index, shards, a.socket, ready=ready, reattached=reattached, pool=a.pool,
                         max_count=a.max_count, busy_poll=a.busy_poll, service_prefix=a.service_prefix,
                         allow_non_finite=a.allow_non_finite, checkpoint_dir=a.checkpoint_dir, restore=a.restore,
                         save_stall_s=a.save_stall_s, reattach_s=a.reattach_s)
    except (Error, ValueError) as e:
        # A table the shard refuses, no ferryd, a service already served: one line, not a traceback.
        print("ferry.ps.server: shard %d/%d: %s" % (index, shards, e), file=sys.stderr, flush=True)
        return 2 if isinstance(e, ValueError) else 1
    finally:
        if metrics is not None:
            metrics.close()
    _notify("STOPPING=1")
    print("served %s" % json.dumps(counters), flush=True)
    if counters.get("result") != "Ok":
        print("ferry.ps.server: shard %d/%d: ferryd went away (%s) and was not back within --reattach-s %g s; "
              "exiting so that a supervisor restarts it once ferryd is back"
              % (index, shards, counters.get("result"), a.reattach_s), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
