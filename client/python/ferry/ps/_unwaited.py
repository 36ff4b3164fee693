"""The bookkeeping both parameter-server workers (ferry.ps.Worker and the
torch.distributed.rpc baseline's RpcWorker) share for operations started
with wait=False: kept until they finish, waited for by synchronize()."""


class Unwaited:
    """Mixin; the class sets ``self._unwaited = []`` in its constructor."""

    def _finish(self, pending, wait):
        if wait:
            pending.wait()
            return None
        self._unwaited = [p for p in self._unwaited if not p.done()]
        self._unwaited.append(pending)
        return pending

    def synchronize(self, timeout=None):
        """Wait for every operation started with wait=False (raises the first failure)."""
        pending, self._unwaited = self._unwaited, []
        for p in pending:
            p.wait(timeout)
