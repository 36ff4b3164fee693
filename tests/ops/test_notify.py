#!/usr/bin/env python3
"""ferryd's sd_notify protocol against a real notify socket (what systemd
creates for Type=notify), plus SIGHUP reload and stop/crash exit codes.
usage: test_notify.py FERRYD HELLO"""
import os
import signal
import subprocess
import sys
import tempfile

from opslib import Daemon, NotifySocket, can_connect, check, main, run, wait_until

FERRYD, HELLO = [os.path.abspath(a) for a in sys.argv[1:3]]


def start(abstract, config_text=None, extra=()):
    d = tempfile.mkdtemp(prefix="ferry-ops-notify-")
    n = NotifySocket(abstract, d)
    args = list(extra)
    if config_text is not None:
        cfg = os.path.join(d, "ferryd.conf")
        with open(cfg, "w") as f:
            f.write(config_text)
        args += ["--config", cfg]
    return n, Daemon(FERRYD, args, env={"NOTIFY_SOCKET": n.env_value}, workdir=d)


def lifecycle(abstract):
    n, d = start(abstract)
    with d:
        ready, before = n.until("READY")
        check(ready["READY"] == "1", "READY=1 expected, got %r" % ready["_raw"])
        check(not before, "messages before READY=1: %r" % before)
        # READY means "serving": both sockets must already accept.
        check(can_connect(d.control) and os.path.exists(d.socket), "READY=1 sent before the sockets listen")
        check(ready.get("STATUS") == "serving 0 clients, 0 peers", "READY status: %r" % ready.get("STATUS"))

        # A client attaching changes STATUS within ~1 s.
        go = os.path.join(d.dir, "go")
        hello = subprocess.Popen([HELLO, "--socket", d.socket, "--go-file", go],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            m, _ = n.until("STATUS", timeout=5)
            check(m["STATUS"] == "serving 1 client, 0 peers", "STATUS after attach: %r" % m["_raw"])
            open(go, "w").close()
            out, _ = hello.communicate(timeout=15)
            check(hello.returncode == 0, "hello failed: %s" % out)
        finally:
            if hello.poll() is None:
                hello.kill()
        m, _ = n.until("STATUS", timeout=5)
        check(m["STATUS"] == "serving 0 clients, 0 peers", "STATUS after detach: %r" % m["_raw"])

        rc = d.stop(signal.SIGTERM)
        m, _ = n.until("STOPPING", timeout=5)
        check(m["STOPPING"] == "1", "STOPPING=1 expected: %r" % m["_raw"])
        check(rc == 0, "SIGTERM exit status %d, expected 0" % rc)
    n.close()


def test_lifecycle_abstract():
    lifecycle(True)


def test_lifecycle_path():
    lifecycle(False)


def test_reload():
    n, d = start(True, "log-level = info\nmax-clients = 256\n")
    cfg = os.path.join(d.dir, "ferryd.conf")
    with d:
        n.until("READY")
        # Live key + restart-only key.
        with open(cfg, "w") as f:
            f.write("log-level = debug\nmax-clients = 8\n")
        d.proc.send_signal(signal.SIGHUP)
        m, _ = n.until("RELOADING")
        check(m["RELOADING"] == "1" and "MONOTONIC_USEC" in m, "RELOADING=1 message: %r" % m["_raw"])
        m, _ = n.until("READY")
        check("1 applied, 1 need a restart" in m.get("STATUS", ""), "READY after reload: %r" % m["_raw"])
        log = wait_until(lambda: "max-clients changed" in d.log_text() and d.log_text(), 5, "reload log lines")
        check("log-level changed info -> debug (applied)" in log, "log-level change not logged:\n" + log)
        check("max-clients changed 256 -> 8: needs a restart" in log, "restart-only change not logged:\n" + log)
        # debug level is live: the next reload logs at debug... and status still says 256 clients max
        # (nothing observable through ferryctl), so check a second, invalid reload keeps the daemon up.
        with open(cfg, "w") as f:
            f.write("log-level = loud\n")
        d.proc.send_signal(signal.SIGHUP)
        n.until("RELOADING")
        m, _ = n.until("READY")
        check("reload rejected" in m.get("STATUS", "") and "log-level" in m.get("STATUS", ""),
              "invalid reload status: %r" % m["_raw"])
        check(d.proc.poll() is None and can_connect(d.control), "ferryd died on an invalid reload")
        check(d.stop() == 0, "exit after reloads")
    n.close()


def test_startup_failure_is_nonzero_without_ready():
    # Crash-like start-up failure (systemd's Restart=on-failure case): a second
    # daemon on a live runtime dir must exit non-zero and never claim READY.
    n1, d1 = start(True)
    with d1:
        n1.until("READY")
        n2 = NotifySocket(True, d1.dir)
        p = subprocess.run([FERRYD, "--runtime-dir", d1.rt, "--transport", "tcp"], capture_output=True, text=True,
                           timeout=15, env=dict(os.environ, NOTIFY_SOCKET=n2.env_value))
        check(p.returncode == 1, "second ferryd exit %d, expected 1: %s" % (p.returncode, p.stdout + p.stderr))
        check("another daemon is listening" in p.stdout + p.stderr, "no reason given: " + p.stdout + p.stderr)
        n2.sock.setblocking(False)
        try:
            got = n2.sock.recv(65536)
        except BlockingIOError:
            got = b""
        check(b"READY=1" not in got, "failed daemon sent READY=1")
        n2.close()
        d1.stop()
    n1.close()


def test_killed_daemon_is_nonzero():
    # A crash (SIGSEGV/SIGABRT) ends the process by a signal: non-zero for systemd.
    n, d = start(True)
    with d:
        n.until("READY")
        d.proc.send_signal(signal.SIGABRT)
        rc = d.proc.wait(10)
        check(rc != 0, "SIGABRT gave exit status 0")
    n.close()


def test_bad_notify_socket_is_harmless():
    d = Daemon(FERRYD, env={"NOTIFY_SOCKET": "relative/not-allowed"})
    with d:
        d.wait_ready()
        check("NOTIFY_SOCKET" in d.log_text(), "bad NOTIFY_SOCKET not reported")
        check(d.stop() == 0, "exit status")


if __name__ == "__main__":
    main([(k, v) for k, v in list(globals().items()) if k.startswith("test_")])
