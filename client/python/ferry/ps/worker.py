"""ferry.ps.Worker: pull rows and push gradients, synchronously or not.

A pull lands zero-copy: ``Rows.rows`` is a torch.Tensor whose storage is the
response block in the ferry arena, where every shard's answer was written.
Duplicate keys are pulled once; ``rows[index]`` are the requested keys' rows
in order (``torch.nn.functional.embedding_bag(index, rows, ...)`` does that
gather inside its kernel, so training never copies them).

Any number of keys: an operation too large for one message is split into
several requests (in flight together, as far as the worker's arena and
``max_calls`` allow) and is still one ``Pending`` with one result. Rows
larger than one arena block (1 MiB) land in a span of the arena (whole slabs
side by side, up to half the tx arena), larger still in process memory
(``Rows.zero_copy`` says which). Only a row larger than a message
can never be sent (``ferry.ResponseTooLarge``).
"""

from __future__ import annotations

import time
from typing import Any, List, Optional, Sequence

import numpy as np

from ferry import _ferry
from ferry._errors import Error, by_status
from ferry.ps import tables as _tables
from ferry.ps._pending import Pending, seconds_left
from ferry.ps._reattach import Reattach, refused_as_gone
from ferry.ps._unwaited import Unwaited

_ps = _ferry.ps
_BadRequest = by_status("BadRequest")  # also a ValueError

try:
    import torch
except ImportError:  # the shard side and numpy users need no torch
    torch = None  # type: ignore[assignment]

ArrayLike = Any  # a torch.Tensor, numpy array or sequence of numbers


def _flat(x: ArrayLike, dtype: Any) -> np.ndarray:
    """x (a tensor, array or sequence) as a contiguous 1-D numpy array of
    dtype, without a copy where it already is one."""
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        want = torch.int64 if dtype == np.int64 else torch.float32
        if x.dtype != want:
            x = x.to(want)
        return x.contiguous().reshape(-1).numpy()
    return np.ascontiguousarray(x, dtype=dtype).reshape(-1)


def _keys(keys: ArrayLike) -> np.ndarray:
    """keys as int64. Keys are integers: floats, bools and anything else are
    a TypeError, never truncated to a key nobody meant."""
    if torch is not None and isinstance(keys, torch.Tensor):
        if keys.dtype.is_floating_point or keys.dtype.is_complex or keys.dtype == torch.bool:
            raise TypeError("keys must be integers, got a tensor of %s" % keys.dtype)
        return _flat(keys, np.int64)
    a = np.asarray(keys)
    if a.dtype.kind not in "iu":
        if a.size != 0:
            raise TypeError("keys must be integers, got %s" % ("values of mixed types" if a.dtype.kind == "O" else a.dtype))
        a = a.astype(np.int64)  # [] and friends
    return _flat(a, np.int64)


def _floats(values: ArrayLike) -> np.ndarray:
    return _flat(values, np.float32)


def _check_state(call: str, table: str, values: np.ndarray) -> None:
    if values.size and float(values.min()) < 0:
        raise _BadRequest("%s to %r: Adagrad's state is a sum of squares, never negative" % (call, table))


def _view(op: Any, count: int, shape: tuple) -> Any:
    """The rows of a completed pull as a tensor (numpy array without torch) over its memory."""
    if count == 0:
        return torch.empty(shape) if torch is not None else np.empty(shape, np.float32)
    if torch is not None:
        return torch.frombuffer(op, dtype=torch.float32, count=count).view(*shape)
    return np.frombuffer(op, dtype=np.float32, count=count).reshape(shape)


class Rows:
    """A completed pull. ``rows``: [u, dim] float32 (zero copy: its storage is
    the response block or span in the arena; process memory for rows past
    half the arena);
    ``index``: [n] int64, the row of each requested key; ``keys``: [u] int64,
    the distinct keys in row order (grouped by shard)."""

    __slots__ = ("op", "table", "rows", "index", "_keys", "device_rows", "device_index", "fence")

    def __init__(self, op: Any, table: str, dim: int) -> None:
        self.op = op
        self.table = table
        u = op.rows
        self.rows = _view(op, u * dim, (u, dim))
        idx = op.index()
        self.index = torch.from_numpy(idx) if torch is not None else idx
        self._keys: Any = None  # read from the operation when first asked for: training rarely does
        self.device_rows: Any = None  # a GPU worker's copy of rows (ferry.ps._cuda)
        self.device_index: Any = None
        self.fence: Any = None

    @property
    def keys(self) -> Any:
        """[u] int64: the distinct keys in row order (grouped by shard)."""
        if self._keys is None:
            ks = self.op.keys()
            self._keys = torch.from_numpy(ks) if torch is not None else ks
        return self._keys

    @keys.setter
    def keys(self, value: Any) -> None:
        self._keys = value

    @property
    def zero_copy(self) -> bool:
        """Whether ``rows`` is the response block in the arena (else a copy in process memory)."""
        return bool(self.op.rows == 0 or self.op.zero_copy)

    def gather(self) -> Any:
        """[n, dim]: the requested keys' rows in request order (a copy)."""
        return self.rows[self.index]

    def __repr__(self) -> str:
        return "<ferry.ps.Rows of %r: %d keys, %d rows x %d%s>" % (
            self.table, len(self.index), self.rows.shape[0], self.rows.shape[1],
            ", zero copy" if self.zero_copy else ", in process memory")


