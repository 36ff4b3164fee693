"""A ferry.ps.Worker on a GPU: its arena registered with CUDA once, pulled
rows copied to the device without blocking from that pinned memory, and
gradients copied from the device straight into the push's request buffers.

The worker's shared segment (rings, tx and rx arenas: one memfd mapping) is
page-locked with ``cudaHostRegister`` when the worker is given a CUDA
device, through torch's own CUDA runtime (``torch.cuda.cudart()``), or
through ``libcudart`` with ctypes where torch does not expose it. Nothing
here needs the CUDA toolkit, and importing it needs no GPU.
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any, Optional

import torch

# cudaHostRegisterPortable: the pages count as pinned in every CUDA context of the process.
_REGISTER_PORTABLE = 1


def mapping_size(address: int) -> int:
    """The length of the mapping of this process that starts at ``address`` (/proc/self/maps)."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split(None, 1)[0].split("-"))
            if lo == address:
                return hi - lo
            if lo < address < hi:  # a segment mapped inside a larger mapping: register the rest of it
                return hi - address
    raise RuntimeError("no mapping of this process starts at 0x%x" % address)


def _libcudart() -> Any:
    names = []
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    names += sorted(glob.glob(os.path.join(torch_lib, "libcudart*.so*")))
    site = os.path.dirname(os.path.dirname(torch.__file__))
    names += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
    names += ["libcudart.so"]
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    raise RuntimeError("no CUDA runtime library (libcudart) found beside torch")


def _register(address: int, size: int) -> None:
    cudart = getattr(torch.cuda, "cudart", None)
    rt = cudart() if cudart is not None else None
    if rt is not None and hasattr(rt, "cudaHostRegister"):
        err = rt.cudaHostRegister(address, size, _REGISTER_PORTABLE)
    else:
        lib = _libcudart()
        lib.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        err = lib.cudaHostRegister(ctypes.c_void_p(address), ctypes.c_size_t(size), ctypes.c_uint(_REGISTER_PORTABLE))
    code = int(getattr(err, "value", err))
    if code != 0:
        raise RuntimeError("cudaHostRegister of the ferry arena (%d bytes at 0x%x) failed: CUDA error %d"
                           % (size, address, code))


def _unregister(address: int) -> None:
    cudart = getattr(torch.cuda, "cudart", None)
    rt = cudart() if cudart is not None else None
    if rt is not None and hasattr(rt, "cudaHostUnregister"):
        rt.cudaHostUnregister(address)
    else:
        lib = _libcudart()
        lib.cudaHostUnregister.argtypes = [ctypes.c_void_p]
        lib.cudaHostUnregister(ctypes.c_void_p(address))


class _Fence:
    """Keeps a pull's memory until the copy out of it finished (it owns the
    last reference to the pull's Op: the block is reused only after)."""

    __slots__ = ("event", "op")

    def __init__(self, event: Any, op: Any) -> None:
        self.event, self.op = event, op

    def __del__(self) -> None:
        try:
            self.event.synchronize()
        except Exception:  # interpreter shutdown: nothing left to protect
            pass


def _float_view(address: int, count: int) -> torch.Tensor:
    """A CPU tensor over ``count`` floats at ``address`` (memory the caller keeps alive)."""
    if count == 0:
        return torch.empty(0)
    return torch.frombuffer((ctypes.c_float * count).from_address(address), dtype=torch.float32)


class CudaArena:
    """The worker's arena as seen from one CUDA device."""

    def __init__(self, worker: Any, device: torch.device) -> None:
        self.worker = worker
        self.device = device
        self.address = int(worker._w.segment)
        self.size = mapping_size(self.address)
        with torch.cuda.device(device):
            _register(self.address, self.size)
        self.registered = True

    def deliver(self, rows: Any) -> None:
        """Start copying a completed pull's rows and index to the device (non-blocking from the pinned arena)."""
        stream = torch.cuda.current_stream(self.device)
        rows.device_rows = rows.rows.to(self.device, non_blocking=True)
        rows.device_index = rows.index.to(self.device, non_blocking=True)
        event = torch.cuda.Event()
        event.record(stream)
        rows.fence = _Fence(event, rows.op)

    def push_rows(self, rows: Any, grads: torch.Tensor) -> Any:
        """Push gradients [u, dim] (on this device) for the rows of a pull:
        the requests are made in the arena first, the gradient is copied from
        the device into them, then they are sent. Falls back to a copy
        through process memory when the arena cannot hold them all now."""
        w = self.worker._w
        dim = rows.rows.shape[1] if rows.rows.dim() == 2 else 1
        g = grads.detach().reshape(-1, dim)
        if g.dtype != torch.float32:
            g = g.float()
        try:
            op = w.push_rows_prepare(rows.op)
        except Exception:  # no room for every request at once: the ordinary path
            return w.push_rows(rows.op, g.cpu().contiguous().reshape(-1).numpy())
        for first, count, address in op.prepared():
            dst = _float_view(address, count * dim).view(count, dim)
            dst.copy_(g[first:first + count], non_blocking=True)
        self.synchronize()  # the gradient is in the requests
        w.commit(op)
        return op

    def synchronize(self) -> None:
        """Wait for the copies issued on the device's current stream."""
        torch.cuda.current_stream(self.device).synchronize()

    def close(self) -> None:
        """Unregister the arena (before the worker detaches and it is unmapped)."""
        if self.registered:
            torch.cuda.synchronize(self.device)
            _unregister(self.address)
            self.registered = False


def attach(worker: Any, device: Any) -> Optional[CudaArena]:
    """The worker's CUDA side for ``device`` (None for the CPU)."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        raise ValueError("ferry.ps delivers rows to the CPU or a CUDA device, not %s" % dev)
    if not torch.cuda.is_available():
        raise RuntimeError("device=%s, but this torch sees no CUDA device" % dev)
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    if worker._cuda is not None:
        if worker._cuda.device == dev:
            return worker._cuda
        raise ValueError("the worker already delivers to %s" % worker._cuda.device)
    return CudaArena(worker, dev)
