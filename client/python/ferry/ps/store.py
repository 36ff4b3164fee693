"""Finding shards through torch.distributed's key-value store (torchrun).

Under ``torchrun`` (or any launcher that sets ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT``) every trainer reaches the job's
``TCPStore``. A shard server started with ``python3 -m ferry.ps.server
--store MASTER_ADDR:MASTER_PORT`` writes there where it can be reached, and
``ferry.ps.Worker.from_env(tables)`` reads it::

    # the shards' host (its ferryd listens on 10.0.0.5:7000)
    python3 -m ferry.ps.server --tables @tables.json --shard 0/2 --store trainer0:29500
    python3 -m ferry.ps.server --tables @tables.json --shard 1/2 --store trainer0:29500
    # the trainers
    torchrun --nproc-per-node 8 --master-addr trainer0 --master-port 29500 train.py
    # in train.py
    worker = ferry.ps.Worker.from_env(tables)

Keys (under ``ferry.ps/`` and the store prefix, default ``ps-shard-``):
``shards`` is the shard count; ``shard/<i>`` a JSON object with the shard's
``service``, its ferryd's ``target`` (``HOST:PORT``, the daemon's
``--listen``), that daemon's client ``socket`` and ``host`` name (a worker on
the same daemon opens the service without a target), its ``max_count`` and
its tables' names.
"""

from __future__ import annotations

import json
import os
import socket as _socket
import time
from datetime import timedelta
from typing import Any, Dict, List, Optional, Sequence, Tuple

DEFAULT_TIMEOUT_S = 300.0


def _key(prefix: str, name: str) -> str:
    return "ferry.ps/%s/%s" % (prefix, name)


def _torch_store() -> Any:
    try:
        import torch.distributed as dist
    except ImportError as e:
        raise ImportError("ferry.ps.store needs torch.distributed (PyTorch)") from e
    return dist


def parse_address(address: str) -> Tuple[str, int]:
    """'HOST:PORT' as (host, port); ValueError for anything else."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError("a store address is HOST:PORT, got %r" % address)
    return host.strip("[]"), int(port)


def connect(address: str, timeout: float = DEFAULT_TIMEOUT_S, *, is_master: bool = False,
            world_size: Optional[int] = None) -> Any:
    """A TCPStore client of the store at ``address`` (HOST:PORT), retried
    until it answers or ``timeout`` seconds passed (a launcher may start it
    after the shard servers)."""
    dist = _torch_store()
    host, port = parse_address(address)
    deadline = time.monotonic() + timeout
    libuv: Dict[str, bool] = {}  # torch's default, until it says it was built without libuv
    while True:
        try:
            return dist.TCPStore(host, port, world_size, is_master, timedelta(seconds=max(1.0, min(30.0, timeout))),
                                 wait_for_workers=False, **libuv)
        except (RuntimeError, ConnectionError) as e:
            if "libuv" in str(e) and not libuv:
                # A torch built without libuv (Debian's) refuses its own default: the other implementation.
                libuv = {"use_libuv": False}
                continue
            if is_master or time.monotonic() > deadline:
                raise ConnectionError("no torch.distributed store answers at %s: %s" % (address, e)) from e
            time.sleep(0.2)


def from_env(timeout: float = DEFAULT_TIMEOUT_S) -> Any:
    """A client of the job's store at ``MASTER_ADDR:MASTER_PORT``: the torchrun
    agent's (``TORCHELASTIC_USE_AGENT_STORE``), or the one rank 0's
    ``init_process_group`` hosts. Without either (no process group yet, a
    plain launcher), rank 0 hosts it here: call ``init_process_group`` first
    if the job uses one."""
    dist = _torch_store()
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
    if missing:
        raise RuntimeError("Worker.from_env(): %s not set (start the trainers with torchrun, or set RANK, WORLD_SIZE, "
                           "MASTER_ADDR and MASTER_PORT)" % ", ".join(missing))
    for v in ("RANK", "WORLD_SIZE"):
        if not os.environ[v].strip().isdigit():
            raise RuntimeError("Worker.from_env(): %s must be a number, got %r" % (v, os.environ[v]))
    address = "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)
    if agent or (dist.is_available() and dist.is_initialized()):
        return connect(address, timeout)
    return connect(address, timeout, is_master=int(os.environ["RANK"]) == 0)


def publish(store: Any, index: int, shards: int, entry: Dict[str, Any], prefix: str = "ps-shard-") -> None:
    """Write shard ``index`` of ``shards``'s entry (see the module's doc)."""
    store.set(_key(prefix, "shards"), str(shards))
    store.set(_key(prefix, "shard/%d" % index), json.dumps(entry))


def lookup(store: Any, prefix: str = "ps-shard-", timeout: float = DEFAULT_TIMEOUT_S) -> List[Dict[str, Any]]:
    """Every shard's entry, waiting up to ``timeout`` seconds for all of them to be published."""
    deadline = time.monotonic() + timeout

    def wait(keys: List[str]) -> None:
        left = deadline - time.monotonic()
        try:
            store.wait(keys, timedelta(seconds=max(0.001, left)))
        except RuntimeError as e:
            raise TimeoutError("shards not published in the store within %.0f s (waiting for %s; start them with "
                               "python3 -m ferry.ps.server --store HOST:PORT)" % (timeout, ", ".join(keys))) from e

    count = _key(prefix, "shards")
    wait([count])
    n = int(store.get(count))
    keys = [_key(prefix, "shard/%d" % i) for i in range(n)]
    wait(keys)
    return [json.loads(store.get(k)) for k in keys]