class DenseValues:
    """A completed dense pull: ``values``, [size] float32 over its memory."""

    __slots__ = ("op", "values")

    def __init__(self, op: Any, size: int) -> None:
        self.op = op
        self.values = _view(op, size, (size,))

    def __repr__(self) -> str:
        return "<ferry.ps.DenseValues: %d floats>" % self.values.shape[0]


class Worker(Reattach, Unwaited):
    """A parameter-server worker: one ferry client with an endpoint to every
    shard.

    tables: the tables (the shards' own list); shards: how many; socket: this
    host's ferryd (default ``$FERRY_SOCKET``); target: the shards' ferryd
    ``HOST:PORT`` (None: this host); timeout: seconds an operation may go
    without progress; busy_poll: spin instead of sleeping on completions;
    service_prefix: shard i serves ``PREFIX<i>``; tx_bytes: the arena (0: the
    daemon's default); max_ops: operations in flight or holding rows at once;
    max_count: keys per request, at most the shards' own (None: the shard
    server's default for these tables); max_calls: requests in flight at
    once; device: ``"cuda"`` (or a CUDA torch.device) to receive rows on that
    GPU and take gradients from it (``ferry.ps.torch`` modules do this when
    their input is on a GPU); shard_targets: each shard's ``SERVICE`` or
    ``HOST:PORT/SERVICE`` when they are not all behind ``target``
    (``from_env()`` fills it from the store).

    When this host's ferryd restarts, the pushes and assigns in flight fail
    ``ferry.DaemonGone`` and the pulls in flight are issued again once it is
    back; the next operation attaches to it again and opens the shards
    again, and this worker goes on (``reattached`` counts the times; see
    ferry/ps/_reattach.py).
    """

    def __init__(self, tables: Sequence[_tables.Table], shards: int, socket: Optional[str] = None,
                 target: Optional[str] = None, *, name: Optional[str] = None, timeout: float = 10.0,
                 busy_poll: bool = False, service_prefix: str = "ps-shard-", tx_bytes: int = 0, max_ops: int = 64,
                 max_count: Optional[int] = None, max_calls: int = 256, device: Any = None,
                 shard_targets: Optional[Sequence[str]] = None) -> None:
        self.tables = _tables.table_list(tables)
        self._specs = _tables.specs(self.tables)
        self._by_name = {s.name: s for s in self._specs}
        self.shards = shards
        args = (self._specs, shards, socket or "", target or "", name or "ferry ps worker", timeout, busy_poll,
                service_prefix, tx_bytes, max_ops, max_count or 0, max_calls, list(shard_targets or []))
        self._timeout = timeout
        self._w = _ps.Worker(*args)
        self._reattach_init(lambda: _ps.Worker(*args))  # after this host's ferryd restarted (_reattach.py)
        self._unwaited: List[Pending] = []  # pushes started with wait=False, reaped as they finish
        self.device: Any = None
        self._cuda: Any = None
        if device is not None:
            self.to(device)

    # -- tables
    def table(self, name: str) -> Any:
        """The C++ spec (ferry._ferry.ps.TableSpec) of table ``name``; KeyError naming the tables there are."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError("no table %r (have %s)" % (name, ", ".join(self._by_name))) from None

    def _id(self, name: str, dense: bool) -> Any:
        s = self.table(name)
        if (s.kind == _ps.TableKind.dense) != dense:
            raise ValueError("table %r is %s" % (name, "dense" if s.kind == _ps.TableKind.dense else "an embedding table"))
        return s.id, s

    # -- devices
    def to(self, device: Any) -> "Worker":
        """Deliver pulled rows to ``device`` (a CUDA device: the arena is registered with CUDA once, here)."""
        from ferry.ps import _cuda
        self._cuda = _cuda.attach(self, device)
        self.device = self._cuda.device if self._cuda is not None else None
        return self

    def _attached_again(self) -> None:
        # The new attachment's arena is registered with CUDA in place of the old one's.
        if self._cuda is not None:
            old, self._cuda = self._cuda, None
            old.close()
            self.to(old.device)

    # -- embedding tables
    def pull_async(self, table: str, keys: ArrayLike) -> Pending:
        """Start pulling the rows of ``keys``; ``wait()`` gives Rows. Leave
        ``keys`` as they are until then: a pull in flight when ferryd
        restarts is issued again, with them, once ferryd is back."""
        tid, s = self._id(table, False)
        k = _keys(keys)
        return Pending(self._start("pull", tid, k), lambda o: self._rows(o, table, s.dim),
                       (self, "pull", tid, k))

    def _rows(self, op: Any, table: str, dim: int) -> Rows:
        r = Rows(op, table, dim)
        if self._cuda is not None:
            self._cuda.deliver(r)
        return r

    def pull(self, table: str, keys: ArrayLike, timeout: Optional[float] = None) -> Rows:
        """Rows of ``keys`` (duplicates pulled once); see Rows."""
        return self.pull_async(table, keys).wait(timeout)

    def pull_many(self, requests: Sequence[tuple], timeout: Optional[float] = None) -> List[Rows]:
        """Pulls of several tables at once, ``[(table, keys), ...]``: every
        request goes out before any is waited for, and one wait (one GIL
        release) collects them all. Returns their Rows in order."""
        pending = [self.pull_async(t, k) for t, k in requests]
        self.wait_all(pending, timeout)
        return [p.wait(0) for p in pending]

    def wait_all(self, pending: Sequence[Pending], timeout: Optional[float] = None) -> None:
        """Wait for every one of ``pending`` with one GIL release; raises the first failure."""
        ops = [p.op for p in pending if not p._done]
        if ops:
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                self._w.wait_all(ops, timeout)
            except Error as e:
                if e.status != "DaemonGone" or not any(p._failed_daemon_gone() for p in pending):
                    raise
                for p in pending:  # ferryd went away: each its own outcome, the reads issued again
                    p.wait(seconds_left(deadline))
                return
        for p in pending:
            if not p._done:
                p._settle()

    def push(self, table: str, keys: ArrayLike, grads: ArrayLike, wait: bool = True) -> Optional[Pending]:
        """Gradients [n, dim] for ``keys`` (those of a duplicate key are summed)."""
        tid, s = self._id(table, False)
        k = _keys(keys)
        g = _floats(grads)
        if g.size != k.size * s.dim:
            raise _BadRequest("push to %r: %d keys need %d gradient floats, got %d" % (table, k.size, k.size * s.dim, g.size))
        return self._finish(Pending(self._start("push", tid, k, g)), wait)

    def push_rows(self, rows: Rows, grads: ArrayLike, wait: bool = False) -> Optional[Pending]:
        """Gradients [u, dim] for the rows of an earlier pull, in its row order
        (a CUDA tensor goes from the GPU straight into the request buffers)."""
        w = self._w
        if not w.owns(rows.op) or w.daemon_gone:
            # Pulled before this worker's ferryd restarted: the same gradient as a push of the rows' keys.
            return self.push(rows.table, rows.keys, grads, wait)
        try:
            if self._cuda is not None and torch is not None and isinstance(grads, torch.Tensor) and grads.is_cuda:
                op = self._cuda.push_rows(rows, grads)
            else:
                op = w.push_rows(rows.op, _floats(grads))
        except Error as e:
            if not refused_as_gone(e, w):
                raise
            return self.push(rows.table, rows.keys, grads, wait)  # ferryd went just now: nothing of it left
        return self._finish(Pending(op), wait)

    def assign(self, table: str, keys: ArrayLike, values: ArrayLike, wait: bool = True) -> Optional[Pending]:
        """Overwrite rows (their optimizer state restarts); the last value of a duplicate wins."""
        tid, s = self._id(table, False)
        k = _keys(keys)
        v = _floats(values)
        if v.size != k.size * s.dim:
            raise _BadRequest("assign to %r: %d keys need %d floats, got %d" % (table, k.size, k.size * s.dim, v.size))
        return self._finish(Pending(self._start("assign", tid, k, v)), wait)

    # -- optimizer state (checkpoints)
    def pull_state(self, table: str, keys: ArrayLike, timeout: Optional[float] = None) -> Rows:
        """The optimizer state of ``keys``' rows (Adagrad's accumulators, named
        ``sum`` in torch.optim.Adagrad's state), as ``pull`` gives values: a
        key never pushed has the initial state. BadRequest for a table whose
        optimizer keeps none (SGD)."""
        return self.pull_state_async(table, keys).wait(timeout)

    def pull_state_async(self, table: str, keys: ArrayLike) -> Pending:
        """Start pulling the optimizer state of ``keys``' rows; ``wait()`` gives Rows (on the CPU)."""
        tid, s = self._id(table, False)
        k = _keys(keys)
        return Pending(self._start("pull_state", tid, k), lambda o: Rows(o, table, s.dim),
                       (self, "pull_state", tid, k))

    def assign_state(self, table: str, keys: ArrayLike, values: ArrayLike, wait: bool = True) -> Optional[Pending]:
        """Set the optimizer state of rows [n, dim] (their values stay; an
        ``assign`` of values restarts the state, so assign values first)."""
        tid, s = self._id(table, False)
        k = _keys(keys)
        v = _floats(values)
        if v.size != k.size * s.dim:
            raise _BadRequest("assign_state to %r: %d keys need %d floats, got %d"
                              % (table, k.size, k.size * s.dim, v.size))
        _check_state("assign_state", table, v)
        return self._finish(Pending(self._start("assign_state", tid, k, v)), wait)

    # -- dense tables
    def pull_dense_async(self, table: str) -> Pending:
        """Start pulling a whole dense table; ``wait()`` gives DenseValues."""
        tid, s = self._id(table, True)
        return Pending(self._start("pull_dense", tid), lambda o: DenseValues(o, s.rows),
                       (self, "pull_dense", tid))

    def pull_dense(self, table: str, timeout: Optional[float] = None) -> Any:
        """The whole dense table, [size] float32, zero copy."""
        return self.pull_dense_async(table).wait(timeout).values

    def push_dense(self, table: str, grads: ArrayLike, wait: bool = True) -> Optional[Pending]:
        """A gradient for the whole dense table ([size] floats)."""
        tid, s = self._id(table, True)
        g = _floats(grads)
        if g.size != s.rows:
            raise _BadRequest("push_dense to %r: it holds %d floats, got %d" % (table, s.rows, g.size))
        return self._finish(Pending(self._start("push_dense", tid, g)), wait)

    def assign_dense(self, table: str, values: ArrayLike, wait: bool = True) -> Optional[Pending]:
        """Overwrite the whole dense table ([size] floats; its optimizer state restarts)."""
        tid, s = self._id(table, True)
        v = _floats(values)
        if v.size != s.rows:
            raise _BadRequest("assign_dense to %r: it holds %d floats, got %d" % (table, s.rows, v.size))
        return self._finish(Pending(self._start("assign_dense", tid, v)), wait)

    def pull_dense_state(self, table: str, timeout: Optional[float] = None) -> Any:
        """The optimizer state of a whole dense table (Adagrad's accumulators),
        [size] float32, as ``pull_dense`` gives values. BadRequest for SGD."""
        tid, s = self._id(table, True)
        return Pending(self._start("pull_dense_state", tid), lambda o: DenseValues(o, s.rows),
                       (self, "pull_dense_state", tid)).wait(timeout).values

    def assign_dense_state(self, table: str, values: ArrayLike, wait: bool = True) -> Optional[Pending]:
        """Set the optimizer state of a whole dense table ([size] floats, never
        negative; its values stay: assign them first, which restarts it)."""
        tid, s = self._id(table, True)
        v = _floats(values)
        if v.size != s.rows:
            raise _BadRequest("assign_dense_state to %r: it holds %d floats, got %d" % (table, s.rows, v.size))
        _check_state("assign_dense_state", table, v)
        return self._finish(Pending(self._start("assign_dense_state", tid, v)), wait)

    # -- completion: _finish() and synchronize() come from Unwaited

    @property
    def live_ops(self) -> int:
        """Operations holding memory (in flight, or pulls whose rows are alive)."""
        return int(self._w.live_ops)

    @property
    def max_count(self) -> int:
        """Keys (dense: elements) per request; larger operations are split."""
        return int(self._w.max_count)

    def close(self) -> None:
        """Waits for operations in flight, then detaches. Refuses while pulled tensors are alive."""
        self._unwaited = []
        if self._cuda is not None:
            self._cuda.close()
            self._cuda = None
        self._w.close()

    def __repr__(self) -> str:
        try:
            state = "%d live ops" % self.live_ops
        except Exception:  # ferry.Closed
            state = "closed"
        return "<ferry.ps.Worker of %s over %d shard%s: %s>" % (
            ", ".join(repr(t.name) for t in self.tables), self.shards, "" if self.shards == 1 else "s", state)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_env(cls, tables: Sequence[_tables.Table], **options: Any) -> "Worker":
        """A worker for the process a launcher started (torchrun: ``RANK``,
        ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``): it finds its shards
        in torch.distributed's key-value store, where ``python3 -m
        ferry.ps.server --store HOST:PORT`` published them. See ferry.ps.store."""
        from ferry.ps import store
        return store.worker_from_env(cls, tables, **options)


# The module's own name for what wait() of a dense pull gives (kept for older code).
_Dense = DenseValues

__all__ = ["Worker", "Rows", "Pending", "DenseValues"]
