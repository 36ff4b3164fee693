"""A ferryd for the Python tests and benches: `ferryd --runtime-dir DIR
--transport tcp [--listen ADDR] ARGS...` in a fresh temporary directory,
waited for (both sockets, and with wait_listener its peer listener) with a
deadline, stopped and cleaned up. The Python side of what
scripts/lib/daemons.sh's ferry_start_daemon is for the shell; the ops
tests' Daemon (tests/ops/opslib.py) stays their own, as it drives
start-up itself (readiness notification, limits, signals).
"""
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

_PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the forked child
except (OSError, AttributeError):
    _prctl = None


def die_with_parent(then=None):
    """A preexec_fn for Popen: the child is killed (SIGKILL) when this
    process dies, so a test killed at its timeout or crashed leaves no
    ferryd behind. The parent-death signal follows the thread that forks,
    so it is asked for only from the main thread. `then` (another
    preexec_fn) runs after it."""
    parent = os.getpid()
    main = threading.current_thread() is threading.main_thread()

    def preexec():
        if main and _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent:  # it died before the prctl
                os._exit(126)
        if then is not None:
            then()
    return preexec


class FerrydFailed(RuntimeError):
    """ferryd exited or did not come up in time; the message ends with its log's tail."""


def listens_on(pid, port):
    """Whether process `pid` has a listening TCP socket on `port` (/proc, IPv4 and IPv6)."""
    try:
        inodes = set()
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        for table in ("tcp", "tcp6"):
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port and cols[9] in inodes:
                        return True
    except OSError:
        return False
    return False


class Ferryd:
    """One ferryd, up when the constructor returns (FerrydFailed otherwise)."""

    def __init__(self, ferryd, args=(), listen=None, wait_listener=False, prefix="ferry-test-", timeout=20.0):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.socket = os.path.join(self.dir, "ferryd.sock")
        self.control = os.path.join(self.dir, "control.sock")
        self.listen = listen
        self.log_path = os.path.join(self.dir, "ferryd.log")
        self.log = open(self.log_path, "w+")
        self.cmd = [ferryd, "--runtime-dir", self.dir, "--transport", "tcp"] + list(args)
        if listen:
            self.cmd += ["--listen", listen]
        self._start(wait_listener, timeout)

    def _start(self, wait_listener, timeout):
        listen = self.listen
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent())
        port = int(listen.rsplit(":", 1)[1]) if listen and wait_listener else None
        deadline = time.monotonic() + timeout
        # A condition polled with a deadline, not a sleep.
        while not (os.path.exists(self.socket) and os.path.exists(self.control) and
                   (port is None or listens_on(self.proc.pid, port))):
            if self.proc.poll() is not None:
                self._give_up("ferryd exited with %d during start-up" % self.proc.returncode)
            if time.monotonic() > deadline:
                self._give_up("ferryd's sockets%s did not appear within %.0f s" %
                              (" (and its listener on %s)" % listen if port else "", timeout))
            time.sleep(0.02)

    def restart(self, timeout=20.0):
        """SIGKILL, then a new ferryd in the same directory (the same socket
        paths), up when this returns: a daemon restarted under its clients."""
        self.kill()
        for path in (self.socket, self.control):  # what the killed one left
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._start(False, timeout)

    def _give_up(self, why):
        tail = self.tail()
        self.stop()
        raise FerrydFailed("%s; its log ends:\n%s" % (why, tail))

    @property
    def pid(self):
        return self.proc.pid

    def tail(self, chars=4000):
        """The end of its log."""
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()[-chars:]

    def dump(self):
        """Prints the end of its log (a failing test's evidence)."""
        print("--- ferryd log ---\n" + self.tail())

    def kill(self):
        """SIGKILL (a daemon dying under its clients)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self):
        """SIGTERM (SIGKILL after 10 s), then its directory goes."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