def shard_entry(service: str, max_count: int, tables: Sequence[Any], socket_path: Optional[str],
                target: Optional[str]) -> Dict[str, Any]:
    """What a shard server publishes about itself."""
    return {"service": service, "target": target or "", "socket": os.path.realpath(socket_path or _default_socket()),
            "host": _socket.gethostname(), "max_count": int(max_count), "tables": [t.name for t in tables]}


def _default_socket() -> str:
    from ferry import default_socket_path
    return default_socket_path()


def daemon_status(socket_path: Optional[str]) -> Optional[Dict[str, Any]]:
    """``ferryctl status --json``'s result from the ferryd whose client socket
    is ``socket_path`` (its control socket lies beside it), or None when it
    does not answer."""
    control = os.path.join(os.path.dirname(socket_path or _default_socket()), "control.sock")
    try:
        with _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(control)
            s.sendall(b'{"cmd":"status"}\n')
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        reply = json.loads(data)
        result = reply.get("result") if reply.get("ok") else None
        return result if isinstance(result, dict) else None
    except (OSError, ValueError):
        return None


def daemon_listen(socket_path: Optional[str]) -> Optional[str]:
    """The ``--listen`` address of the ferryd whose client socket is
    ``socket_path``, or None."""
    status = daemon_status(socket_path)
    return (status or {}).get("listen") or None


def shard_targets(entries: List[Dict[str, Any]], socket_path: Optional[str]) -> List[str]:
    """The target a worker attached at ``socket_path`` opens for each shard:
    the bare service on its own daemon, else ``HOST:PORT/SERVICE``."""
    mine = os.path.realpath(socket_path or _default_socket())
    host = _socket.gethostname()
    out = []
    for i, e in enumerate(entries):
        if e.get("socket") == mine and e.get("host") == host:
            out.append(e["service"])
        elif e.get("target"):
            out.append("%s/%s" % (e["target"], e["service"]))
        else:
            raise RuntimeError("shard %d (%s) is on another ferryd that has no --listen address: start that ferryd "
                               "with --listen HOST:PORT, or the shard server with --advertise HOST:PORT" % (i, e["service"]))
    return out


def worker_from_env(cls: Any, tables: Sequence[Any], *, socket: Optional[str] = None, store: Any = None,
                    prefix: str = "ps-shard-", store_timeout: float = DEFAULT_TIMEOUT_S, **options: Any) -> Any:
    """Worker.from_env's body: look the shards up, check they serve these tables, open them."""
    st = store if store is not None else from_env(store_timeout)
    entries = lookup(st, prefix, store_timeout)
    names = [t.name for t in tables]
    for i, e in enumerate(entries):
        if e.get("tables") != names:
            raise ValueError("shard %d serves tables %s, this worker was given %s" % (i, e.get("tables"), names))
    if "max_count" not in options:
        options["max_count"] = min(int(e["max_count"]) for e in entries)
    if "name" not in options and "RANK" in os.environ:
        options["name"] = "ferry ps worker rank %s" % os.environ["RANK"]
    return cls(tables, len(entries), socket, shard_targets=shard_targets(entries, socket), **options)


__all__ = ["connect", "from_env", "publish", "lookup", "shard_entry", "daemon_listen", "shard_targets",
           "worker_from_env", "parse_address"]
