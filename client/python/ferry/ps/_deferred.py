"""Deferred module results: how a step's pulls of several tables go out
together although the model calls its embedding modules one after another.

``EmbeddingBag.forward`` (and ``Embedding.forward``) starts its pull and
returns at once a ``Deferred``: a tensor of the result's shape and dtype
that stands for the result. The first time the model uses any deferred
result (any torch function or Tensor method but its shape, dtype and
device, which it knows already), every
outstanding pull of that worker is waited for at once (one wait, one GIL
release) and each deferred result is computed, with autograd recording it
as usual; the operation then runs on the real tensors. So a model that
calls four bags and then concatenates their outputs waits for one round
trip instead of four, and its code does not change.

A deferred result is a ``torch.Tensor`` (a subclass): ``isinstance`` holds,
``type(x) is torch.Tensor`` does not. ``ferry.ps.torch.defer(False)`` (or a
module's ``defer=False``) turns it off.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, List, Optional, cast

import torch

_ENABLED = True


def set_enabled(on: bool) -> None:
    """Whether modules return deferred results (default True)."""
    global _ENABLED
    _ENABLED = bool(on)


def enabled() -> bool:
    """Whether modules return deferred results."""
    return _ENABLED


class _Group:
    """The deferred results of one worker not computed yet, oldest first."""

    def __init__(self) -> None:
        self.waiting: List["weakref.ReferenceType[Deferred]"] = []

    def flush(self, worker: Any) -> None:
        alive = [d for d in (r() for r in self.waiting) if d is not None and d._value is None]
        self.waiting = []
        if not alive:
            return
        worker.wait_all([d._pending for d in alive])  # every pull of the step, one wait
        for d in alive:
            d._compute()


_groups: "weakref.WeakKeyDictionary[Any, _Group]" = weakref.WeakKeyDictionary()

# What a deferred result answers without waiting for its pull.
_META_PROPERTIES = (torch.Tensor.shape, torch.Tensor.dtype, torch.Tensor.device, torch.Tensor.ndim,
                    torch.Tensor.is_cuda, torch.Tensor.layout)
_META_METHODS = (torch.Tensor.size, torch.Tensor.dim, torch.Tensor.numel, torch.Tensor.__len__)


def _materialize(x: Any) -> Any:
    if isinstance(x, Deferred):
        return x.value()
    if isinstance(x, (list, tuple)):
        return type(x)(_materialize(v) for v in x)
    if isinstance(x, dict):
        return {k: _materialize(v) for k, v in x.items()}
    return x


class Deferred(torch.Tensor):
    """A module's result whose pull is in flight (see the module's doc)."""

    _pending: Any
    _finish: Optional[Callable[[Any], torch.Tensor]]
    _value: Optional[torch.Tensor]
    _worker: Any
    _grad_enabled: bool

    @staticmethod
    def __new__(cls, shape: Any, dtype: torch.dtype, device: torch.device, worker: Any, pending: Any,
                finish: Callable[[Any], torch.Tensor]) -> "Deferred":
        with torch._C.DisableTorchFunction():
            shell = torch.empty(shape, dtype=dtype, device=device)
        d = cast(Deferred, torch.Tensor._make_subclass(cls, shell, False))
        d._pending, d._finish, d._value, d._worker = pending, finish, None, worker
        d._grad_enabled = torch.is_grad_enabled()
        group = _groups.get(worker)
        if group is None:
            group = _groups[worker] = _Group()
        group.waiting.append(weakref.ref(d))
        return d

    def _compute(self) -> None:
        finish, self._finish = self._finish, None
        assert finish is not None
        with torch.set_grad_enabled(self._grad_enabled):
            self._value = finish(self._pending.wait())
        self._pending = None

    def value(self) -> torch.Tensor:
        """The result (waits for this worker's outstanding pulls, all at once)."""
        if self._value is None:
            _groups[self._worker].flush(self._worker)
            if self._value is None:  # not in the group any more (a flush raised): on its own
                self._compute()
        assert self._value is not None
        return self._value

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Optional[Dict[str, Any]] = None) -> Any:
        if getattr(func, "__self__", None) in _META_PROPERTIES or func in _META_METHODS:
            with torch._C.DisableTorchFunction():  # shape, dtype, device: known without the rows
                return func(*args, **(kwargs or {}))
        args = _materialize(args)
        kwargs = _materialize(kwargs or {})
        with torch._C.DisableTorchFunction():
            return func(*args, **kwargs)
