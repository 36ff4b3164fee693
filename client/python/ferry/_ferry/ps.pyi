"""Type stubs of ferry._ferry.ps: the parameter-server library (libferry-ps)
as the ferry.ps package uses it. Users call ferry.ps (Worker, ShardServer,
tables); these are its compiled parts."""

from typing import ClassVar, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Keys = Union[npt.NDArray[np.int64], Sequence[int]]
_Floats = Union[npt.NDArray[np.float32], Sequence[float]]

class _Enum:
    """A pybind11 enum: its members are instances, with an int value."""

    def __init__(self, value: int) -> None: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> int: ...

class TableKind(_Enum):
    """An embedding table (rows by 64-bit key) or a dense flat tensor."""

    __members__: ClassVar[Dict[str, "TableKind"]]
    embedding: ClassVar["TableKind"]
    dense: ClassVar["TableKind"]

class OptimizerKind(_Enum):
    """The optimizer a shard applies to pushed gradients."""

    __members__: ClassVar[Dict[str, "OptimizerKind"]]
    sgd: ClassVar["OptimizerKind"]
    adagrad: ClassVar["OptimizerKind"]

class InitKind(_Enum):
    """How a row starts before any push."""

    __members__: ClassVar[Dict[str, "InitKind"]]
    zeros: ClassVar["InitKind"]
    uniform: ClassVar["InitKind"]
    pattern: ClassVar["InitKind"]

class TableSpec:
    """One table as the C++ library sees it (ferry.ps.Table.spec() makes them)."""

    id: int
    name: str
    kind: TableKind
    dim: int
    rows: int
    optimizer: OptimizerKind
    lr: float
    eps: float
    initial_accumulator: float
    init: InitKind
    init_scale: float
    init_seed: int
    max_rows: int
    pull_uids: List[int]
    push_uids: List[int]
    assign_uids: List[int]
    def __init__(self) -> None: ...
    def check(self) -> None:
        """Raises ferry.BadRequest (a ValueError), saying why, when this spec cannot be used."""

REMOTE_CALLER: int
"""In an access list: every caller that came through a peer daemon."""
UNKNOWN_CALLER: int
"""Uids are below this."""

def initial_values(table: TableSpec, keys: _Keys) -> npt.NDArray[np.float32]:
    """The values a shard gives these keys before any push: [n, dim] float32."""

def shard_of(table: int, keys: _Keys, shards: int) -> npt.NDArray[np.uint32]:
    """The shard that owns each key (the documented placement hash)."""

def mix64(x: int) -> int:
    """The 64-bit mixer the placement hash is built on."""

def bag_grad(order: _Keys, index: _Keys, starts: _Keys, per_bag: int, grad_out: npt.ArrayLike,
             rows: int) -> npt.NDArray[np.float32]:
    """The pulled rows' gradient of a sum-mode bag, [rows, dim] float32:
    out[index[p]] += grad_out[bag(p)] for p in ``order``; the bags start at
    ``starts`` (empty: every ``per_bag`` positions). Raises ferry.BadRequest
    for an index out of range."""

class ShardServer:
    """A shard served over ferry from a thread of this process."""

    def __init__(self, tables: Sequence[TableSpec], index: int, shards: int, socket: str = "", pool: int = 64,
                 max_count: int = 65536, busy_poll: bool = False, service_prefix: str = "ps-shard-",
                 allow_non_finite: bool = False, checkpoint_dir: str = "", restore: str = "",
                 save_stall_ms: int = 60000, reattach_ms: int = 0) -> None: ...
    def start(self) -> None:
        """Begin answering (GIL-free)."""
    def stop(self) -> None:
        """Stop answering and detach."""
    @property
    def running(self) -> bool:
        """Whether it is serving."""
    @property
    def service(self) -> str:
        """The service name it serves (PREFIX<index>)."""
    @property
    def reattached(self) -> int:
        """How many times it attached again after its ferryd went away."""
    def counters(self) -> Dict[str, Union[int, str]]:
        """Requests served and refused, pulls, pushes, assigns, save steps, keys; "result" ("Running" while serving)."""
    def usage(self) -> Dict[int, Dict[str, int]]:
        """Rows and bytes each table holds on this shard, by table id."""
    def find(self, table: int, key: int) -> Optional[List[float]]:
        """A parameter's values after stop() (None when this shard never held it)."""

