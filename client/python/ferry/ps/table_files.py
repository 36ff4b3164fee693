"""Whole tables to files and back, streamed: ``save_tables`` pulls each
table a chunk of rows at a time and writes it to a ``.npy`` file as it
goes, ``load_tables`` reads the files a chunk at a time and assigns, so a
table larger than the process's memory moves through a bounded buffer
(about three chunks: one in flight, one being written and its copy in
key order). The files are plain numpy arrays, ``[rows, dim]`` float32,
readable with ``numpy.load(path, mmap_mode="r")`` anywhere.

A directory holds ``manifest.json`` (the tables, their shapes and
optimizers, and their files) and per table ``NAME.values.npy`` and, where
the table's optimizer keeps state (Adagrad),
``NAME.state.npy`` (the accumulators, torch.optim.Adagrad's ``sum``).
A dense table of ``size`` floats is saved as ``[size, 1]``. A
save writes into a sibling directory and renames it into place when every
file is synced, so a directory that exists is a whole checkpoint."""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ferry import _ferry

_ps = _ferry.ps

FORMAT = "ferry.ps.tables"
VERSION = 1
# A chunk's rows fit one arena block (1 MiB) and land zero copy; so do larger
# chunks, in a span of the arena, up to half of it, past which they are staged
# in process memory, slower (docs/benchmarks/checkpoints.md).
DEFAULT_CHUNK_BYTES = 1 << 20
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _kind(spec: Any) -> str:
    return "dense" if spec.kind == _ps.TableKind.dense else "embedding"


def _optimizer(spec: Any) -> str:
    return "adagrad" if spec.optimizer == _ps.OptimizerKind.adagrad else "sgd"


def _keeps_state(spec: Any) -> bool:
    return _optimizer(spec) == "adagrad"


def _shape(spec: Any) -> Tuple[int, int]:
    return (int(spec.rows), int(spec.dim)) if _kind(spec) == "embedding" else (int(spec.rows), 1)


def _listable(spec: Any) -> bool:
    """Whether the table's keys can be listed (an embedding table with rows=0 takes any 64-bit key)."""
    return _kind(spec) == "dense" or spec.rows != 0


def _chosen(worker: Any, tables: Optional[Sequence[str]], action: str) -> List[Any]:
    if tables is None:
        for s in worker._specs:
            if not _listable(s):
                warnings.warn("ferry.ps.%s: table %r (rows=0) left out: its keys cannot be listed" % (action, s.name),
                              stacklevel=3)
        return [s for s in worker._specs if _listable(s)]
    chosen = [worker.table(name) for name in tables]  # KeyError naming the tables there are
    for s in chosen:
        if not _listable(s):
            raise ValueError("table %r has no row count (rows=0: any 64-bit key), so its rows cannot be listed"
                             % s.name)
    return chosen


def _file_name(spec: Any, what: str) -> str:
    # The table's name where it makes a plain file name, else its id (the manifest maps either).
    safe = _NAME.fullmatch(spec.name) is not None and not spec.name.startswith(".") and len(spec.name) <= 200
    return "%s.%s.npy" % (spec.name if safe else "table-%d" % spec.id, what)


