"""PyTorch modules over ferry.ps: a model switches to the parameter server by
changing one line::

    bag = torch.nn.EmbeddingBag(rows, dim, mode="sum")           # before
    bag = ferry.ps.torch.EmbeddingBag(worker, "emb", mode="sum")  # after

``forward`` pulls the rows its input names (each distinct key once, zero copy
into the ferry arena) and ``backward`` pushes their gradients (summed per key,
one request per shard), which the shards apply with the table's optimizer. So
the module has no local parameters and no optimizer step: call
``worker.synchronize()`` where the next pull must see this step's update
(synchronous training), or let pushes overlap the next step (asynchronous).

A step's pulls go out together: ``forward`` returns a deferred result (see
ferry.ps._deferred) that is computed when the model first uses it, after
every table's pull of the step was sent. ``EmbeddingBagCollection`` looks
several tables up in one call, for scripts that can change.

GPUs: an input on a CUDA device makes the worker register its arena with
CUDA (once), copy the rows to that device from the pinned arena without
blocking, and copy the gradients from the device straight into the push's
requests; the result is on the input's device.

Prefetching: ``pending = bag.prefetch(next_input)`` starts the next batch's
pull while this one computes; pass ``rows=pending`` to ``forward``.

Checkpoints: a module's ``state_dict()`` holds its table as ``weight``,
[rows, dim] on the CPU, pulled from the shards, as ``torch.nn.EmbeddingBag``
and ``torch.nn.Embedding`` hold theirs; ``load_state_dict()`` assigns it to
the shards (the rows' optimizer state restarts). So a checkpoint moves
between local tables and ferry.ps ones either way. ``checkpoint=False``
leaves a table out (one too large to pull into one process: a table larger
than ``checkpoint_limit`` bytes, by default half the machine's memory, is
refused with an error rather than pulled); a table without a row count
(rows=0) is left out with a warning: its keys cannot be listed. The
shards' optimizer state (Adagrad's accumulators) is checkpointed apart, as
a torch optimizer's is: ``optimizer_state_dict(model)`` and
``load_optimizer_state_dict(model, state)``.

``DenseParameters`` keeps an ordinary module's parameters in a dense table:
``pull()`` before the forward, ``push()`` after the backward.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    raise ImportError("ferry.ps.torch needs PyTorch (torch), which this Python lacks") from e

from ferry import _ferry
from ferry.ps import _deferred
from ferry.ps._checkpoint import _Checkpointed, checkpoint_limit, load_optimizer_state_dict, optimizer_state_dict

__all__ = ["EmbeddingBag", "Embedding", "EmbeddingBagCollection", "DenseParameters", "defer", "checkpoint_limit",
           "optimizer_state_dict", "load_optimizer_state_dict"]

def defer(on: bool = True) -> None:
    """Whether the modules return deferred results (their pulls go out together; default on)."""
    _deferred.set_enabled(on)


class _PushOnBackward(torch.autograd.Function):
    """Identity on the pulled rows whose backward pushes their gradient."""

    @staticmethod
    def forward(ctx: Any, anchor: Any, rows_tensor: Any, rows: Any, module: Any) -> Any:  # type: ignore[override]
        ctx.rows = rows
        ctx.module = module
        return rows_tensor.view_as(rows_tensor)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:  # type: ignore[override]
        ctx.module._push(ctx.rows, grad)
        ctx.rows = None
        return None, None, None, None


class _BagSum(torch.autograd.Function):
    """embedding_bag(mode="sum") over the pulled rows whose backward pushes
    the rows' gradient, summed in the order torch's own dense backward sums
    it (by the *keys'* sort order), so that training through the parameter
    server rounds exactly as ``torch.nn.EmbeddingBag`` does."""

    @staticmethod
    def forward(ctx: Any, anchor: Any, rows_tensor: Any, rows: Any, module: Any, keys: Any, index: Any,  # type: ignore[override]
                starts: Any, per_bag: int, index_shaped: Any, offsets: Any, include_last_offset: bool) -> Any:
        # The bags: starting at `starts` (1-D input), else every `per_bag` positions.
        ctx.rows, ctx.module, ctx.per_bag = rows, module, per_bag
        ctx.save_for_backward(keys, index, starts)
        ctx.num_rows = rows_tensor.shape[0]
        return F.embedding_bag(index_shaped, rows_tensor, offsets, mode="sum",
                               include_last_offset=include_last_offset)

    @staticmethod
    def backward(ctx: Any, grad_out: Any) -> Any:  # type: ignore[override]
        keys, index, starts = ctx.saved_tensors
        order = torch.sort(keys)[1]  # the permutation torch's embedding_bag backward sorts the indices by
        if grad_out.device.type == "cpu" and grad_out.dtype == torch.float32:
            # One pass in C++ (ferry._ferry.ps.bag_grad): the same additions in the same order.
            grad = torch.from_numpy(_ferry.ps.bag_grad(order.numpy(), index.numpy(), starts.numpy(), ctx.per_bag,
                                                       grad_out.contiguous().numpy(), ctx.num_rows))
        else:
            bag = _bag_of(keys.numel(), starts, ctx.per_bag)
            grad = torch.zeros(ctx.num_rows, grad_out.shape[1], dtype=grad_out.dtype, device=grad_out.device)
            _sum_into(grad, index[order], grad_out.contiguous()[bag[order]])
        ctx.module._push(ctx.rows, grad)
        ctx.rows = None
        return (None,) * 11


def _sum_into(out: Any, rows: Any, values: Any) -> None:
    """out[rows[i]] += values[i] for i in order: the same sums, rounded the
    same, as ``out.index_add_(0, rows, values)``. On one CPU thread,
    ``index_put_(accumulate=True)`` adds in that order too, in one kernel
    instead of one small add per key (several times faster); with more
    threads it may add in another order, so index_add_ does it there."""
    if out.device.type == "cpu" and torch.get_num_threads() == 1:
        out.index_put_((rows,), values, accumulate=True)
    else:
        out.index_add_(0, rows, values)


def _starts(input: Any, offsets: Any, include_last_offset: bool) -> Any:
    """Where the bags start (1-D input), and the bag length (2-D input; else 0)."""
    if input.dim() == 2:
        return torch.empty(0, dtype=torch.int64, device=input.device), int(input.shape[1])
    return (offsets[:-1] if include_last_offset else offsets).to(torch.int64), 0


def _bag_of(n: int, starts: Any, per_bag: int) -> Any:
    """The bag of each of n positions: the last bag starting at or before it."""
    if starts.numel() == 0:
        return torch.arange(n, device=starts.device) // max(per_bag, 1)
    o2b = torch.zeros(n + 1, dtype=torch.int64, device=starts.device)
    o2b.index_add_(0, starts.clamp(max=n), torch.ones_like(starts))
    return (o2b.cumsum(0) - 1)[:n]


def _check_bag_input(input: Any, offsets: Any) -> None:
    """What torch.nn.EmbeddingBag refuses about input and offsets, refused the same way before the pull."""
    if input.dim() not in (1, 2):
        raise ValueError("input has to be 1D or 2D Tensor, but got Tensor of dimension %d" % input.dim())
    if input.dim() == 2 and offsets is not None:
        raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                         "fixed length sequences. However, found offsets of type %s" % type(offsets).__name__)
    if input.dim() == 1 and (offsets is None or offsets.dim() != 1):
        raise ValueError("offsets has to be a 1D Tensor but got %s" % (
            "None" if offsets is None else "Tensor of dimension %d" % offsets.dim()))


def _bags(input: Any, offsets: Any, include_last_offset: bool) -> int:
    if input.dim() == 2:
        return int(input.shape[0])
    return int(offsets.numel()) - (1 if include_last_offset else 0)


class _PulledModule(_Checkpointed, torch.nn.Module):
    def __init__(self, worker: Any, table: str, defer: Optional[bool] = None, checkpoint: bool = True) -> None:
        super().__init__()
        spec = worker.table(table)
        if getattr(spec, "kind", None) == _ferry.ps.TableKind.dense:
            raise ValueError("table %r is dense: its parameters go in ferry.ps.torch.DenseParameters; "
                             "EmbeddingBag and Embedding look rows up in an embedding table" % table)
        self.worker = worker
        self.table = table
        self.embedding_dim = spec.dim
        self.num_embeddings = spec.rows
        self.defer = defer
        self.checkpoint = checkpoint
        self.last_push: Any = None

    def prefetch(self, input: Any) -> Any:
        """Start pulling the rows ``input`` names; pass the result as ``rows=``."""
        self._device(input)
        return self.worker.pull_async(self.table, input)

    def _device(self, input: Any) -> None:
        # An input on a GPU puts the worker there (its arena registered once).
        if getattr(input, "is_cuda", False) and getattr(self.worker, "device", None) is None and \
                hasattr(self.worker, "to"):
            self.worker.to(input.device)

    def _check(self, input: Any, rows: Any) -> Any:
        # Duck-typed (any worker with ferry.ps.Worker's interface: the
        # torch.distributed.rpc baseline uses the same modules).
        if not hasattr(rows, "rows"):
            rows = rows.wait()  # a Pending from prefetch()
        if getattr(rows, "table", None) != self.table:
            raise ValueError("rows= must come from this module's prefetch()")
        if rows.index.numel() != input.numel():
            raise ValueError("the prefetched rows are for another input")
        return rows

    def _start(self, input: Any, rows: Any, shape: Sequence[int], finish: Any) -> Any:
        """The result: deferred while its pull is in flight, else computed now."""
        self._device(input)
        deferring = self.defer if self.defer is not None else _deferred.enabled()
        if rows is None and deferring and hasattr(self.worker, "wait_all"):
            pending = self.worker.pull_async(self.table, input)
            return _deferred.Deferred(tuple(shape), torch.float32, input.device, self.worker, pending,
                                      lambda r: finish(self._check(input, r)))
        if rows is None:
            rows = self.worker.pull(self.table, input)
        return finish(self._check(input, rows))

    @staticmethod
    def _weights(rows: Any, device: Any) -> Any:
        if getattr(rows, "device_rows", None) is not None:
            return rows.device_rows, rows.device_index
        if device.type != "cpu":  # a worker that delivers to the CPU only (the rpc baseline): copy them over
            return rows.rows.to(device), rows.index.to(device)
        return rows.rows, rows.index

    def _rows(self, rows: Any, device: Any) -> Any:
        weight, index = self._weights(rows, device)
        if torch.is_grad_enabled():
            anchor = torch.empty(0, requires_grad=True)
            weight = _PushOnBackward.apply(anchor, weight, rows, self)
        return weight, index

    def _push(self, rows: Any, grad: Any) -> None:
        if grad.is_cuda and getattr(self.worker, "device", None) is None:
            grad = grad.cpu()  # a worker without a device takes gradients in process memory
        self.last_push = self.worker.push_rows(rows, grad.contiguous(), wait=False)


class EmbeddingBag(_PulledModule):
    """``torch.nn.EmbeddingBag`` whose table lives on the parameter server.

    Same forward arguments (input 2-D [B, L], or 1-D with offsets;
    per_sample_weights with mode="sum") plus ``rows=`` (from prefetch()).
    defer: return deferred results (None: the ``ferry.ps.torch.defer()`` setting).
    checkpoint: the table is the ``weight`` of ``state_dict()`` (see the module's doc).
    """

    def __init__(self, worker: Any, table: str, mode: str = "mean", padding_idx: Optional[int] = None,
                 include_last_offset: bool = False, defer: Optional[bool] = None, checkpoint: bool = True) -> None:
        super().__init__(worker, table, defer, checkpoint)
        if mode not in ("sum", "mean", "max"):
            raise ValueError("mode must be sum, mean or max")
        self.mode = mode
        self.padding_idx = padding_idx
        self.include_last_offset = include_last_offset

    def forward(self, input: Any, offsets: Any = None, per_sample_weights: Any = None, *, rows: Any = None) -> Any:
        """The bags' reductions, [bags, dim] (deferred: see the module's doc)."""
        _check_bag_input(input, offsets)
        shape = (_bags(input, offsets, self.include_last_offset), self.embedding_dim)
        return self._start(input, rows, shape, lambda r: self._compute(input, offsets, per_sample_weights, r))

    def _compute(self, input: Any, offsets: Any, per_sample_weights: Any, rows: Any) -> Any:
        if self.mode == "sum" and per_sample_weights is None and self.padding_idx is None:
            weight, index = self._weights(rows, input.device)
            shaped = index.view(input.shape)
            if not torch.is_grad_enabled():
                return F.embedding_bag(shaped, weight, offsets, mode="sum", include_last_offset=self.include_last_offset)
            anchor = torch.empty(0, requires_grad=True)
            keys = input.reshape(-1)
            starts, per_bag = _starts(input, offsets, self.include_last_offset)
            return _BagSum.apply(anchor, weight, rows, self, keys, index, starts, per_bag, shaped, offsets,
                                 self.include_last_offset)
        weight, index = self._rows(rows, input.device)
        return F.embedding_bag(index.view(input.shape), weight, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights, include_last_offset=self.include_last_offset)


class Embedding(_PulledModule):
    """``torch.nn.Embedding`` whose table lives on the parameter server
    (the constructor's arguments: EmbeddingBag's worker, table, defer, checkpoint)."""

    def forward(self, input: Any, *, rows: Any = None) -> Any:
        """The rows of ``input``'s keys, input.shape + [dim] (deferred: see the module's doc)."""
        shape = tuple(input.shape) + (self.embedding_dim,)
        return self._start(input, rows, shape, lambda r: self._compute(input, r))

    def _compute(self, input: Any, rows: Any) -> Any:
        weight, index = self._rows(rows, input.device)
        return F.embedding(index.view(input.shape), weight)


class EmbeddingBagCollection(torch.nn.Module):
    """Several tables looked up in one call (torchrec's EmbeddingBagCollection,
    in the simplest form): ``forward(inputs, offsets=None)`` takes one input
    (and offsets) per table and returns their bags, each [bags, dim]. Every
    table's pull goes out before any is waited for, and one wait collects them.
    """

    def __init__(self, worker: Any, tables: Sequence[str], mode: str = "sum",
                 include_last_offset: bool = False, checkpoint: bool = True) -> None:
        super().__init__()
        self.worker = worker
        self.bags = torch.nn.ModuleList([EmbeddingBag(worker, t, mode=mode, include_last_offset=include_last_offset,
                                                      defer=False, checkpoint=checkpoint) for t in tables])

    @property
    def tables(self) -> List[str]:
        """The tables, in the order forward takes their inputs."""
        return [b.table for b in self.bags]

    def forward(self, inputs: Sequence[Any], offsets: Optional[Sequence[Any]] = None) -> List[Any]:
        """[bags, dim] per table, in order."""
        if len(inputs) != len(self.bags):
            raise ValueError("%d inputs for %d tables" % (len(inputs), len(self.bags)))
        offs = list(offsets) if offsets is not None else [None] * len(inputs)
        for b, i in zip(self.bags, inputs):
            b._device(i)
        pulled = self.worker.pull_many([(b.table, i) for b, i in zip(self.bags, inputs)])
        return [b(i, o, rows=r) for b, i, o, r in zip(self.bags, inputs, offs, pulled)]


class DenseParameters:
    """The parameters of ``module`` kept in dense table ``table`` (size: their
    total numel, in ``module.parameters()`` order)."""

    def __init__(self, worker: Any, table: str, module: torch.nn.Module) -> None:
        self.worker = worker
        self.table = table
        self.params = [p for p in module.parameters()]
        self.size = sum(p.numel() for p in self.params)
        spec = worker.table(table)
        if getattr(spec, "kind", None) == _ferry.ps.TableKind.embedding:
            raise ValueError("table %r is an embedding table: DenseParameters keeps a module's parameters in a "
                             "dense one (ferry.ps.Dense)" % table)
        if spec.rows != self.size:
            raise ValueError("table %r holds %d floats; the module has %d" % (table, spec.rows, self.size))

    def flat(self, tensors: Sequence[Any]) -> Any:
        """The tensors flattened and concatenated (on the CPU)."""
        return torch.cat([t.reshape(-1).cpu() for t in tensors])

    def pull_async(self) -> Any:
        """Start pulling the table; pass the result to pull()."""
        return self.worker.pull_dense_async(self.table)

    def pull(self, pending: Any = None) -> None:
        """Copy the server's values into the module's parameters."""
        values = (pending or self.pull_async()).wait().values
        with torch.no_grad():
            at = 0
            for p in self.params:
                p.copy_(values[at:at + p.numel()].view_as(p))
                at += p.numel()

    def push(self, wait: bool = False) -> Any:
        """Push the parameters' gradients (None is a zero gradient)."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        return self.worker.push_dense(self.table, self.flat(grads), wait=wait)

    def assign(self) -> None:
        """Overwrite the server's values with the module's (initialisation)."""
        with torch.no_grad():
            self.worker.assign_dense(self.table, self.flat([p.detach() for p in self.params]))
