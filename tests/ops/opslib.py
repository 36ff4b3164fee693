"""Shared helpers for the ops tests: real ferryd processes, notify sockets,
deadlines instead of sleeps. Every wait is bounded."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ferryd import die_with_parent  # noqa: E402

SKIP = 77


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def wait_until(pred, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)  # polling another process's state with a deadline
    raise Fail("timed out after %.1fs waiting for %s" % (timeout, what))


def can_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Daemon:
    """A real ferryd in its own runtime dir. `env` extras (NOTIFY_SOCKET)."""

    def __init__(self, ferryd, args=(), env=None, workdir=None, rt=None, preexec=None):
        """rt: the runtime dir (default WORKDIR/rt); preexec: run in the child before exec (limits)."""
        self.dir = workdir or tempfile.mkdtemp(prefix="ferry-ops-")
        self.rt = rt or os.path.join(self.dir, "rt")
        self.log_path = os.path.join(self.dir, "ferryd.log")
        self.control = os.path.join(self.rt, "control.sock")
        self.socket = os.path.join(self.rt, "ferryd.sock")
        e = dict(os.environ)
        e.pop("NOTIFY_SOCKET", None)
        e.update(env or {})
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [ferryd, "--runtime-dir", self.rt, "--transport", "tcp"] + list(args),
            stdout=self.log, stderr=subprocess.STDOUT, env=e, preexec_fn=die_with_parent(preexec))

    def wait_ready(self, timeout=10.0):
        # "ready:" is logged after the signal handlers exist: a SIGTERM sent
        # before that would take the default action (the sockets listen earlier).
        wait_until(lambda: self.proc.poll() is not None or ("] ready: " in self.log_text() and can_connect(self.control)),
                   timeout, "ferryd ready")
        check(self.proc.poll() is None, "ferryd exited early:\n" + self.log_text())

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail("ferryd did not stop within %.0fs after signal %d" % (timeout, sig))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class NotifySocket:
    """What systemd does for Type=notify: a datagram socket whose name goes in
    $NOTIFY_SOCKET. abstract=True uses the '@name' form."""

    def __init__(self, abstract, directory):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "ferry-ops-notify-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.sock.bind("\0" + name)
            self.env_value = "@" + name
        else:
            path = os.path.join(directory, "notify.sock")
            self.sock.bind(path)
            self.env_value = path

    def next(self, timeout=10.0):
        """One datagram as a dict of its assignments (and the raw text)."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536).decode()
        except socket.timeout:
            raise Fail("no notify message within %.0fs" % timeout)
        fields = {"_raw": data}
        for line in data.split("\n"):
            if "=" in line:
                k, v = line.split("=", 1)
                fields[k] = v
        return fields

    def until(self, key, timeout=10.0):
        """Skips messages until one carries `key`; returns it and what was skipped."""
        skipped = []
        deadline = time.monotonic() + timeout
        while True:
            m = self.next(max(0.1, deadline - time.monotonic()))
            if key in m:
                return m, skipped
            skipped.append(m)

    def close(self):
        self.sock.close()


def read_until(proc, token, timeout=10.0):
    """Reads proc's stdout (a binary pipe) until `token` appears or the
    deadline passes; returns the text read. Never blocks past the deadline."""
    import select
    deadline = time.monotonic() + timeout
    out = b""
    fd = proc.stdout.fileno()
    while token.encode() not in out:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Fail("timed out after %.1fs waiting for %r; got %r" % (timeout, token, out.decode(errors="replace")))
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            raise Fail("process ended before %r; got %r" % (token, out.decode(errors="replace")))
        out += chunk
    return out.decode(errors="replace")


def run(cmd, timeout=30, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def main(tests):
    """Runs each (name, fn); prints PASS/FAIL lines; exit 1 on any failure."""
    failed = 0
    for name, fn in tests:
        t0 = time.monotonic()
        try:
            fn()
            print("PASS %s (%.2fs)" % (name, time.monotonic() - t0), flush=True)
        except Skip as s:
            print("SKIP %s: %s" % (name, s), flush=True)
        except Exception as e:  # a test failure of any kind is reported, others still run
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
    sys.exit(1 if failed else 0)


class Skip(Exception):
    pass
