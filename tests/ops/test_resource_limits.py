#!/usr/bin/env python3
"""Resources a local user can take from ferryd:
per-uid and global quotas on attached clients and their segment memory,
the runtime directory's owner and mode, the start-up check of the
descriptor limit, and what the listeners do when accept() runs out of
descriptors (back off, log a bounded number of lines, recover).
Real ferryd and real libferry clients (ops-clients); every wait is bounded.
usage: test_resource_limits.py FERRYD FERRYCTL OPS_CLIENTS"""
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

from opslib import Daemon, Skip, check, main, read_until, run, wait_until

FERRYD, FERRYCTL, OPS_CLIENTS = [os.path.abspath(a) for a in sys.argv[1:4]]
NOBODY = 65534


def need_root():
    if os.geteuid() != 0:
        raise Skip("needs root (to act as another user)")


def open_dir():
    d = tempfile.mkdtemp(prefix="ferry-ops-res-")
    os.chmod(d, 0o755)
    return d


class Clients:
    """ops-clients attaching `count` clients and holding them until closed."""

    def __init__(self, d, count, *args):
        self.proc = subprocess.Popen([OPS_CLIENTS, "--socket", d.socket, "--count", str(count)] + [str(a) for a in args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        out = read_until(self.proc, "holding", 60)
        self.out = out
        self.statuses = [l.split()[2] for l in out.splitlines() if l.startswith("attach ")]
        self.served = [l.split()[2] for l in out.splitlines() if l.startswith("serve ")]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=20)


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_per_uid_client_quota():
    need_root()
    with Daemon(FERRYD, ["--socket-group", "nogroup", "--max-clients", "8", "--max-clients-per-uid", "3",
                         "--tx-arena-bytes", "1m", "--rx-arena-bytes", "1m"], workdir=open_dir()) as d:
        d.wait_ready()
        hog = Clients(d, 5, "--uid", NOBODY, "--gid", NOBODY)
        try:
            check(hog.statuses == ["Ok", "Ok", "Ok", "Busy", "Busy"], "one uid's attaches: %r" % hog.statuses)
            check("max-clients-per-uid 3" in d.log_text(), "quota refusal not logged:\n" + d.log_text())
            other = Clients(d, 2)  # another uid (root) is not affected
            check(other.statuses == ["Ok", "Ok"], "another uid's attaches: %r" % other.statuses)
            other.close()
        finally:
            hog.close()
        check(d.stop() == 0, "exit")


def test_memory_quotas():
    need_root()
    # Each client asks for 16m + 16m (plus its rings, ~32.4m): two pass a 64m
    # per-uid quota, and two of any users pass a 60m total.
    big = ["--tx-bytes", str(16 << 20), "--rx-bytes", str(16 << 20)]
    with Daemon(FERRYD, ["--socket-group", "nogroup", "--max-memory-bytes-per-uid", "64m",
                         "--max-memory-bytes", "60m", "--tx-arena-bytes", "1m", "--rx-arena-bytes", "1m"],
                workdir=open_dir()) as d:
        d.wait_ready()
        a = Clients(d, 3, "--uid", NOBODY, "--gid", NOBODY, *big)
        try:
            check(a.statuses == ["Ok", "NoMemory", "NoMemory"], "per-uid memory quota: %r" % a.statuses)
            check("(max-memory-bytes-per-uid 64m)" in d.log_text(), "per-uid refusal not logged:\n" + d.log_text())
            b = Clients(d, 1, *big)  # root: its own quota has room, the total has not
            check(b.statuses == ["NoMemory"], "global memory quota: %r" % b.statuses)
            check("(max-memory-bytes 60m)" in d.log_text(), "global refusal not logged:\n" + d.log_text())
            b.close()
        finally:
            a.close()
        # Freed memory is available again.
        c = Clients(d, 1, *big)
        check(c.statuses == ["Ok"], "attach after the others left: %r" % c.statuses)
        c.close()
        check(d.stop() == 0, "exit")


def start_fails(rt, text):
    d = Daemon(FERRYD, rt=rt)
    with d:
        try:
            code = d.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError("ferryd --runtime-dir %s started (expected a refusal naming %r)" % (rt, text))
        log = d.log_text()
        check(code == 1 and text in log, "ferryd --runtime-dir %s: exit %s, log lacks %r:\n%s" % (rt, code, text, log))


def test_runtime_dir_owner_and_mode():
    need_root()
    base = open_dir()
    loose = os.path.join(base, "loose")
    os.mkdir(loose)
    os.chmod(loose, 0o777)
    start_fails(loose, "has mode 0777")
    group_w = os.path.join(base, "group-writable")
    os.mkdir(group_w)
    os.chmod(group_w, 0o775)
    start_fails(group_w, "has mode 0775")
    foreign = os.path.join(base, "foreign")
    os.mkdir(foreign, 0o755)
    os.chown(foreign, NOBODY, NOBODY)
    start_fails(foreign, "belongs to uid 65534")
    good = os.path.join(base, "good")
    os.mkdir(good, 0o750)
    with Daemon(FERRYD, rt=good) as d:  # root's and 0750: fine
        d.wait_ready()
        check(d.stop() == 0, "exit")


def limit_nofile(soft, hard):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_descriptor_limit_checked_at_start():
    # 256 clients need ~1300 descriptors: a hard limit of 300 cannot cover them.
    d = Daemon(FERRYD, ["--max-clients", "256"], preexec=limit_nofile(300, 300))
    with d:
        try:
            code = d.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError("ferryd started with max-clients 256 under a hard limit of 300")
        log = d.log_text()
        check(code == 1 and "hard limit is 300" in log and "max-clients 256" in log, "refusal: %s\n%s" % (code, log))
    # A low soft limit under a high hard one is raised.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 4096:
        raise Skip("hard descriptor limit %d too low for the raise case" % hard)
    with Daemon(FERRYD, ["--max-clients", "256"], preexec=limit_nofile(300, hard)) as d:
        d.wait_ready()
        check("raised the soft descriptor limit from 300 to" in d.log_text(), "no raise logged:\n" + d.log_text())
        soft = resource.prlimit(d.proc.pid, resource.RLIMIT_NOFILE)[0]
        check(soft >= 256 * 4, "soft limit after start: %d" % soft)
        check(d.stop() == 0, "exit")


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_accept_out_of_descriptors_backs_off():
    # The daemon's limit is lowered under it to what it holds plus two, then
    # 60 attach and 60 control connections queue up: accept() fails EMFILE.
    with Daemon(FERRYD, ["--max-clients", "4"]) as d:
        d.wait_ready()
        pid = d.proc.pid
        limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        tight = open_fds(pid) + 2
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (tight, limits[1]))
        flood = []
        try:
            for _ in range(60):
                a = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                a.setblocking(False)
                a.connect_ex(d.socket)
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.setblocking(False)
                c.connect_ex(d.control)
                flood += [a, c]
            time.sleep(0.5)  # let the first accept failures happen
            cpu0, t0 = cpu_s(pid), time.monotonic()
            time.sleep(3.0)
            used = cpu_s(pid) - cpu0
            wall = time.monotonic() - t0
            check(used < 0.25 * wall, "ferryd used %.2f s of CPU in %.1f s while accept() fails (spinning)" % (used, wall))
            lines = [l for l in d.log_text().splitlines() if "accept" in l and ("Too many open files" in l)]
            check(1 <= len(lines) <= 4, "%d accept-failure log lines in ~3.5 s (expected 1..4):\n%s" %
                  (len(lines), "\n".join(lines[:10])))
        finally:
            for s in flood:
                s.close()
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        # Recovery: within the back-off's longest wait, both listeners serve again.
        wait_until(lambda: run([FERRYCTL, "--control", d.control, "status"], timeout=10).returncode == 0, 10,
                   "ferryctl status after the flood")
        deadline = time.monotonic() + 15
        while True:
            r = run([OPS_CLIENTS, "--socket", d.socket, "--count", "1", "--hold-s", "0"], timeout=20)
            if "attach 0 Ok" in r.stdout:
                break
            check(time.monotonic() < deadline, "no attach after the flood: " + r.stdout + r.stderr)
            time.sleep(0.2)  # the attach listener may still be backing off
        check(d.stop() == 0, "exit")


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for pid %d" % pid)


