"""Table specifications: what a parameter-server table is, how it starts,
and which optimizer its shards apply to pushed gradients.

Workers and shards must be given the same tables (ids in order of the list
unless given). A spec is plain data; ``to_dict()``/``from_dict()`` carry it
to shard processes as JSON.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from ferry import _ferry

_ps = _ferry.ps


@dataclasses.dataclass(frozen=True)
class SGD:
    """w -= lr * g (torch.optim.SGD without momentum or weight decay)."""

    lr: float = 0.01


@dataclasses.dataclass(frozen=True)
class Adagrad:
    """a += g*g; w -= lr * g / (sqrt(a) + eps) (torch.optim.Adagrad, no lr decay)."""

    lr: float = 0.01
    eps: float = 1e-10
    initial_accumulator_value: float = 0.0


@dataclasses.dataclass(frozen=True)
class Zeros:
    """Every row starts at zero."""


@dataclasses.dataclass(frozen=True)
class Uniform:
    """Uniform in [-scale, scale), a pure function of (seed, table, key, column)."""

    scale: float = 0.05
    seed: int = 0


REMOTE = "remote"  # in an Access list: every caller that came through a peer daemon


@dataclasses.dataclass(frozen=True)
class Access:
    """Who a table's shards answer, per operation: None lets anyone; a list
    names the uids allowed (as the shard's ferryd saw them at attach), and
    ``REMOTE`` the callers on other hosts (their uid is not known here)."""

    pull: Optional[Sequence[Any]] = None
    push: Optional[Sequence[Any]] = None
    assign: Optional[Sequence[Any]] = None

    def uids(self, op: str) -> List[int]:
        who = getattr(self, op)
        if who is None:
            return []
        out = []
        for u in who:
            if u == REMOTE:
                out.append(_ps.REMOTE_CALLER)
            elif isinstance(u, int) and not isinstance(u, bool) and 0 <= u < _ps.UNKNOWN_CALLER:
                out.append(u)
            else:
                raise ValueError("access.%s: %r is neither a uid nor ferry.ps.REMOTE" % (op, u))
        if not out:
            raise ValueError("access.%s: an empty list would refuse everyone (None allows anyone)" % op)
        return out


@dataclasses.dataclass(frozen=True)
class Table:
    """An embedding table (``rows`` keys of ``dim`` floats; rows=0: any 64-bit
    key) or, with ``dense=True``, a flat tensor of ``rows`` floats."""

    name: str
    dim: int = 1
    rows: int = 0
    optimizer: Union[SGD, Adagrad] = SGD()
    init: Union[Zeros, Uniform] = Zeros()
    dense: bool = False
    id: Optional[int] = None
    max_rows: int = 0  # embedding: rows one shard keeps at most (0: no limit); past it pushes fail TableFull
    access: Optional[Access] = None  # who may pull, push, assign (None: anyone)

    def spec(self, default_id: int) -> Any:
        """The C++ spec (ferry._ferry.ps.TableSpec), id ``default_id`` unless the table names its own; checked."""
        if not isinstance(self.name, str):
            raise ValueError("table name: a string, got %r" % (self.name,))
        for field in ("dim", "rows", "max_rows") + (() if self.id is None else ("id",)):
            v = getattr(self, field)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
                raise ValueError("table %r: %s must be an integer >= 0, got %r" % (self.name, field, v))
        s = _ps.TableSpec()
        s.id = default_id if self.id is None else self.id
        s.name = self.name
        s.kind = _ps.TableKind.dense if self.dense else _ps.TableKind.embedding
        s.dim = 1 if self.dense else int(self.dim)
        s.rows = int(self.rows)
        s.max_rows = int(self.max_rows)
        if self.access is not None:
            if not isinstance(self.access, Access):
                raise ValueError("table %r: access must be a ferry.ps.Access" % self.name)
            s.pull_uids, s.push_uids, s.assign_uids = (self.access.uids(op) for op in ("pull", "push", "assign"))
        opt = self.optimizer
        if isinstance(opt, SGD):
            s.optimizer = _ps.OptimizerKind.sgd
            s.lr = opt.lr
        elif isinstance(opt, Adagrad):
            s.optimizer = _ps.OptimizerKind.adagrad
            s.lr, s.eps, s.initial_accumulator = opt.lr, opt.eps, opt.initial_accumulator_value
        else:
            raise ValueError("table %r: optimizer must be ferry.ps.SGD or ferry.ps.Adagrad" % self.name)
        init = self.init
        if isinstance(init, Zeros):
            s.init = _ps.InitKind.zeros
        elif isinstance(init, Uniform):
            s.init, s.init_scale, s.init_seed = _ps.InitKind.uniform, init.scale, init.seed
        else:
            raise ValueError("table %r: init must be ferry.ps.Zeros or ferry.ps.Uniform" % self.name)
        s.check()
        return s

    def to_dict(self) -> Dict[str, Any]:
        """Plain data (JSON-able): what shard processes are given."""
        d = dataclasses.asdict(self)
        d["optimizer"] = {"kind": type(self.optimizer).__name__, **dataclasses.asdict(self.optimizer)}
        d["init"] = {"kind": type(self.init).__name__, **dataclasses.asdict(self.init)}
        if self.access is not None:
            d["access"] = {k: (None if v is None else list(v)) for k, v in dataclasses.asdict(self.access).items()}
        return d

    @staticmethod
    def from_dict(d: Dict[str, Any]) -> "Table":
        """The table to_dict() described. Fields left out take Table's
        defaults; an unknown field, optimizer or init is a ValueError that
        names the table and what it expected."""
        if not isinstance(d, dict):
            raise ValueError("a table is a JSON object (as Table.to_dict() writes), got %r" % (d,))
        d = dict(d)
        name = d.get("name")
        if not isinstance(name, str):
            raise ValueError("a table needs a \"name\" (a string): %r" % (d,))
        known = {f.name for f in dataclasses.fields(Table)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError("table %r: unknown field(s) %s (known: %s)" % (name, ", ".join(unknown),
                                                                          ", ".join(sorted(known))))
        for field, kinds in (("optimizer", (SGD, Adagrad)), ("init", (Zeros, Uniform))):
            if field not in d:
                continue
            v = d[field]
            by_name = {k.__name__: k for k in kinds}
            if not isinstance(v, dict) or v.get("kind") not in by_name:
                raise ValueError("table %r: %s must be an object whose \"kind\" is one of %s, got %r"
                                 % (name, field, ", ".join(by_name), v))
            v = dict(v)
            cls = by_name[v.pop("kind")]
            try:
                d[field] = cls(**v)
            except TypeError:
                raise ValueError("table %r: %s %s takes %s, got %s" % (
                    name, field, cls.__name__, ", ".join(f.name for f in dataclasses.fields(cls)) or "nothing",
                    ", ".join(sorted(v)))) from None
        if d.get("access") is not None:
            acc = d["access"]
            fields = {f.name for f in dataclasses.fields(Access)}
            if not isinstance(acc, dict) or set(acc) - fields:
                raise ValueError("table %r: access must be an object of %s, got %r" % (name, ", ".join(sorted(fields)), acc))
            d["access"] = Access(**{k: (None if v is None else tuple(v)) for k, v in acc.items()})
        return Table(**d)


def Embedding(name: str, rows: int, dim: int, optimizer: Union[SGD, Adagrad] = SGD(),
              init: Union[Zeros, Uniform] = Uniform(), id: Optional[int] = None, max_rows: int = 0,
              access: Optional[Access] = None) -> Table:
    """An embedding table of ``rows`` keys (0: any 64-bit key) of ``dim`` floats;
    ``max_rows``: the most rows one shard keeps (0: no limit); ``access``: who
    may pull, push and assign (None: anyone)."""
    return Table(name=name, dim=dim, rows=rows, optimizer=optimizer, init=init, id=id, max_rows=max_rows,
                 access=access)


def Dense(name: str, size: int, optimizer: Union[SGD, Adagrad] = SGD(), init: Union[Zeros, Uniform] = Zeros(),
          id: Optional[int] = None, access: Optional[Access] = None) -> Table:
    """A dense flat tensor of ``size`` floats, split over the shards in contiguous slices."""
    return Table(name=name, dim=1, rows=size, optimizer=optimizer, init=init, dense=True, id=id, access=access)


def table_list(tables: Sequence[Table]) -> List[Table]:
    """``tables`` as a list, checked: at least one, each a Table."""
    if isinstance(tables, Table) or not isinstance(tables, Iterable):
        raise TypeError("tables: a list of ferry.ps tables, got %s" % type(tables).__name__)
    out = list(tables)
    if not out:
        raise ValueError("tables: at least one table")
    for t in out:
        if not isinstance(t, Table):
            raise TypeError("tables: ferry.ps tables (Embedding(), Dense(), Table()), got %s" % type(t).__name__)
    return out


def specs(tables: Sequence[Table]) -> List[Any]:
    """The C++ specs of a list of tables (ids: position unless given), checked."""
    out = [t.spec(i) for i, t in enumerate(table_list(tables))]
    ids = [s.id for s in out]
    names = [s.name for s in out]
    if len(set(ids)) != len(ids) or len(set(names)) != len(names):
        raise ValueError("table ids and names must be unique")
    return out
