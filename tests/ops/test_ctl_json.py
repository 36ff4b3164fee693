#!/usr/bin/env python3
"""Every ferryctl command against a real ferryd: --json is valid JSON with
the contract fields; metrics is Prometheus text; drain refuses new attaches
while an attached client finishes its call.
usage: test_ctl_json.py FERRYD FERRYCTL HELLO"""
import json
import os
import re
import subprocess
import sys

from opslib import Daemon, check, main, run, wait_until

FERRYD, FERRYCTL, HELLO = [os.path.abspath(a) for a in sys.argv[1:4]]


def ctl(d, *args, ok=True):
    r = run([FERRYCTL, "--control", d.control] + list(args), timeout=20)
    if ok:
        check(r.returncode == 0, "ferryctl %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def ctl_json(d, *args):
    out = ctl(d, *args, "--json").stdout
    lines = [l for l in out.splitlines() if l.strip()]
    check(lines, "ferryctl %s --json printed nothing" % " ".join(args))
    try:
        return [json.loads(l) for l in lines]
    except ValueError as e:
        raise AssertionError("ferryctl %s --json: invalid JSON (%s): %r" % (" ".join(args), e, out))


def fields(obj, names, what):
    check(isinstance(obj, dict), "%s is not an object: %r" % (what, obj))
    missing = [n for n in names if n not in obj]
    check(not missing, "%s lacks %s: %r" % (what, missing, obj))


def with_client(d, fn):
    """Runs fn() while a hello client is attached (serving + endpoint open)."""
    go = os.path.join(d.dir, "go-%d" % len(os.listdir(d.dir)))
    p = subprocess.Popen([HELLO, "--socket", d.socket, "--go-file", go], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        # Attached *and* done with serve + open (hello does both before waiting).
        ready = lambda: [c.get("endpoints") for c in ctl_json(d, "clients")[0]] == [1]
        wait_until(lambda: p.poll() is not None or ready(), 10, "client attached, serving, endpoint open")
        if p.poll() is not None:  # (reading p.stdout while it runs would block)
            raise AssertionError("hello exited early: %s" % p.stdout.read())
        fn()
        open(go, "w").close()
        out, _ = p.communicate(timeout=15)
        return p.returncode, out
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_status_clients_counters():
    with Daemon(FERRYD) as d:
        d.wait_ready()

        def inspect():
            (s,) = ctl_json(d, "status")
            fields(s, ["version", "uptime_s", "transport", "clients", "peers", "counters", "pid", "draining"], "status")
            check(s["transport"] == "tcp" and s["clients"] == 1 and isinstance(s["peers"], list), "status: %r" % s)
            check(s["pid"] == d.proc.pid and s["draining"] is False, "status pid/draining: %r" % s)
            for c in ["rnr_naks", "retransmits", "recoveries", "credit_stalls", "window_stalls"]:
                check(isinstance(s["counters"].get(c), int), "status.counters.%s: %r" % (c, s["counters"]))
            (cl,) = ctl_json(d, "clients")
            check(isinstance(cl, list) and len(cl) == 1, "clients: %r" % cl)
            fields(cl[0], ["id", "pid", "uid", "name", "memory", "endpoints", "services"], "clients[0]")
            check(cl[0]["name"] == "hello" and cl[0]["endpoints"] == 1 and cl[0]["services"] == 1, "client: %r" % cl)
            (co,) = ctl_json(d, "counters")
            check(isinstance(co, dict) and all(isinstance(v, int) for v in co.values()), "counters: %r" % co)
            check(set(co) >= {"rnr_naks", "retransmits"}, "counters keys: %r" % co)

        rc, out = with_client(d, inspect)
        check(rc == 0 and "reply to 'hello, ferry'" in out, "hello: %d %s" % (rc, out))
        check(d.stop() == 0, "exit")


def test_peers_channels():
    with Daemon(FERRYD) as d:
        d.wait_ready()
        (p,) = ctl_json(d, "peers")
        check(isinstance(p, list), "peers: %r" % p)
        for e in p:
            fields(e, ["addr", "state"], "peer")
        (c,) = ctl_json(d, "channels")
        check(isinstance(c, list), "channels: %r" % c)
        for e in c:
            fields(e, ["peer", "state"], "channel")
        check(d.stop() == 0, "exit")


def test_metrics():
    with Daemon(FERRYD) as d:
        d.wait_ready()
        text = ctl(d, "metrics").stdout
        check("# TYPE ferry_uptime_seconds gauge" in text, "metrics text: %r" % text[:200])
        sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfNa]+$')
        for line in text.splitlines():
            check(line.startswith("#") or sample.match(line), "not a Prometheus sample: %r" % line)
        (m,) = ctl_json(d, "metrics")
        check(isinstance(m, dict) and m.get("ferry_clients") == 0, "metrics --json: %r" % m)
        check(any(k.startswith("ferry_info{") for k in m), "metrics --json lacks ferry_info: %r" % m)
        check(d.stop() == 0, "exit")


def test_top_json():
    with Daemon(FERRYD) as d:
        d.wait_ready()
        frames = ctl_json(d, "top", "--count", "2", "--interval", "0.2")
        check(len(frames) == 2, "top frames: %r" % frames)
        fields(frames[0], ["uptime_s", "counters"], "top frame 1")
        fields(frames[1], ["uptime_s", "counters", "rates", "interval_s"], "top frame 2")
        check(d.stop() == 0, "exit")


def test_drain():
    with Daemon(FERRYD) as d:
        d.wait_ready()

        def drain_then_try_new():
            (r,) = ctl_json(d, "drain")
            check(r.get("draining") is True, "drain result: %r" % r)
            (s,) = ctl_json(d, "status")
            check(s["draining"] is True and s["clients"] == 1, "status after drain: %r" % s)
            late = run([HELLO, "--socket", d.socket, "--name", "late"], timeout=20)
            check(late.returncode == 1 and "attach: Busy" in late.stderr,
                  "attach after drain: %d %s %s" % (late.returncode, late.stdout, late.stderr))

        rc, out = with_client(d, drain_then_try_new)
        # The client attached before the drain still completes its call.
        check(rc == 0 and "reply to 'hello, ferry'" in out, "in-flight client after drain: %d %s" % (rc, out))
        wait_until(lambda: ctl_json(d, "status")[0]["clients"] == 0, 10, "client detached")
        check(d.stop() == 0, "exit")


def test_unreachable_daemon_exit_1():
    r = run([FERRYCTL, "--control", "/nonexistent/control.sock", "status", "--json"])
    check(r.returncode == 1 and r.stderr, "unreachable: %d %r" % (r.returncode, r.stderr))


if __name__ == "__main__":
    main([(k, v) for k, v in list(globals().items()) if k.startswith("test_")])
