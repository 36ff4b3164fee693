"""ferry.ps: a sharded parameter server over ferry.

Tables (``Embedding`` rows addressed by 64-bit keys, ``Dense`` flat tensors)
are split over shard processes by a documented hash; shards apply SGD or
Adagrad to the gradients workers push. A ``Worker`` pulls rows zero-copy
into the ferry arena (a ``torch.Tensor`` over the response block) and pushes
gradients back, synchronously or asynchronously; ``ferry.ps.torch`` has the
``EmbeddingBag`` / ``Embedding`` modules whose forward pulls and whose
backward pushes.

The protocol, the hash and the optimizers are one C++ implementation
(libferry-ps) that this package calls through its binding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Sequence

try:
    import numpy as np
except ImportError as e:  # ferry itself runs without numpy; the parameter server does not
    raise ImportError("ferry.ps needs numpy, which this Python (%s) lacks: pip install numpy "
                      "(ferry.ps.torch also needs torch); `import ferry` works without either" % __import__("sys").executable
                      ) from e

from ferry import _ferry
from ferry.ps.shard import ShardServer, serve
from ferry.ps.shard_saves import save_shards
from ferry.ps.table_files import load_tables, read_manifest, save_tables
from ferry.ps.tables import REMOTE, SGD, Access, Adagrad, Dense, Embedding, Table, Uniform, Zeros, specs

if TYPE_CHECKING:
    from ferry.ps.worker import DenseValues, Pending, Rows, Worker

# The worker side imports torch where it is installed; a shard process
# (python3 -m ferry.ps.server) never needs it, and without it starts in
# 0.1 s instead of 1 s and holds 39 MB instead of 229 (measured here). So
# these names load ferry.ps.worker the first time they are asked for.
_WORKER_NAMES = ("Worker", "Rows", "Pending", "DenseValues")


def __getattr__(name: str) -> Any:
    if name in _WORKER_NAMES:
        from ferry.ps import worker
        value = getattr(worker, name)
        globals()[name] = value  # asked once
        return value
    raise AttributeError("module 'ferry.ps' has no attribute %r" % name)


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_WORKER_NAMES))


_ps = _ferry.ps


def shard_of(table_id: int, keys: Any, shards: int) -> np.ndarray:
    """The shard owning each key of embedding table ``table_id`` (numpy uint32)."""
    return _ps.shard_of(table_id, np.ascontiguousarray(keys, dtype=np.int64), shards)


def initial_values(tables: Sequence[Table], name: str, keys: Any) -> np.ndarray:
    """The values the shards give ``keys`` of table ``name`` before any push,
    [n, dim] float32 (for a dense table, elements: [n, 1])."""
    s = next((s for s in specs(tables) if s.name == name), None)
    if s is None:
        raise KeyError(name)
    return _ps.initial_values(s, np.ascontiguousarray(keys, dtype=np.int64))


__all__ = ["Table", "Embedding", "Dense", "Access", "REMOTE", "SGD", "Adagrad", "Zeros", "Uniform", "Worker", "Rows",
           "Pending", "DenseValues", "ShardServer", "serve", "shard_of", "initial_values", "specs", "save_tables",
           "load_tables", "read_manifest", "save_shards"]
