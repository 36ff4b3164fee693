"""Shard-side checkpoints: ``save_shards(worker, name)`` has every shard
write its own part of each table to its own host's disk, in its checkpoint
directory (``python3 -m ferry.ps.server --checkpoint-dir DIR``), where
``--restore NAME`` starts a shard from it again. Nothing of the tables
passes through the worker, so a table of any size saves in the time its
largest shard takes to write its part, and tables with ``rows=0`` (any
64-bit key), which ``save_tables`` cannot list, save too.

Each part is plain ``.npy`` files (docs/ps.md "Shard-side checkpoints"):
``TABLE.shard-K-of-N.keys.npy`` (uint64, embedding tables),
``.values.npy`` (float32, ``[rows, dim]``; a dense table's slice),
``.state.npy`` (Adagrad's accumulators) and ``.json``, written last.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ferry import _ferry

_ps = _ferry.ps

SKIP = 0xFFFFFFFF  # a shard whose part is done: not asked again
MAX_STEP_ROWS = 1 << 20  # the most rows one step may ask for (the wire's kMaxCount)


def save_shards(worker: Any, name: str, tables: Optional[Sequence[str]] = None, *,
                step_bytes: int = 16 << 20, timeout: Optional[float] = None) -> Dict[str, List[int]]:
    """Have every shard save its part of each table (all of them, or those
    named) as checkpoint ``name`` in its checkpoint directory; returns
    ``{table: [rows saved by shard 0, 1, ...]}``.

    The shards write a step of about ``step_bytes`` at a time, synced to
    disk before it is answered, all shards at once; each shard writes on a
    thread of its own, answering other requests meanwhile and copying the
    step's rows for its writer 256 KiB at a time between them. Take it
    when no pushes are in flight (on one rank, after a barrier): rows pushed
    during the save may be saved before or after the push. A name a shard
    holds already is refused (``ferry.Error``, nothing overwritten); so is
    any save on a shard started without ``--checkpoint-dir``.

    Each step is a call of ``worker``'s, bounded by its ``timeout`` (10 s
    by default); ``timeout`` here bounds the wait for each step, never
    beyond that. A disk slow to sync a step wants smaller steps
    (``step_bytes``) or a worker with a longer timeout (``python3 -m
    ferry.ps.save`` uses 90 s). A disk that hangs fails the step
    ``IoFailed`` after the shard's ``--save-stall-s``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("save_shards(): name must be a non-empty string")
    if not isinstance(step_bytes, int) or step_bytes <= 0:
        raise ValueError("save_shards(): step_bytes must be a positive integer, got %r" % (step_bytes,))
    names = list(worker._by_name) if tables is None else list(tables)
    saved: Dict[str, List[int]] = {}
    for table in names:
        spec = worker.table(table)
        step = max(1, min(MAX_STEP_ROWS, step_bytes // (4 * spec.dim + 8)))
        first = [0] * worker.shards
        rows = [0] * worker.shards
        while any(f != SKIP for f in first):
            op = worker._start("save", spec.id, name, first, step)  # attaching again first where ferryd restarted
            try:
                op.wait(timeout)
                wrote = op.saved()
            finally:
                op.release()
            for s, n in enumerate(wrote):
                if first[s] == SKIP:
                    continue
                rows[s] += n
                first[s] = SKIP if n < step else first[s] + n
        saved[table] = rows
    return saved


__all__ = ["save_shards"]
