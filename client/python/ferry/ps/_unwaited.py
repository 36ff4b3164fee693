"""The bookkeeping of ferry.ps.Worker for operations started with
wait=False: kept until they finish, waited for by synchronize()."""

from __future__ import annotations

from typing import Any, List, Optional


class Unwaited:
    """Mixin; the class sets ``self._unwaited = []`` in its constructor."""

    _unwaited: List[Any]

    def _finish(self, pending: Any, wait: bool) -> Optional[Any]:
        if wait:
            pending.wait()
            return None
        self._unwaited = [p for p in self._unwaited if not p.done()]
        self._unwaited.append(pending)
        return pending

    def synchronize(self, timeout: Optional[float] = None) -> None:
        """Wait for every operation started with wait=False (raises the first failure)."""
        pending, self._unwaited = self._unwaited, []
        for p in pending:
            p.wait(timeout)
