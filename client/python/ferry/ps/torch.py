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

Prefetching: ``pending = bag.prefetch(next_input)`` starts the next batch's
pull while this one computes; pass ``rows=pending`` to ``forward``.

``DenseParameters`` keeps an ordinary module's parameters in a dense table:
``pull()`` before the forward, ``push()`` after the backward.
"""

import torch
import torch.nn.functional as F


__all__ = ["EmbeddingBag", "Embedding", "DenseParameters"]


class _PushOnBackward(torch.autograd.Function):
    """Identity on the pulled rows whose backward pushes their gradient."""

    @staticmethod
    def forward(ctx, anchor, rows_tensor, rows, module):
        ctx.rows = rows
        ctx.module = module
        return rows_tensor.view_as(rows_tensor)

    @staticmethod
    def backward(ctx, grad):
        ctx.module._push(ctx.rows, grad)
        ctx.rows = None
        return None, None, None, None


class _BagSum(torch.autograd.Function):
    """embedding_bag(mode="sum") over the pulled rows whose backward pushes
    the rows' gradient, summed in the order torch's own dense backward sums
    it (by the *keys'* sort order), so that training through the parameter
    server rounds exactly as ``torch.nn.EmbeddingBag`` does."""

    @staticmethod
    def forward(ctx, anchor, rows_tensor, rows, module, keys, index, offset2bag, index_shaped, offsets,
                include_last_offset):
        ctx.rows, ctx.module = rows, module
        ctx.save_for_backward(keys, index, offset2bag)
        ctx.num_rows = rows_tensor.shape[0]
        return F.embedding_bag(index_shaped, rows_tensor, offsets, mode="sum",
                               include_last_offset=include_last_offset)

    @staticmethod
    def backward(ctx, grad_out):
        keys, index, offset2bag = ctx.saved_tensors
        order = torch.sort(keys)[1]  # the permutation torch's embedding_bag backward sorts the indices by
        grad = torch.zeros(ctx.num_rows, grad_out.shape[1], dtype=grad_out.dtype)
        grad.index_add_(0, index[order], grad_out.contiguous()[offset2bag[order]])
        ctx.module._push(ctx.rows, grad)
        ctx.rows = None
        return (None,) * 10


def _offset2bag(input, offsets, include_last_offset):
    if input.dim() == 2:
        return torch.arange(input.shape[0]).repeat_interleave(input.shape[1])
    n = input.numel()
    starts = offsets[:-1] if include_last_offset else offsets
    o2b = torch.zeros(n + 1, dtype=torch.int64)
    o2b.index_add_(0, starts, torch.ones_like(starts))
    return (o2b.cumsum(0) - 1)[:n]


class _PulledModule(torch.nn.Module):
    def __init__(self, worker, table):
        super().__init__()
        spec = worker.table(table)
        self.worker = worker
        self.table = table
        self.embedding_dim = spec.dim
        self.num_embeddings = spec.rows
        self.last_push = None

    def prefetch(self, input):
        """Start pulling the rows ``input`` names; pass the result as ``rows=``."""
        return self.worker.pull_async(self.table, input)

    def _pulled(self, input, rows):
        # Duck-typed (any worker with ferry.ps.Worker's interface: the
        # torch.distributed.rpc baseline uses the same modules).
        if rows is None:
            rows = self.worker.pull(self.table, input)
        elif not hasattr(rows, "rows"):
            rows = rows.wait()  # a Pending from prefetch()
        if getattr(rows, "table", None) != self.table:
            raise ValueError("rows= must come from this module's prefetch()")
        if rows.index.numel() != input.numel():
            raise ValueError("the prefetched rows are for another input")
        return rows

    def _rows(self, input, rows):
        rows = self._pulled(input, rows)
        weight = rows.rows
        if torch.is_grad_enabled():
            anchor = torch.empty(0, requires_grad=True)
            weight = _PushOnBackward.apply(anchor, rows.rows, rows, self)
        return rows, weight

    def _push(self, rows, grad):
        self.last_push = self.worker.push_rows(rows, grad.contiguous(), wait=False)


class EmbeddingBag(_PulledModule):
    """``torch.nn.EmbeddingBag`` whose table lives on the parameter server.

    Same forward arguments (input 2-D [B, L], or 1-D with offsets;
    per_sample_weights with mode="sum") plus ``rows=`` (from prefetch()).
    """

    def __init__(self, worker, table, mode="mean", padding_idx=None, include_last_offset=False):
        super().__init__(worker, table)
        if mode not in ("sum", "mean", "max"):
            raise ValueError("mode must be sum, mean or max")
        self.mode = mode
        self.padding_idx = padding_idx
        self.include_last_offset = include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None, *, rows=None):
        if self.mode == "sum" and per_sample_weights is None and self.padding_idx is None:
            rows = self._pulled(input, rows)
            index = rows.index.view(input.shape)
            if not torch.is_grad_enabled():
                return F.embedding_bag(index, rows.rows, offsets, mode="sum",
                                       include_last_offset=self.include_last_offset)
            anchor = torch.empty(0, requires_grad=True)
            return _BagSum.apply(anchor, rows.rows, rows, self, input.reshape(-1), rows.index,
                                 _offset2bag(input, offsets, self.include_last_offset), index, offsets,
                                 self.include_last_offset)
        rows, weight = self._rows(input, rows)
        index = rows.index.view(input.shape)
        return F.embedding_bag(index, weight, offsets, mode=self.mode, per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset)


class Embedding(_PulledModule):
    """``torch.nn.Embedding`` whose table lives on the parameter server."""

    def forward(self, input, *, rows=None):
        rows, weight = self._rows(input, rows)
        return F.embedding(rows.index.view(input.shape), weight)


class DenseParameters:
    """The parameters of ``module`` kept in dense table ``table`` (size: their
    total numel, in ``module.parameters()`` order)."""

    def __init__(self, worker, table, module):
        self.worker = worker
        self.table = table
        self.params = [p for p in module.parameters()]
        self.size = sum(p.numel() for p in self.params)
        spec = worker.table(table)
        if spec.rows != self.size:
            raise ValueError("table %r holds %d floats; the module has %d" % (table, spec.rows, self.size))

    def flat(self, tensors):
        return torch.cat([t.reshape(-1) for t in tensors])

    def pull_async(self):
        return self.worker.pull_dense_async(self.table)

    def pull(self, pending=None):
        """Copy the server's values into the module's parameters."""
        values = (pending or self.pull_async()).wait().values
        with torch.no_grad():
            at = 0
            for p in self.params:
                p.copy_(values[at:at + p.numel()].view_as(p))
                at += p.numel()

    def push(self, wait=False):
        """Push the parameters' gradients (None is a zero gradient)."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        return self.worker.push_dense(self.table, self.flat(grads), wait=wait)

    def assign(self):
        """Overwrite the server's values with the module's (initialisation)."""
        with torch.no_grad():
            self.worker.assign_dense(self.table, self.flat([p.detach() for p in self.params]))
