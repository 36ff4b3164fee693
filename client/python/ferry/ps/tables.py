"""Table specifications: what a parameter-server table is, how it starts,
and which optimizer its shards apply to pushed gradients.

Workers and shards must be given the same tables (ids in order of the list
unless given). A spec is plain data; ``to_dict()``/``from_dict()`` carry it
to shard processes as JSON.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Union

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

    def spec(self, default_id: int) -> Any:
        """The C++ spec (ferry._ferry.ps.TableSpec), id ``default_id`` unless the table names its own; checked."""
        s = _ps.TableSpec()
        s.id = default_id if self.id is None else self.id
        s.name = self.name
        s.kind = _ps.TableKind.dense if self.dense else _ps.TableKind.embedding
        s.dim = 1 if self.dense else int(self.dim)
        s.rows = int(self.rows)
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
        why = s.error()
        if why:
            raise ValueError(why)
        return s

    def to_dict(self) -> Dict[str, Any]:
        """Plain data (JSON-able): what shard processes are given."""
        d = dataclasses.asdict(self)
        d["optimizer"] = {"kind": type(self.optimizer).__name__, **dataclasses.asdict(self.optimizer)}
        d["init"] = {"kind": type(self.init).__name__, **dataclasses.asdict(self.init)}
        return d

    @staticmethod
    def from_dict(d: Dict[str, Any]) -> "Table":
        """The table to_dict() described."""
        d = dict(d)
        kinds = {"SGD": SGD, "Adagrad": Adagrad, "Zeros": Zeros, "Uniform": Uniform}
        for k in ("optimizer", "init"):
            v = dict(d[k])
            d[k] = kinds[v.pop("kind")](**v)
        return Table(**d)


def Embedding(name: str, rows: int, dim: int, optimizer: Union[SGD, Adagrad] = SGD(),
              init: Union[Zeros, Uniform] = Uniform(), id: Optional[int] = None) -> Table:
    """An embedding table of ``rows`` keys (0: any 64-bit key) of ``dim`` floats."""
    return Table(name=name, dim=dim, rows=rows, optimizer=optimizer, init=init, id=id)


def Dense(name: str, size: int, optimizer: Union[SGD, Adagrad] = SGD(), init: Union[Zeros, Uniform] = Zeros(),
          id: Optional[int] = None) -> Table:
    """A dense flat tensor of ``size`` floats, split over the shards in contiguous slices."""
    return Table(name=name, dim=1, rows=size, optimizer=optimizer, init=init, dense=True, id=id)


def specs(tables: Sequence[Table]) -> List[Any]:
    """The C++ specs of a list of tables (ids: position unless given), checked."""
    out = [t.spec(i) for i, t in enumerate(tables)]
    ids = [s.id for s in out]
    names = [s.name for s in out]
    if len(set(ids)) != len(ids) or len(set(names)) != len(names):
        raise ValueError("table ids and names must be unique")
    return out
