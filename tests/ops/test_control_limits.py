#!/usr/bin/env python3
"""The control socket under hostile clients:
a connection cap that never locks an administrator out, an idle deadline
for connections that hold a partial line or say nothing, bounded memory
for clients that pipeline requests and never read their answers, and the
privileged drain/resume (root, ferryd's user or admin-group only).
Real ferryd, real sockets; the hostile side runs as 'nobody' where the
check is about another user. Every wait is bounded.
usage: test_control_limits.py FERRYD FERRYCTL OPS_CLIENTS"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from opslib import Daemon, Skip, check, main, read_until, run

FERRYD, FERRYCTL, OPS_CLIENTS = [os.path.abspath(a) for a in sys.argv[1:4]]
NOBODY = 65534
# The hostile scripts run as nobody, who cannot reach the pyenv python under /root.
CHILD_PY = "/usr/bin/python3"


def open_dir():
    """A work dir nobody can traverse (0755), so a socket-group member reaches the sockets."""
    d = tempfile.mkdtemp(prefix="ferry-ops-ctl-")
    os.chmod(d, 0o755)
    return d


def need_root():
    if os.geteuid() != 0:
        raise Skip("needs root (to act as another user)")


def request(path, cmd, timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall((json.dumps({"cmd": cmd}) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return json.loads(buf.decode())
    finally:
        s.close()


def as_nobody(script, *args, timeout=60):
    """Runs a Python snippet as nobody:nogroup; returns its stdout lines."""
    r = subprocess.run([CHILD_PY, "-c", script] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, user=NOBODY, group=NOBODY, extra_groups=[])
    check(r.returncode == 0, "child as nobody failed (%d): %s" % (r.returncode, r.stderr))
    return r.stdout.split()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


# As nobody: open N control connections, then report for each whether the
# daemon refused it (an error line, then EOF) or kept it open (silence).
HOLD_CONNECTIONS = r"""
import json, select, socket, sys
path, n = sys.argv[1], int(sys.argv[2])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    socks.append(s)
refused = kept = 0
for s in socks:
    r, _, _ = select.select([s], [], [], 1.0)
    if r:
        data = s.recv(4096)
        if b"too many control connections" in data:
            refused += 1
            continue
    kept += 1