def _chunks(rows: int, dim: int, chunk_bytes: int) -> Iterator[Tuple[int, int]]:
    # A row costs its floats, its key and its place in the pull's index.
    step = max(1, chunk_bytes // (4 * max(dim, 1) + 16))
    for first in range(0, rows, step):
        yield first, min(rows, first + step)


def _write_npy(path: str, shape: Tuple[int, int], parts: Iterator[np.ndarray]) -> None:
    """Write a [rows, dim] float32 .npy from `parts`, contiguous float32
    arrays of consecutive rows, then sync it."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
        written = 0
        for part in parts:
            f.write(part.data.cast("B"))
            written += part.shape[0]
        if written != shape[0]:
            raise RuntimeError("%s: wrote %d rows of %d" % (path, written, shape[0]))
        f.flush()
        os.fsync(f.fileno())


def _pulled(worker: Any, spec: Any, state: bool, chunk_bytes: int) -> Iterator[np.ndarray]:
    """The rows (or optimizer state) of an embedding table in key order, a
    chunk at a time; the next chunk's pull is in flight while the caller
    writes this one."""
    pull = worker.pull_state_async if state else worker.pull_async
    spans = list(_chunks(int(spec.rows), int(spec.dim), chunk_bytes))
    # One buffer for every chunk's rows in key order: a new array per chunk
    # (Rows.gather) leaves glibc's heap holding hundreds of MB once chunks
    # pass its mmap threshold.
    ordered = np.empty((spans[0][1] - spans[0][0] if spans else 0, int(spec.dim)), np.float32)
    ahead = pull(spec.name, np.arange(*spans[0], dtype=np.int64)) if spans else None
    for i, (first, last) in enumerate(spans):
        current = ahead
        ahead = pull(spec.name, np.arange(*spans[i + 1], dtype=np.int64)) if i + 1 < len(spans) else None
        rows = current.wait()
        out = ordered[:last - first]
        np.take(np.asarray(rows.rows), np.asarray(rows.index), axis=0, out=out)
        del rows, current  # the response blocks go back before the next pull's wait
        yield out


def _dense(worker: Any, spec: Any, state: bool) -> Iterator[np.ndarray]:
    pull = worker.pull_dense_state if state else worker.pull_dense
    yield np.ascontiguousarray(pull(spec.name), dtype=np.float32).reshape(-1, 1)


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_tables(worker: Any, directory: str, tables: Optional[Sequence[str]] = None, *,
                chunk_bytes: int = DEFAULT_CHUNK_BYTES, overwrite: bool = False) -> Dict[str, int]:
    """Save tables of ``worker`` (all of them, or those named) into
    ``directory``, streamed a chunk of ``chunk_bytes`` at a time; with the
    optimizer state of tables that keep one (Adagrad). Tables
    without a row count (``rows=0``) cannot be listed: left out with a
    warning, or a ValueError when named. ``directory`` must not exist
    (FileExistsError) unless ``overwrite``; it appears whole or not at all.
    Returns ``{table: rows saved}``. Take it when no pushes are in flight
    (after a barrier): rows pushed during the save may be saved before or
    after their update."""
    if chunk_bytes <= 0:
        raise ValueError("chunk_bytes must be > 0")
    directory = os.path.abspath(directory)
    if os.path.exists(directory) and not overwrite:
        raise FileExistsError("%s exists: save into a new directory, or pass overwrite=True" % directory)
    specs = _chosen(worker, tables, "save_tables")
    parent, base = os.path.split(directory)
    os.makedirs(parent, exist_ok=True)
    partial = os.path.join(parent, ".%s.partial-%d" % (base, os.getpid()))
    shutil.rmtree(partial, ignore_errors=True)
    os.mkdir(partial)
    manifest: Dict[str, Any] = {"format": FORMAT, "version": VERSION, "tables": {}}
    try:
        for s in specs:
            shape = _shape(s)
            entry: Dict[str, Any] = {"kind": _kind(s), "rows": shape[0], "dim": int(s.dim),
                                     "optimizer": _optimizer(s), "values": _file_name(s, "values"), "state": None}
            for what in ("values", "state") if _keeps_state(s) else ("values",):
                entry[what] = _file_name(s, what)
                rows = _pulled(worker, s, what == "state", chunk_bytes) if _kind(s) == "embedding" \
                    else _dense(worker, s, what == "state")
                _write_npy(os.path.join(partial, entry[what]), shape, rows)
            manifest["tables"][s.name] = entry
        with open(os.path.join(partial, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        _sync_dir(partial)
        old = None
        if os.path.exists(directory):
            old = os.path.join(parent, ".%s.old-%d" % (base, os.getpid()))
            os.rename(directory, old)
        try:
            os.rename(partial, directory)
        except BaseException:
            if old is not None:
                os.rename(old, directory)  # the earlier checkpoint stays where it was
            raise
        _sync_dir(parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return {name: e["rows"] for name, e in manifest["tables"].items()}


def read_manifest(directory: str) -> Dict[str, Any]:
    """The manifest of a directory ``save_tables`` wrote; ValueError when it is not one."""
    path = os.path.join(directory, "manifest.json")
    try:
        with open(path) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise ValueError("%s holds no manifest.json: not a directory save_tables wrote" % directory) from None
    except json.JSONDecodeError as e:
        raise ValueError("%s: not JSON (%s)" % (path, e)) from None
    if not isinstance(m, dict) or m.get("format") != FORMAT or not isinstance(m.get("tables"), dict):
        raise ValueError("%s: not a %s manifest" % (path, FORMAT))
    if m.get("version") != VERSION:
        raise ValueError("%s: version %r, this ferry reads version %d" % (path, m.get("version"), VERSION))
    return m


class _Rows:
    """A saved [rows, dim] float32 .npy, read a slice of rows at a time with
    plain reads (a memory map would count the whole file in this process's
    resident memory as it is read)."""

    def __init__(self, path: str, table: str, shape: Tuple[int, int]) -> None:
        self.path, self.shape = path, shape
        try:
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    got, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    got, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    raise ValueError("npy format version %d.%d" % version)
                self.offset = f.tell()
                size = os.fstat(f.fileno()).st_size
        except (OSError, ValueError) as e:
            raise ValueError("table %r: %s is not a readable .npy (%s)" % (table, path, e)) from None
        if dtype != np.dtype("<f4") or fortran or tuple(got) != shape:
            raise ValueError("table %r: %s is %s %s, the table wants float32 %s"
                             % (table, path, dtype, list(got), list(shape)))
        if size != self.offset + 4 * shape[0] * shape[1]:
            raise ValueError("table %r: %s is not a readable .npy (%d bytes, its header says %d)"
                             % (table, path, size, self.offset + 4 * shape[0] * shape[1]))

    def read(self, first: int, last: int) -> np.ndarray:
        dim = self.shape[1]
        with open(self.path, "rb") as f:
            f.seek(self.offset + 4 * first * dim)
            a = np.fromfile(f, dtype="<f4", count=(last - first) * dim)
        if a.size != (last - first) * dim:
            raise ValueError("%s: rows [%d, %d) cut short" % (self.path, first, last))
        return a.reshape(last - first, dim)

    def least(self, chunk_bytes: int) -> float:
        """The smallest value (a state's sign check), read a chunk at a time."""
        least = float("inf")
        for first, last in _chunks(self.shape[0], self.shape[1], chunk_bytes):
            chunk = self.read(first, last)
            if chunk.size:
                least = min(least, float(chunk.min()))
        return least


def _open(directory: str, name: str, file: Any, shape: Tuple[int, int]) -> _Rows:
    if not isinstance(file, str) or not _NAME.fullmatch(file) or file.startswith("."):
        raise ValueError("table %r: the manifest names no usable file (%r)" % (name, file))
    return _Rows(os.path.join(directory, file), name, shape)


def load_tables(worker: Any, directory: str, tables: Optional[Sequence[str]] = None, *,
                chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Dict[str, int]:
    """Assign the tables saved in ``directory`` (all of them, or those
    named) to ``worker``'s shards, streamed a chunk of ``chunk_bytes`` at a
    time, the optimizer state after the values. Every table, shape,
    optimizer and file is checked before anything is assigned: ValueError
    naming what differs (a table the worker lacks: KeyError). A table saved
    with SGD loaded into one with Adagrad restarts its state (a warning).
    Returns ``{table: rows loaded}``."""
    if chunk_bytes <= 0:
        raise ValueError("chunk_bytes must be > 0")
    m = read_manifest(directory)
    saved = m["tables"]
    names = list(saved) if tables is None else list(tables)
    plan = []
    for name in names:
        if name not in saved:
            raise ValueError("%s holds no table %r (it has %s)" % (directory, name, ", ".join(sorted(saved)) or "none"))
        e, s = saved[name], worker.table(name)
        shape = _shape(s)
        if not isinstance(e, dict) or e.get("kind") != _kind(s) or e.get("rows") != shape[0] or \
                e.get("dim") != int(s.dim):
            raise ValueError("table %r: saved as %s, the worker's is %s [%d, %d]"
                             % (name, {k: e.get(k) for k in ("kind", "rows", "dim")} if isinstance(e, dict) else e,
                                _kind(s), shape[0], int(s.dim)))
        values = _open(directory, name, e.get("values"), shape)
        state = None
        if e.get("state") is not None:
            if not _keeps_state(s):
                raise ValueError("table %r: saved with %s state, the worker's table keeps none (%s)"
                                 % (name, e.get("optimizer"), _optimizer(s)))
            state = _open(directory, name, e["state"], shape)
            if state.least(chunk_bytes) < 0:
                raise ValueError("table %r: the saved Adagrad state has negative sums" % name)
        elif _keeps_state(s):
            warnings.warn("ferry.ps.load_tables: table %r was saved without optimizer state (%s): its Adagrad "
                          "state restarts" % (name, e.get("optimizer")), stacklevel=2)
        plan.append((s, values, state))
    for s, values, state in plan:
        if _kind(s) == "dense":
            worker.assign_dense(s.name, values.read(0, values.shape[0]).reshape(-1), wait=True)
            if state is not None:
                worker.assign_dense_state(s.name, state.read(0, state.shape[0]).reshape(-1), wait=True)
            continue
        _assign(worker.assign, s, values, chunk_bytes)
        if state is not None:
            _assign(worker.assign_state, s, state, chunk_bytes)
    return {s.name: int(values.shape[0]) for s, values, _ in plan}


def _assign(assign: Any, spec: Any, source: _Rows, chunk_bytes: int) -> None:
    """Assign `source` a chunk at a time, one in flight while the next is read."""
    pending = None
    for first, last in _chunks(int(spec.rows), int(spec.dim), chunk_bytes):
        chunk = source.read(first, last)
        op = assign(spec.name, np.arange(first, last, dtype=np.int64), chunk, wait=False)
        if pending is not None:
            pending.wait()
        pending = op
    if pending is not None:
        pending.wait()