def opens_line(c):
    out = [l for l in c.out.splitlines() if l.startswith("opens ")]
    check(len(out) == 1, "no opens line:\n" + c.out)
    _, ok, first_failure = out[0].split()
    return int(ok), first_failure


def test_endpoints_per_client_capped():
    need_root()
    with Daemon(FERRYD, ["--max-endpoints-per-client", "100"], workdir=open_dir()) as d:
        d.wait_ready()
        server = Clients(d, 1, "--serve", "ep-cap")
        try:
            check(server.served == ["Ok"], "serve: %r" % server.served)
            c = Clients(d, 1, "--open", "ep-cap", "--opens", "150")
            ok, failure = opens_line(c)
            check(ok == 100 and failure == "NoMemory", "opens past the cap: %d Ok, then %s" % (ok, failure))
            check("max-endpoints-per-client" in d.log_text(), "cap not logged:\n" + d.log_text())
            c.close()
            # The endpoints went with their client: a new one has its 100 again.
            c = Clients(d, 1, "--open", "ep-cap", "--opens", "100")
            check(opens_line(c) == (100, "Ok"), "opens after the first client left: %r" % (opens_line(c),))
            c.close()
        finally:
            server.close()
        check(d.stop() == 0, "exit")
    # The default cap bounds the daemon's heap: one client asking for 20000
    # endpoints gets 4096 and the daemon grows by a few MB, not tens.
    with Daemon(FERRYD, [], workdir=open_dir()) as d:
        d.wait_ready()
        server = Clients(d, 1, "--serve", "ep-heap")
        try:
            before = rss_bytes(d.proc.pid)
            c = Clients(d, 1, "--open", "ep-heap", "--opens", "20000")
            grown = rss_bytes(d.proc.pid) - before
            ok, failure = opens_line(c)
            c.close()
            print("endpoints %d, then %s; daemon RSS grew %.1f MB" % (ok, failure, grown / 1e6))
            check(ok == 4096 and failure == "NoMemory", "default cap: %d Ok, then %s" % (ok, failure))
            check(grown < 8 * 1024 * 1024, "daemon RSS grew %d bytes for %d endpoints" % (grown, ok))
        finally:
            server.close()
        check(d.stop() == 0, "exit")


