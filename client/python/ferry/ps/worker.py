"""ferry.ps.Worker: pull rows and push gradients, synchronously or not.

A pull lands zero-copy: ``Rows.rows`` is a torch.Tensor whose storage is the
response block in the ferry arena, where every shard's answer was written.
Duplicate keys are pulled once; ``rows[index]`` are the requested keys' rows
in order (``torch.nn.functional.embedding_bag(index, rows, ...)`` does that
gather inside its kernel, so training never copies them).
"""

import numpy as np

from ferry import _ferry
from ferry.ps import tables as _tables
from ferry.ps._unwaited import Unwaited

_ps = _ferry.ps

try:
    import torch
except ImportError:  # the shard side and numpy users need no torch
    torch = None


def _flat(x, dtype):
    """x (a tensor, array or sequence) as a contiguous 1-D numpy array of
    dtype, without a copy where it already is one."""
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach()
        want = torch.int64 if dtype == np.int64 else torch.float32
        if x.dtype != want:
            x = x.to(want)
        return x.contiguous().reshape(-1).numpy()
    return np.ascontiguousarray(x, dtype=dtype).reshape(-1)


def _keys(keys):
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


def _floats(values):
    return _flat(values, np.float32)


def _view(op, count, shape):
    """The rows of a completed pull as a tensor (numpy array without torch) over its arena block."""
    if count == 0:
        return torch.empty(shape) if torch is not None else np.empty(shape, np.float32)
    if torch is not None:
        return torch.frombuffer(op, dtype=torch.float32, count=count).view(*shape)
    return np.frombuffer(op, dtype=np.float32, count=count).reshape(shape)


class Rows:
    """A completed pull. ``rows``: [u, dim] float32, zero copy (its storage is
    the response block); ``index``: [n] int64, the row of each requested key;
    ``keys``: [u] int64, the distinct keys in row order (grouped by shard)."""

    __slots__ = ("op", "table", "rows", "index", "keys")

    def __init__(self, op, table, dim):
        self.op = op
        self.table = table
        u = op.rows
        self.rows = _view(op, u * dim, (u, dim))
        idx, ks = op.index(), op.keys()
        if torch is not None:
            self.index, self.keys = torch.from_numpy(idx), torch.from_numpy(ks)
        else:
            self.index, self.keys = idx, ks

    def gather(self):
        """[n, dim]: the requested keys' rows in request order (a copy)."""
        return self.rows[self.index]


class Pending:
    """An operation in flight. ``wait()`` (or ``await``) gives its result: the
    Rows of a pull, the tensor of a dense pull, None for a push."""

    __slots__ = ("op", "_finish", "_result", "_done")

    def __init__(self, op, finish=None):
        self.op = op
        self._finish = finish
        self._done = False
        self._result = None

    def done(self):
        return self._done or self.op.done()

    def wait(self, timeout=None):
        if not self._done:
            self.op.wait(timeout)
            self._result = self._finish(self.op) if self._finish else None
            self._done = True
        return self._result

    def __await__(self):
        return self._await().__await__()

    async def _await(self):
        import asyncio
        loop = asyncio.get_running_loop()
        fd = self.op.fileno()
        while not self.done():
            if fd < 0:  # a busy-polling worker has no fd
                await asyncio.sleep(0)
                continue
            fut = loop.create_future()
            loop.add_reader(fd, lambda: fut.done() or fut.set_result(None))
            try:
                if self.done():  # done() collected completions: the fd may not fire for them
                    break
                # Bounded: another waiter on this fd may have collected ours.
                await asyncio.wait([fut], timeout=0.05)
            finally:
                loop.remove_reader(fd)
        return self.wait(0)


class Worker(Unwaited):
    """A parameter-server worker: one ferry client with an endpoint to every
    shard (``target``: the shards' ferryd HOST:PORT, None: this host)."""

    def __init__(self, tables, shards, socket=None, target=None, *, name=None, timeout=10.0, busy_poll=False,
                 service_prefix="ps-shard-", tx_bytes=0, max_ops=64):
        self.tables = list(tables)
        self._specs = _tables.specs(self.tables)
        self._by_name = {s.name: s for s in self._specs}
        self.shards = shards
        self._w = _ps.Worker(self._specs, shards, socket or "", target or "", name or "ferry ps worker", timeout,
                             busy_poll, service_prefix, tx_bytes, max_ops)
        self._unwaited = []  # pushes started with wait=False, reaped as they finish

    # -- tables
    def table(self, name):
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError("no table %r (have %s)" % (name, ", ".join(self._by_name))) from None

    def _id(self, name, dense):
        s = self.table(name)
        if (s.kind == _ps.TableKind.dense) != dense:
            raise ValueError("table %r is %s" % (name, "dense" if s.kind == _ps.TableKind.dense else "an embedding table"))
        return s.id, s

    # -- embedding tables
    def pull_async(self, table, keys):
        tid, s = self._id(table, False)
        op = self._w.pull(tid, _keys(keys))
        return Pending(op, lambda o: Rows(o, table, s.dim))

    def pull(self, table, keys, timeout=None):
        """Rows of ``keys`` (duplicates pulled once); see Rows."""
        return self.pull_async(table, keys).wait(timeout)

    def push(self, table, keys, grads, wait=True):
        """Gradients [n, dim] for ``keys`` (those of a duplicate key are summed)."""
        tid, s = self._id(table, False)
        k = _keys(keys)
        g = _floats(grads)
        if g.size != k.size * s.dim:
            raise ValueError("push to %r: %d keys need %d gradient floats, got %d" % (table, k.size, k.size * s.dim, g.size))
        return self._finish(Pending(self._w.push(tid, k, g)), wait)

    def push_rows(self, rows, grads, wait=False):
        """Gradients [u, dim] for the rows of an earlier pull, in its row order."""
        g = _floats(grads)
        return self._finish(Pending(self._w.push_rows(rows.op, g)), wait)

    def assign(self, table, keys, values, wait=True):
        """Overwrite rows (their optimizer state restarts); the last value of a duplicate wins."""
        tid, s = self._id(table, False)
        return self._finish(Pending(self._w.assign(tid, _keys(keys), _floats(values))), wait)

    # -- dense tables
    def pull_dense_async(self, table):
        tid, s = self._id(table, True)
        op = self._w.pull_dense(tid)
        return Pending(op, lambda o: _Dense(o, s.rows))

    def pull_dense(self, table, timeout=None):
        """The whole dense table, [size] float32, zero copy."""
        return self.pull_dense_async(table).wait(timeout).values

    def push_dense(self, table, grads, wait=True):
        tid, s = self._id(table, True)
        return self._finish(Pending(self._w.push_dense(tid, _floats(grads))), wait)

    def assign_dense(self, table, values, wait=True):
        tid, s = self._id(table, True)
        return self._finish(Pending(self._w.assign_dense(tid, _floats(values))), wait)

    # -- completion: _finish() and synchronize() come from Unwaited

    @property
    def live_ops(self):
        return self._w.live_ops

    def close(self):
        """Waits for operations in flight, then detaches. Refuses while pulled tensors are alive."""
        self._unwaited = []
        self._w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _Dense:
    __slots__ = ("op", "values")

    def __init__(self, op, size):
        self.op = op
        self.values = _view(op, size, (size,))
