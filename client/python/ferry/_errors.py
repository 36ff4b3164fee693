"""ferry's exceptions: one class per libferry status, plus the package's own.

Every exception ferry raises is a ``ferry.Error``; its ``status`` attribute is
the status name (``"DaemonGone"``, ``"Timeout"``, ...), the same names
``ferryctl`` and the C++ API print. ``ferry.Timeout`` is also a ``TimeoutError``
and ``ferry.BadRequest`` also a ``ValueError``, so generic handlers work.
"""


from typing import List, Optional


class Error(Exception):
    """Base of every ferry error; ``status`` names the ferry status."""

    status = "Error"

    def __init__(self, message: Optional[str] = None) -> None:
        super().__init__(message or self.status)


def _make(name, doc, *bases):
    cls = type(name, (Error,) + bases, {"status": name, "__doc__": doc})
    globals()[name] = cls
    return cls


# libferry's statuses (ferry/status.h), in their numeric order.
STATUSES = [
    ("BadRequest", "A malformed or out-of-range argument or request.", ValueError),
    ("NoMemory", "The arena or the client's quota is exhausted.", MemoryError),
    ("ServiceNotFound", "No service of that name at the target daemon.", LookupError),
    ("ServiceExists", "Another client already serves that name."),
    ("EndpointClosed", "Operation on a closed or unknown endpoint."),
    ("ResponseTooLarge", "The response did not fit the caller's buffer."),
    ("PeerUnreachable", "The remote daemon could not be reached in time.", ConnectionError),
    ("PeerReset", "The remote daemon died or restarted mid-operation.", ConnectionError),
    ("ServiceGone", "The serving process went away mid-call.", ConnectionError),
    ("CallerGone", "The caller of a request no longer exists."),
    ("DaemonGone", "The local ferryd went away.", ConnectionError),
    ("Timeout", "The operation's deadline passed.", TimeoutError),
    ("NotSupported", "The transport or daemon lacks the operation."),
    ("Busy", "Back-pressure: retry later."),
    ("ProtocolError", "A peer violated the protocol."),
    ("Cancelled", "Cancelled before it ran (endpoint or client closed)."),
    ("VersionMismatch", "ABI or protocol version not supported."),
    ("PermissionDenied", "Credentials or authentication rejected.", PermissionError),
    ("Forked", "A client used in a child of fork(): only the process that attached it may use it; attach anew."),
]
for _entry in STATUSES:
    _make(*_entry)

# The package's own conditions.
_make("BufferFreed", "The buffer was freed, or its client closed: its memory is gone.")
_make("BufferInUse", "The buffer has live views (memoryview, numpy, torch) or an operation in flight.")
_make("Closed", "The client (or worker) is closed.")


def by_status(name: str) -> type:
    """The exception class for a status name (``Error`` for an unknown one)."""
    cls = globals().get(name)
    return cls if isinstance(cls, type) and issubclass(cls, Error) else Error


__all__: List[str] = ["Error", "by_status"] + [str(e[0]) for e in STATUSES] + ["BufferFreed", "BufferInUse", "Closed"]
