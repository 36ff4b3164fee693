"""``python3 -m ferry.ps.save NAME``: have every shard save its part
of the tables as checkpoint NAME in its own ``--checkpoint-dir``
(``ferry.ps.save_shards``) from outside the job, e.g. from cron on a
fleet of inference shards that online training keeps updating. Prints one
JSON line, ``{"name": NAME, "tables": {table: [rows saved by each shard]},
"seconds": s}``; exits 1 with one line when a shard refuses or cannot be
reached, 2 for a bad command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Optional, Sequence

from ferry._errors import Error
from ferry.ps.server import _parse_tables
from ferry.ps.shard_saves import save_shards
from ferry.ps.worker import Worker


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Save checkpoint NAME on every shard; the exit status."""
    ap = argparse.ArgumentParser(prog="python3 -m ferry.ps.save",
                                 description="have every shard save its part of the tables (shard-side checkpoint)")
    ap.add_argument("name", help="the checkpoint's name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with '.'")
    ap.add_argument("--tables", required=True,
                    help="the shards' --tables: a JSON list of Table.to_dict() objects, or @FILE")
    ap.add_argument("--shards", type=int, required=True, help="how many shards serve them")
    ap.add_argument("--table", action="append", default=None, help="save only this table (repeatable)")
    ap.add_argument("--socket", default=None, help="this host's ferryd (default $FERRY_SOCKET)")
    ap.add_argument("--target", default=None, help="HOST:PORT of the shards' ferryd (default: this host)")
    ap.add_argument("--service-prefix", default="ps-shard-")
    ap.add_argument("--timeout", type=float, default=90.0,
                    help="seconds a save step may take (default 90: longer than a shard's --save-stall-s, 60 s, "
                         "so that a disk that hangs is reported IoFailed by its shard, not as a Timeout here)")
    ap.add_argument("--step-mb", type=float, default=16.0,
                    help="MiB a shard writes and syncs per request (it answers other requests meanwhile; "
                         "more: fewer requests and syncs)")
    a = ap.parse_args(argv)
    tables = _parse_tables(ap, a.tables)
    if a.shards < 1:
        ap.error("--shards must be at least 1")
    if not a.step_mb > 0:
        ap.error("--step-mb must be more than 0")
    names = {t.name for t in tables}
    for t in a.table or []:
        if t not in names:
            ap.error("--table %r: not among the tables (%s)" % (t, ", ".join(sorted(names))))
    t0 = time.monotonic()
    try:
        with Worker(tables, a.shards, a.socket, a.target, name="ferry.ps.save", timeout=a.timeout,
                    service_prefix=a.service_prefix) as w:
            rows = save_shards(w, a.name, a.table, step_bytes=max(1, int(a.step_mb * (1 << 20))))
    except (Error, ValueError) as e:
        print("ferry.ps.save: %s" % e, file=sys.stderr, flush=True)
        return 1
    print(json.dumps({"name": a.name, "tables": rows, "seconds": round(time.monotonic() - t0, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
