"""The torch.distributed.rpc parameter server ferry is measured against.

Written the way PyTorch's parameter-server tutorials do it: shard processes
are RPC workers holding their part of every table in tensors, trainers call
module-level functions on them with ``rpc.rpc_async`` (TensorPipe backend),
and the shard applies the optimizer. To compare transports and not
algorithms, it does exactly what ferry.ps does around the wire: the same
placement hash (ferry.ps.shard_of), each distinct key pulled once, rows of
every shard side by side, one request per shard per operation, the same
initial values (ferry.ps.initial_values), and SGD / Adagrad in torch with the
arithmetic of torch.optim. ``RpcWorker`` has the interface of
``ferry.ps.Worker`` that ``ferry.ps.torch`` and the benchmarks use.
"""

import os
from typing import Any, List

import numpy as np
import torch
import torch.distributed.rpc as rpc

from ferry import _ferry
from ferry.ps import tables as _tables
from ferry.ps._unwaited import Unwaited

_ps = _ferry.ps

SHARD = "ps_%d"
TRAINER = "trainer_%d"


def _rpc_options(init_method, threads):
    _pin_interface(init_method)
    return rpc.TensorPipeRpcBackendOptions(num_worker_threads=threads, init_method=init_method, rpc_timeout=60)


def _pin_interface(init_method):
    """TensorPipe and gloo advertise the address of TP_SOCKET_IFNAME /
    GLOO_SOCKET_IFNAME (else the hostname's, which in a network namespace is
    no use to the peers): pin both to the interface that routes to the
    rendezvous host (lo on one host, the veth between two namespaces)."""
    import re
    import subprocess
    host = init_method.split("://", 1)[-1].rsplit(":", 1)[0]
    try:
        # The host's own address (the rendezvous shard): the interface holding it,
        # not the route to it (which is lo).
        own = subprocess.run(["ip", "-o", "addr", "show", "to", host], capture_output=True, text=True,
                             timeout=5).stdout.split()
        route = subprocess.run(["ip", "-o", "route", "get", host], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return
    m = re.search(r"\bdev (\S+)", route)
    ifname = own[1] if len(own) > 1 else (m.group(1) if m else None)
    if ifname:
        os.environ.setdefault("TP_SOCKET_IFNAME", ifname)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", ifname)


# -- the shard side (runs inside a shard process) ---------------------------

class _Table:
    def __init__(self, spec, index, shards):
        self.spec = spec
        self.adagrad = spec.optimizer == _ps.OptimizerKind.adagrad
        self.lr, self.eps = spec.lr, spec.eps
        if spec.kind == _ps.TableKind.dense:
            chunk = (spec.rows + shards - 1) // shards
            self.begin = min(index * chunk, spec.rows)
            end = min(self.begin + chunk, spec.rows)
            keys = np.arange(self.begin, end, dtype=np.int64)
            self.values = torch.from_numpy(_ps.initial_values(spec, keys).reshape(-1).copy())
        else:
            if spec.rows == 0:
                raise ValueError("the rpc baseline needs bounded tables")
            every = np.arange(spec.rows, dtype=np.int64)
            mine = every[_ps.shard_of(spec.id, every, shards) == index]
            self.local = torch.full((spec.rows,), -1, dtype=torch.int64)
            self.local[torch.from_numpy(mine)] = torch.arange(len(mine))
            self.values = torch.from_numpy(_ps.initial_values(spec, mine))
        self.accum = torch.full_like(self.values, spec.initial_accumulator) if self.adagrad else None

    def apply(self, idx, grads):
        """torch.optim's SGD / Adagrad on the rows idx (distinct)."""
        if idx is None:
            w, a = self.values, self.accum
        else:
            w = self.values[idx]
            a = self.accum[idx] if self.accum is not None else None
        if self.adagrad:
            assert a is not None
            a.addcmul_(grads, grads, value=1)
            w.addcdiv_(grads, a.sqrt().add_(self.eps), value=-self.lr)
        else:
            w.add_(grads, alpha=-self.lr)
        if idx is not None:
            self.values[idx] = w
            if self.adagrad:
                assert self.accum is not None and a is not None
                self.accum[idx] = a


_tables_here = {}


def _serve_tables(specs_dicts, index, shards):
    for t in _tables.specs([_tables.Table.from_dict(d) for d in specs_dicts]):
        _tables_here[t.id] = _Table(t, index, shards)


def _pull(table, keys):
    t = _tables_here[table]
    return t.values[t.local[keys]]


def _push(table, keys, grads):
    t = _tables_here[table]
    t.apply(t.local[keys], grads)
    return len(keys)


def _pull_dense(table):
    return _tables_here[table].values


def _push_dense(table, grads):
    _tables_here[table].apply(None, grads)
    return grads.numel()


def _assign_dense(table, values):
    t = _tables_here[table]
    t.values.copy_(values)
    if t.accum is not None:
        t.accum.fill_(t.spec.initial_accumulator)
    return values.numel()


def run_shard(tables, index, shards, trainers, init_method, threads=8, ready=None):
    """A shard process's body: serve until every trainer has called shutdown."""
    _serve_tables([t.to_dict() for t in tables], index, shards)
    rpc.init_rpc(SHARD % index, rank=index, world_size=shards + trainers,
                 rpc_backend_options=_rpc_options(init_method, threads))
    if ready:
        ready()
    rpc.shutdown()  # waits for every worker (the graceful barrier)


# -- the trainer side ---------------------------------------------------------

class _Pending:
    def __init__(self, futures, finish):
        self.futures = futures
        self.finish = finish
        self.result = None
        self.ready = False

    def done(self):
        return self.ready or all(f.done() for f in self.futures)

    def wait(self, timeout=None):
        if not self.ready:
            self.result = self.finish([f.wait() for f in self.futures])
            self.ready = True
        return self.result


class _Rows:
    __slots__ = ("op", "table", "rows", "index", "keys", "shard_rows")
    op: Any
    table: str
    rows: torch.Tensor
    index: torch.Tensor
    keys: torch.Tensor
    shard_rows: List[int]

    def gather(self):
        return self.rows[self.index]


class _DenseValues:
    __slots__ = ("values",)
    values: torch.Tensor


class RpcWorker(Unwaited):
    """ferry.ps.Worker's interface over torch.distributed.rpc."""

    def __init__(self, tables, shards, rank, init_method, threads=8, trainers=1):
        self.tables = list(tables)
        self._specs = _tables.specs(self.tables)
        self._by_name = {s.name: s for s in self._specs}
        self.shards = shards
        rpc.init_rpc(TRAINER % rank, rank=shards + rank, world_size=shards + trainers,
                     rpc_backend_options=_rpc_options(init_method, threads))
        self._unwaited = []

    def table(self, name):
        return self._by_name[name]

    def pull_async(self, table, keys):
        s = self.table(table)
        # The rows come back in process memory: keys from a GPU come over first.
        keys = torch.as_tensor(keys, dtype=torch.int64).reshape(-1).cpu()
        unique, inverse = torch.unique(keys, return_inverse=True)
        owner = torch.from_numpy(_ps.shard_of(s.id, unique.numpy(), self.shards).astype(np.int64))
        order = torch.argsort(owner, stable=True)
        grouped = unique[order]
        counts = torch.bincount(owner, minlength=self.shards)
        bounds = [0] + torch.cumsum(counts, 0).tolist()
        position = torch.empty_like(order)
        position[order] = torch.arange(len(order))
        futures, live = [], []
        for sh in range(self.shards):
            if bounds[sh + 1] > bounds[sh]:
                futures.append(rpc.rpc_async(SHARD % sh, _pull, args=(s.id, grouped[bounds[sh]:bounds[sh + 1]])))
                live.append(sh)

        def finish(parts):
            r = _Rows()
            r.op, r.table, r.keys, r.shard_rows = None, table, grouped, bounds
            r.rows = torch.cat(parts) if parts else torch.empty(0, s.dim)
            r.index = position[inverse]
            return r

        return _Pending(futures, finish)

    def pull(self, table, keys, timeout=None):
        return self.pull_async(table, keys).wait()

    def push_rows(self, rows, grads, wait=False):
        s = self.table(rows.table)
        grads = grads.detach().cpu().contiguous()  # from a GPU: a (pageable) copy to process memory
        futures = []
        for sh in range(self.shards):
            a, b = rows.shard_rows[sh], rows.shard_rows[sh + 1]
            if b > a:
                futures.append(rpc.rpc_async(SHARD % sh, _push, args=(s.id, rows.keys[a:b], grads[a:b])))
        return self._finish(_Pending(futures, lambda _: None), wait)

    def pull_dense_async(self, table):
        s = self.table(table)
        futures = [rpc.rpc_async(SHARD % sh, _pull_dense, args=(s.id,)) for sh in range(self.shards)]

        def finish(parts):
            d = _DenseValues()
            d.values = torch.cat(parts)
            return d

        return _Pending(futures, finish)

    def pull_dense(self, table, timeout=None):
        return self.pull_dense_async(table).wait().values

    def _slices(self, s):
        chunk = (s.rows + self.shards - 1) // self.shards
        return [(min(i * chunk, s.rows), min((i + 1) * chunk, s.rows)) for i in range(self.shards)]

    def push_dense(self, table, grads, wait=True):
        s = self.table(table)
        g = torch.as_tensor(grads, dtype=torch.float32).reshape(-1).cpu().contiguous()
        futures = [rpc.rpc_async(SHARD % sh, _push_dense, args=(s.id, g[a:b]))
                   for sh, (a, b) in enumerate(self._slices(s)) if b > a]
        return self._finish(_Pending(futures, lambda _: None), wait)

    def assign_dense(self, table, values, wait=True):
        s = self.table(table)
        v = torch.as_tensor(values, dtype=torch.float32).reshape(-1).contiguous()
        futures = [rpc.rpc_async(SHARD % sh, _assign_dense, args=(s.id, v[a:b]))
                   for sh, (a, b) in enumerate(self._slices(s)) if b > a]
        return self._finish(_Pending(futures, lambda _: None), wait)

    def close(self):
        self.synchronize()
        rpc.shutdown()


def worker_threads():
    """num_worker_threads for both sides (FERRY_RPC_THREADS, default 8)."""
    return int(os.environ.get("FERRY_RPC_THREADS", "8"))
