"""The bookkeeping of ferry.ps.Worker for operations started with
wait=False: kept until they finish, waited for by synchronize(). One that
fails while nobody waits for it is not lost: synchronize() raises the
first such failure (a push refused by its shard, a timeout)."""

from __future__ import annotations

from typing import Any, List, Optional


class Unwaited:
    """Mixin; the class sets ``self._unwaited = []`` in its constructor."""

    _unwaited: List[Any]
    _unwaited_error: Optional[BaseException] = None

    def _finish(self, pending: Any, wait: bool) -> Optional[Any]:
        if wait:
            pending.wait()
            return None
        still = []
        for p in self._unwaited:
            if p.done():
                self._collect(p, 0)  # its outcome is read now, so a failure is kept
            else:
                still.append(p)
        still.append(pending)
        self._unwaited = still
        return pending

    def _collect(self, p: Any, timeout: Optional[float]) -> None:
        try:
            p.wait(timeout)
        except Exception as e:  # noqa: BLE001 - any failure of the operation is the caller's to see
            if self._unwaited_error is None:
                self._unwaited_error = e

    def synchronize(self, timeout: Optional[float] = None) -> None:
        """Wait for every operation started with wait=False; raises the first
        failure among them, including one that finished before this call."""
        pending, self._unwaited = self._unwaited, []
        for p in pending:
            self._collect(p, timeout)
        error, self._unwaited_error = self._unwaited_error, None
        if error is not None:
            raise error