print(kept, refused)
"""


def test_connection_cap_keeps_admins_in():
    need_root()
    with Daemon(FERRYD, ["--socket-group", "nogroup", "--control-max-connections", "4",
                         "--control-idle-timeout-ms", "20000"], workdir=open_dir()) as d:
        d.wait_ready()
        # nobody holds 4 connections; 8 more are refused at once, with a reason.
        holder = subprocess.Popen([CHILD_PY, "-c", HOLD_CONNECTIONS + "\nsys.stdout.flush(); sys.stdin.read()\n",
                                   d.control, "12"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  user=NOBODY, group=NOBODY, extra_groups=[])
        try:
            line = read_until(holder, "\n", 30).split()
            check(line == ["4", "8"], "kept/refused connections of one user: %r (expected 4 kept, 8 refused)" % line)
            # An administrator still gets in while the other user holds the cap.
            r = run([FERRYCTL, "--control", d.control, "status", "--json"], timeout=10)
            check(r.returncode == 0, "root's ferryctl status refused while nobody holds the cap: " + r.stderr)
            check("refused a connection of pid" in d.log_text(), "refusals not logged:\n" + d.log_text())
        finally:
            holder.stdin.close()
            holder.wait(timeout=10)
        check(d.stop() == 0, "exit")


def test_idle_connections_are_closed():
    with Daemon(FERRYD, ["--control-idle-timeout-ms", "500"]) as d:
        d.wait_ready()
        partial = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        for s in (partial, silent):
            s.settimeout(5.0)
            s.connect(d.control)
        partial.sendall(b'{"cmd":"sta')  # a line that never ends
        t0 = time.monotonic()
        for name, s in (("partial line", partial), ("silent", silent)):
            try:
                data = s.recv(4096)
            except socket.timeout:
                raise AssertionError("%s connection still open after 5 s (idle timeout 500 ms)" % name)
            check(data == b"", "%s connection got data instead of EOF: %r" % (name, data))
            s.close()
        check(time.monotonic() - t0 < 4.0, "idle connections closed late")
        # A connection that keeps asking within the deadline stays open: 1.2 s
        # in all, more than twice the timeout, a request every 150 ms (350 ms
        # of slack for a late wake-up on a loaded machine).
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5.0)
        s.connect(d.control)
        f = s.makefile("rb")
        for _ in range(8):
            time.sleep(0.15)
            s.sendall(b'{"cmd":"counters"}\n')
            check(json.loads(f.readline()).get("ok") is True, "answer on a busy connection")
        s.close()
        check(d.stop() == 0, "exit")


def test_pipelined_requests_without_reading_stay_bounded():
    # 150 attached clients make each `clients` answer ~20 KB; 64 connections
    # each pipeline 64 KB of requests and never read. Before the bound, every
    # 4 KB read was answered whole (~240 answers, ~5 MB per connection).
    with Daemon(FERRYD, ["--control-output-bytes", "64k", "--control-max-connections", "100",
                         "--control-idle-timeout-ms", "3000", "--max-clients-per-uid", "256",
                         "--tx-arena-bytes", "1m", "--rx-arena-bytes", "1m"]) as d:
        d.wait_ready()
        holder = subprocess.Popen([OPS_CLIENTS, "--socket", d.socket, "--count", "150", "--name",
                                   "ops-clients-with-a-long-name-x"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            out = read_until(holder, "holding", 60)
            check(out.count(" Ok") == 150, "not every client attached:\n" + out)
            answer = len(json.dumps(request(d.control, "clients")))
            check(answer > 15000, "clients answer only %d bytes" % answer)
            before = rss_kib(d.proc.pid)
            line = b'{"cmd":"clients"}\n' * 3800
            socks = []
            for _ in range(64):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(d.control)
                s.setblocking(False)
                try:
                    s.send(line)  # as much as the kernel takes; never read
                except BlockingIOError:
                    pass
                socks.append(s)
            time.sleep(1.5)
            grown = rss_kib(d.proc.pid) - before
            print("ferryd grew %d KiB with 64 non-reading connections" % grown, flush=True)
            check(grown < 48 * 1024, "ferryd grew %d KiB with 64 non-reading connections (bound ~64 KiB + one "
                  "answer each)" % grown)
            # The daemon still answers others promptly.
            t0 = time.monotonic()
            check(request(d.control, "status").get("ok") is True, "status while flooded")
            check(time.monotonic() - t0 < 2.0, "status took %.1fs while flooded" % (time.monotonic() - t0))
            # The idle deadline then closes the connections that never read.
            for s in socks:
                s.setblocking(True)
                s.settimeout(8.0)
            closed = 0
            for s in socks:
                try:
                    while s.recv(1 << 20):  # drain what was answered, up to the EOF
                        pass
                    closed += 1
                except ConnectionResetError:
                    closed += 1
                except socket.timeout:
                    pass
                s.close()
            check(closed == 64, "only %d of 64 non-reading connections were closed" % closed)
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
        check(d.stop() == 0, "exit")


ASK = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall((json.dumps({"cmd": sys.argv[2]}) + "\n").encode())
r = json.loads(s.makefile().readline())
print("ok" if r["ok"] else "refused:" + r["error"].replace(" ", "_"))
"""


def attach_status(d):
    r = run([OPS_CLIENTS, "--socket", d.socket, "--count", "1", "--hold-s", "0"], timeout=20)
    return r.stdout.split()[2]


def test_drain_is_privileged_and_resume_undoes_it():
    need_root()
    with Daemon(FERRYD, ["--socket-group", "nogroup"], workdir=open_dir()) as d:
        d.wait_ready()
        out = as_nobody(ASK, d.control, "drain")
        check(out[0].startswith("refused:permission_denied"), "drain by a socket-group member: %r" % out)
        check(request(d.control, "status")["result"]["draining"] is False, "drained by an unprivileged user")
        check(as_nobody(ASK, d.control, "resume")[0].startswith("refused:permission_denied"), "resume by nobody")
        check(as_nobody(ASK, d.control, "status") == ["ok"], "read-only commands stay open to the group")
        # Root drains; attaches are refused; resume undoes it.
        r = run([FERRYCTL, "--control", d.control, "drain", "--json"])
        check(r.returncode == 0 and json.loads(r.stdout)["draining"] is True, "drain: " + r.stdout + r.stderr)
        check(attach_status(d) == "Busy", "attach while draining")
        r = run([FERRYCTL, "--control", d.control, "resume", "--json"])
        check(r.returncode == 0 and json.loads(r.stdout)["draining"] is False, "resume: " + r.stdout + r.stderr)
        check(request(d.control, "status")["result"]["draining"] is False, "still draining after resume")
        check(attach_status(d) == "Ok", "attach after resume")
        check(d.stop() == 0, "exit")
    # admin-group: its members may drain.
    with Daemon(FERRYD, ["--socket-group", "nogroup", "--admin-group", "nogroup"], workdir=open_dir()) as d:
        d.wait_ready()
        check(as_nobody(ASK, d.control, "drain") == ["ok"], "drain by an admin-group member refused")
        check(as_nobody(ASK, d.control, "resume") == ["ok"], "resume by an admin-group member refused")
        check(d.stop() == 0, "exit")


if __name__ == "__main__":
    main([(k, v) for k, v in list(globals().items()) if k.startswith("test_")])
