"""Type stubs of ferry._ferry, the compiled core of the ferry package (pybind11
over libferry and libferry-ps). Users import ``ferry`` and ``ferry.ps``; these
stubs let editors and type checkers see the classes those re-export."""

from typing import Any, Callable, Dict, Generator, List, Optional, Union

from . import ps as ps

__version__: str

class _Export:
    """One live view of ferry memory (the Py_buffer's owner object)."""

class Handle:
    """An operation in flight (send, call or reply)."""

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Block until done; a call's response length (None for send and reply)."""
    def done(self) -> bool:
        """Whether the operation completed."""
    @property
    def status(self) -> Optional[str]:
        """The status name once done (None while in flight)."""
    @property
    def op(self) -> str:
        """send, call or reply."""
    @property
    def client(self) -> "Client":
        """The client that submitted it."""
    def __await__(self) -> Generator[Any, None, Optional[int]]:
        """``await handle``: wait() inside an asyncio loop."""

class Buffer:
    """A block of the client's tx arena (buffer protocol, zero copy)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...
    @property
    def client(self) -> "Client":
        """The client whose arena holds it."""
    @property
    def capacity(self) -> int:
        """Bytes the block really has (len() is what was asked for)."""
    @property
    def offset(self) -> int:
        """The block's offset in the shared segment."""
    @property
    def freed(self) -> bool:
        """Whether it was given back."""
    @property
    def exports(self) -> int:
        """Live views (memoryview, numpy, torch) of this buffer."""
    @property
    def in_flight(self) -> int:
        """Operations using this buffer that have not completed."""
    def free(self) -> None:
        """Give the block back (same as ``client.free(buffer)``)."""
    def __enter__(self) -> "Buffer": ...
    def __exit__(self, *exc: object) -> bool: ...

class Delivery:
    """A message or request delivered to a service this client serves (read-only, zero copy)."""

    def __len__(self) -> int: ...
    @property
    def kind(self) -> str:
        """'request' or 'message'."""
    @property
    def client(self) -> "Client":
        """The client it was delivered to."""
    @property
    def service(self) -> int:
        """The id of the service it was sent to."""
    @property
    def token(self) -> int:
        """What a reply names (requests)."""
    @property
    def source(self) -> int:
        """The sending endpoint's id."""
    @property
    def released(self) -> bool:
        """Whether it was handed back."""
    @property
    def exports(self) -> int:
        """Live views of its payload."""
    def release(self) -> None:
        """Hand the delivery back to the daemon (same as ``client.release(delivery)``)."""

class Client:
    """A process's attachment to its ferryd (``ferry.attach()``)."""

    def alloc(self, nbytes: int) -> Buffer:
        """A Buffer of nbytes in the tx arena (raises NoMemory when full)."""
    def free(self, buffer: Buffer) -> None:
        """Give a buffer back."""
    def serve(self, name: str, timeout: float = 10.0) -> int:
        """Serve a named service; its id."""
    def unserve(self, service: int, timeout: float = 10.0) -> None:
        """Stop serving a service."""
    def open(self, target: str, timeout: float = 10.0) -> int:
        """Open 'SERVICE' (this host) or 'HOST:PORT/SERVICE'; an endpoint id."""
    def close_endpoint(self, endpoint: int, timeout: float = 10.0) -> None:
        """Close an endpoint."""
    def send(self, endpoint: int, buffer: Buffer, length: Optional[int] = None) -> Handle:
        """A one-way message of buffer[:length]."""
    def call(self, endpoint: int, request: Buffer, response: Buffer, length: Optional[int] = None,
             timeout: Optional[float] = None) -> Handle:
        """request[:length] out; the answer lands in response (zero copy)."""
    def reply(self, request: Delivery, buffer: Optional[Buffer] = None, length: Optional[int] = None) -> Handle:
        """Answer a request with buffer[:length]."""
    def release(self, delivery: Delivery) -> None:
        """Hand a delivery back to the daemon."""
    def poll(self) -> List[Delivery]:
        """Collect completions without blocking; the deliveries that arrived."""
    def wait(self, timeout: float) -> List[Delivery]:
        """Block up to timeout seconds until something completes or arrives; DaemonGone once nothing more can."""
    def recv(self, timeout: Optional[float] = None) -> Optional[Delivery]:
        """The next delivery, or None after timeout; DaemonGone once ferryd is gone and none is left."""
    async def recv_async(self) -> Delivery:
        """The next delivery, awaited in an asyncio loop; DaemonGone once ferryd is gone and none is left."""
    def fileno(self) -> int:
        """Readable when completions may be ready."""
    def close(self) -> None:
        """Detach from ferryd now."""
    def _pump(self) -> bool: ...
    @property
    def closed(self) -> bool:
        """Whether it was closed."""
    @property
    def state(self) -> str:
        """Ok while attached, else the reason (DaemonGone, Closed, ...)."""
    @property
    def max_message_bytes(self) -> int:
        """The largest message, request or response the daemon carries."""
    @property
    def client_id(self) -> int:
        """The daemon's id for this client."""
    @property
    def in_flight(self) -> int:
        """Operations submitted and not completed."""
    @property
    def stats(self) -> Dict[str, int]:
        """dropped_completions, deferred_releases, release_failures, inline_deliveries."""
    def __enter__(self) -> "Client": ...
    def __exit__(self, *exc: object) -> bool: ...

def attach(socket: str = "", name: str = "", tx_bytes: int = 0, rx_bytes: int = 0, sq_entries: int = 0,
           cq_entries: int = 0, busy_poll: bool = False, log_level: int = 0) -> Client:
    """Attach to ferryd (use ferry.attach())."""

def default_socket_path() -> str:
    """$FERRY_SOCKET, else /run/ferry/ferryd.sock."""