def test_reserved_service_names():
    need_root()
    with Daemon(FERRYD, ["--socket-group", "nogroup", "--service-owners", "ps-shard-0:root, ps-shard-1:%d" % NOBODY],
                workdir=open_dir()) as d:
        d.wait_ready()
        squatter = Clients(d, 1, "--uid", NOBODY, "--gid", NOBODY, "--serve", "ps-shard-0")
        owner = None
        try:
            check(squatter.served == ["PermissionDenied"], "another uid's serve of a reserved name: %r" % squatter.served)
            check("reserved to uid 0" in d.log_text(), "refusal not logged:\n" + d.log_text())
            owner = Clients(d, 1, "--serve", "ps-shard-0")  # root, the owner
            check(owner.served == ["Ok"], "the owner's serve: %r" % owner.served)
            mine = Clients(d, 1, "--uid", NOBODY, "--gid", NOBODY, "--serve", "ps-shard-1")
            check(mine.served == ["Ok"], "nobody's own reserved name: %r" % mine.served)
            mine.close()
            free = Clients(d, 1, "--uid", NOBODY, "--gid", NOBODY, "--serve", "free-name")
            check(free.served == ["Ok"], "an unreserved name: %r" % free.served)
            free.close()
        finally:
            squatter.close()
            if owner is not None:
                owner.close()
        check(d.stop() == 0, "exit")
    # A bad entry is a configuration error, found by --check-config too.
    r = run([FERRYD, "--check-config", "--runtime-dir", open_dir(), "--service-owners", "x:no-such-user-ferry"])
    out = r.stdout + r.stderr
    check(r.returncode != 0 and "no such user" in out, "bad service-owners: exit %d\n%s" % (r.returncode, out))


if __name__ == "__main__":
    main([(k, v) for k, v in list(globals().items()) if k.startswith("test_")])