class Op:
    """A parameter-server operation in flight or done (buffer protocol: a completed pull's rows)."""

    def wait(self, timeout: Optional[float] = None) -> None:
        """Block (without the GIL) until done; raises the operation's ferry.Error."""
    def done(self) -> bool:
        """Whether it completed (collects completions first)."""
    @property
    def status(self) -> Optional[str]:
        """The status name once done (None while in flight)."""
    @property
    def rows(self) -> int:
        """A completed pull's distinct rows (dense: elements)."""
    @property
    def zero_copy(self) -> bool:
        """Whether a completed pull's rows are the response block in the arena (else a copy in process memory)."""
    def index(self) -> npt.NDArray[np.int64]:
        """Per requested key: its row."""
    def keys(self) -> npt.NDArray[np.int64]:
        """The distinct keys in row order."""
    def shard_rows(self) -> List[int]:
        """Per shard: its first row; shards + 1 entries."""
    def prepared(self) -> List[Tuple[int, int, int]]:
        """A prepared push's requests: (first row, rows, address of their gradient floats)."""
    def saved(self) -> List[int]:
        """A finished save step: per shard, the rows it wrote, or 0xFFFFFFFF where it was not asked."""
    @property
    def exports(self) -> int:
        """Live views of the rows."""
    def fileno(self) -> int:
        """Readable when completions may be ready (-1 for a busy-polling worker)."""
    def release(self) -> None:
        """Give the rows' memory back now (refuses while views are alive)."""

class Worker:
    """A parameter-server worker: one ferry client with an endpoint to every shard."""

    def __init__(self, tables: Sequence[TableSpec], shards: int, socket: str = "", target: str = "",
                 name: str = "ferry ps worker", timeout: float = 10.0, busy_poll: bool = False,
                 service_prefix: str = "ps-shard-", tx_bytes: int = 0, max_ops: int = 64,
                 max_count: int = 0, max_calls: int = 256, shard_targets: Sequence[str] = ...) -> None: ...
    def pull(self, table: int, keys: _Keys) -> Op:
        """Start a pull of these keys' rows."""
    def pull_dense(self, table: int) -> Op:
        """Start a pull of a whole dense table."""
    def push(self, table: int, keys: _Keys, grads: _Floats) -> Op:
        """Start a push of gradients [n, dim] for keys."""
    def push_rows(self, pulled: Op, grads: _Floats) -> Op:
        """Start a push of gradients for the rows of a completed pull, in its row order."""
    def push_dense(self, table: int, grads: _Floats) -> Op:
        """Start a push of a dense table's gradient."""
    def assign(self, table: int, keys: _Keys, values: _Floats) -> Op:
        """Start overwriting rows."""
    def pull_state(self, table: int, keys: _Keys) -> Op:
        """The optimizer state (Adagrad's accumulators) of rows, as pull() gives values."""
    def assign_state(self, table: int, keys: _Keys, values: _Floats) -> Op:
        """Sets the optimizer state of rows (their values stay)."""
    def pull_dense_state(self, table: int) -> Op:
        """The optimizer state (Adagrad's accumulators) of a whole dense table, as pull_dense() gives values."""
    def assign_dense_state(self, table: int, values: _Floats) -> Op:
        """Sets the optimizer state of a whole dense table (its values stay)."""
    def assign_dense(self, table: int, values: _Floats) -> Op:
        """Start overwriting a dense table."""
    def save(self, table: int, name: str, first: Sequence[int], count: int) -> Op:
        """One step of a shard-side checkpoint on every shard asked (ferry.ps.save_shards drives them)."""
    def push_rows_prepare(self, pulled: Op) -> Op:
        """push_rows' requests made in the arena, the gradient still to fill (Op.prepared())."""
    def commit(self, op: Op) -> None:
        """Send a prepared push."""
    def owns(self, op: Op) -> bool:
        """Whether op was started by this worker (not by the one before it attached again)."""
    def wait_all(self, ops: Sequence[Op], timeout: Optional[float] = None) -> None:
        """Wait for every one of ops (one GIL release per worker they belong to); raises the first failure."""
    @property
    def daemon_gone(self) -> bool:
        """Whether this worker's ferryd went away."""
    @property
    def live_ops(self) -> int:
        """Operations holding memory (in flight or unreleased)."""
    @property
    def max_count(self) -> int:
        """The most keys (or elements) one request carries; larger operations are split."""
    @property
    def max_message_bytes(self) -> int:
        """The largest message the worker's ferryd carries."""
    @property
    def segment(self) -> int:
        """The address the worker's shared segment is mapped at (for registering it with a GPU)."""
    def close(self) -> None:
        """Wait for operations in flight, then detach."""
