"""Checkpoints of ferry.ps.torch's modules (see that module's doc): the
table as the module's ``weight`` in ``state_dict()``, and the shards'
optimizer state apart, as a torch optimizer's is."""

from __future__ import annotations

import os
import warnings
from typing import Any, Dict, List, Optional

import torch

from ferry import _ferry

_checkpoint_limit: Optional[int] = None


def checkpoint_limit(limit: Optional[int] = -1) -> int:
    """The largest table in bytes that ``state_dict()`` pulls into this
    process; a larger one is an error (give its module checkpoint=False).
    ``checkpoint_limit(n)`` sets it, ``checkpoint_limit(None)`` restores the
    default (half the machine's physical memory); returns the limit in effect."""
    global _checkpoint_limit
    if limit is None or (isinstance(limit, int) and limit >= 0):
        _checkpoint_limit = limit
    elif limit != -1:
        raise ValueError("checkpoint_limit wants a byte count >= 0 or None")
    if _checkpoint_limit is not None:
        return _checkpoint_limit
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError):
        return 1 << 62


class _Checkpointed:
    """The checkpoint half of a module over one table (mixed into
    torch.nn.Module subclasses that set worker, table, num_embeddings,
    embedding_dim and checkpoint)."""

    worker: Any
    table: str
    num_embeddings: int
    embedding_dim: int
    checkpoint: bool

    def _listable(self) -> None:
        if self.num_embeddings == 0:
            raise ValueError("table %r has no row count (rows=0: any 64-bit key), so its rows cannot be listed"
                             % self.table)

    def _whole(self, pull: Any) -> Any:
        self._listable()
        size, limit = self.num_embeddings * self.embedding_dim * 4, checkpoint_limit()
        if size > limit:
            raise ValueError("table %r is %d bytes, more than ferry.ps.torch.checkpoint_limit() (%d) lets one process "
                             "pull: give its module checkpoint=False and save it with ferry.ps.save_tables (streamed a "
                             "chunk at a time), or raise the limit" % (self.table, size, limit))
        rows = pull(self.table, torch.arange(self.num_embeddings, dtype=torch.int64))
        whole = rows.gather()  # a copy: the response blocks go back with rows
        del rows
        return whole

    def _checked(self, t: Any, what: str) -> Any:
        self._listable()
        t = torch.as_tensor(t).detach()
        if tuple(t.shape) != (self.num_embeddings, self.embedding_dim):
            raise ValueError("table %r is [%d, %d]; the %s given is %s"
                             % (self.table, self.num_embeddings, self.embedding_dim, what, list(t.shape)))
        return t.to(device="cpu", dtype=torch.float32).contiguous()

    def pull_weight(self) -> Any:
        """The whole table, [rows, dim] float32 on the CPU: a copy, pulled from
        the shards (ValueError past ``checkpoint_limit()`` bytes)."""
        return self._whole(self.worker.pull)

    def assign_weight(self, weight: Any) -> None:
        """Overwrite the whole table with ``weight``, [rows, dim] (the rows' optimizer state restarts)."""
        w = self._checked(weight, "weight")
        self.worker.assign(self.table, torch.arange(self.num_embeddings, dtype=torch.int64), w, wait=True)

    @property
    def has_optimizer_state(self) -> bool:
        """Whether the shards keep per-row optimizer state for this table (Adagrad)."""
        return self.worker.table(self.table).optimizer == _ferry.ps.OptimizerKind.adagrad

    def pull_optimizer_state(self) -> Any:
        """The table's optimizer state, [rows, dim] on the CPU (Adagrad's
        accumulators: torch.optim.Adagrad's ``sum``), pulled from the shards."""
        return self._whole(self.worker.pull_state)

    def assign_optimizer_state(self, state: Any) -> None:
        """Set the table's optimizer state, [rows, dim] (after assign_weight, which restarts it)."""
        s = self._checked(state, "optimizer state")
        self.worker.assign_state(self.table, torch.arange(self.num_embeddings, dtype=torch.int64), s, wait=True)

    def _save_to_state_dict(self, destination: Dict[str, Any], prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)  # type: ignore[misc]  # nn.Module's, after this mixin
        if not self.checkpoint:
            return
        if self.num_embeddings == 0:
            warnings.warn("ferry.ps.torch: table %r (rows=0) is not in the state_dict: its keys cannot be listed"
                          % self.table, stacklevel=3)
            return
        destination[prefix + "weight"] = self.pull_weight()

    def _load_from_state_dict(self, state_dict: Dict[str, Any], prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: List[str], unexpected_keys: List[str], error_msgs: List[str]) -> None:
        super()._load_from_state_dict(  # type: ignore[misc]  # nn.Module's, after this mixin
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        key = prefix + "weight"
        if not self.checkpoint or self.num_embeddings == 0:
            return  # a weight given is then unexpected (strict), as for a module without one
        if key in unexpected_keys:
            unexpected_keys.remove(key)
        if key not in state_dict:
            if strict:
                missing_keys.append(key)
            return
        w = state_dict[key]
        if tuple(w.shape) != (self.num_embeddings, self.embedding_dim):
            error_msgs.append("size mismatch for %s: copying a param with shape %s from checkpoint, the shape in "
                              "current model is %s." % (key, tuple(w.shape), (self.num_embeddings, self.embedding_dim)))
            return
        try:
            self.assign_weight(w)
        except Exception as e:  # noqa: BLE001 (reported as torch reports a failed copy)
            error_msgs.append('While copying the parameter named "%s" to table %r, an exception occurred: %s'
                              % (key, self.table, e))


def _stateful_modules(model: torch.nn.Module) -> Dict[str, _Checkpointed]:
    return {name: m for name, m in model.named_modules()
            if isinstance(m, _Checkpointed) and m.checkpoint and m.num_embeddings != 0 and m.has_optimizer_state}


def optimizer_state_dict(model: torch.nn.Module) -> Dict[str, Any]:
    """The shards' optimizer state of every ferry.ps module of ``model`` whose
    table keeps some (Adagrad) and is checkpointed: ``{module name: {"sum":
    [rows, dim]}}``, the key torch.optim.Adagrad uses. Save it beside the
    model's and the optimizer's state dicts; tables shared by several modules
    appear under each."""
    return {name: {"sum": m.pull_optimizer_state()} for name, m in _stateful_modules(model).items()}


def load_optimizer_state_dict(model: torch.nn.Module, state: Dict[str, Any]) -> None:
    """Give the shards back what ``optimizer_state_dict`` took; after
    ``model.load_state_dict`` (assigning a weight restarts the state).
    ValueError naming what is missing, unknown or of the wrong shape, before
    anything is assigned."""
    modules = _stateful_modules(model)
    missing = sorted(set(modules) - set(state))
    unknown = sorted(set(state) - set(modules))
    if missing or unknown:
        raise ValueError("optimizer state: missing for %s, unknown %s" % (missing or "none", unknown or "none"))
    for name in modules:
        if not isinstance(state[name], dict) or "sum" not in state[name]:
            raise ValueError("optimizer state of %r: want {\"sum\": [rows, dim]}" % name)
    checked = {name: m._checked(state[name]["sum"], "optimizer state") for name, m in modules.items()}
    for name, s in checked.items():
        if s.numel() and float(s.min()) < 0:
            raise ValueError("optimizer state of %r: Adagrad's is a sum of squares, never negative" % name)
    for name, m in modules.items():
        m.assign_optimizer_state(checked[name])
