"""Chaos: callers, echo servers and a peer daemon killed, stopped and
restarted at random while calls are in flight (chaos_roles.py).

Two ferryd of three engines each (A: the callers and one server, so local
calls cross engines; B: two servers, reached over tcp lanes). For
FERRY_CHAOS_S seconds (default 40) a seeded schedule (FERRY_CHAOS_SEED,
printed) picks one event every 0.3-1 s: SIGKILL a server or a caller and
start it again, SIGSTOP one for up to 3 s, SIGSTOP daemon B past its
peers' 3 s timeout or not, or kill daemon B and start a new one on the same
port. Every call must complete, with its own bytes echoed or a status the
user guide gives for a call, within 30 s of the wait for it (a caller
exits non-zero otherwise and the test fails at once); after the chaos every
caller must complete calls again (recovery), daemon A must still run,
and it must count no client once all are gone.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import HERE, free_port, start_daemon

CHAOS_S = float(os.environ.get("FERRY_CHAOS_S", "40"))
ROLES = os.path.join(HERE, "chaos_roles.py")
FERRYCTL = os.path.join(os.environ.get("FERRY_BUILD_ROOT", ""), "control", "ferryctl")


class Cast:
    """The chaos's processes by name, started again after each kill."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs, self.specs, self.expected_exit = {}, {}, set()

    def start(self, name, *args):
        self.specs[name] = args
        log = open(os.path.join(self.workdir, name + ".log"), "a")
        self.procs[name] = subprocess.Popen([sys.executable, ROLES] + [str(a) for a in args], stdout=log,
                                            stderr=subprocess.STDOUT)
        self.expected_exit.discard(name)

    def log(self, name):
        with open(os.path.join(self.workdir, name + ".log")) as f:
            return f.read()[-3000:]

    def signal(self, name, sig):
        if self.procs[name].poll() is None:
            self.procs[name].send_signal(sig)

    def kill(self, name):
        self.procs[name].kill()
        self.procs[name].wait(10)

    def check_alive(self):
        """Fails on a process that exited on its own, unless allowed (servers of a replaced daemon)."""
        for name, p in self.procs.items():
            rc = p.poll()
            if rc is None or (rc == 0 and name in self.expected_exit):
                continue
            pytest.fail("%s exited with %d:\n%s" % (name, rc, self.log(name)))

    def stop_all(self):
        for name, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def progress(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"ok": 0}


def clients_of(daemon):
    r = subprocess.run([FERRYCTL, "--control", daemon.control, "status", "--json"], capture_output=True, text=True,
                       timeout=10)
    return json.loads(r.stdout)["clients"] if r.returncode == 0 else None


def test_every_call_completes_through_kills_stops_and_a_peer_restart(tmp_path):
    seed = int(os.environ.get("FERRY_CHAOS_SEED", str(random.randrange(1 << 30))))
    print("FERRY_CHAOS_SEED=%d" % seed)
    rng = random.Random(seed)
    engines = ["--engines", "3"]
    a = start_daemon(listen="127.0.0.1:%d" % free_port(), extra=engines)
    b_listen = "127.0.0.1:%d" % free_port()
    b = start_daemon(listen=b_listen, extra=engines)
    cast = Cast(str(tmp_path))
    try:
        targets = ",".join([b_listen + "/rs0", b_listen + "/rs1", "ls0"])
        for name in ("rs0", "rs1"):
            cast.start(name, "serve", b.socket, name)
        cast.start("ls0", "serve", a.socket, "ls0")
        callers = {"c%d" % i: str(tmp_path / ("c%d.json" % i)) for i in range(4)}
        for i, (name, out) in enumerate(callers.items()):
            cast.start(name, "call", a.socket, targets, [1, 4, 8, 8][i], out)
        stopped = {}  # name -> when to SIGCONT
        events = {"kill": 0, "stop": 0, "stop B": 0, "restart B": 0}
        b_restarted_at = time.monotonic()
        end = time.monotonic() + CHAOS_S
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.3, 1.0))
            now = time.monotonic()
            for name in [n for n, at in stopped.items() if now > at]:
                cast.signal(name, signal.SIGCONT)
                del stopped[name]
            cast.check_alive()
            assert a.proc.poll() is None, "ferryd A died:\n" + a.tail()
            assert b.proc.poll() is None, "ferryd B died:\n" + b.tail()
            roll = rng.random()
            if roll < 0.04 and now - b_restarted_at > 8:
                # A new B on the same port: its servers are gone with the old one.
                events["restart B"] += 1
                b_restarted_at = now
                for name in ("rs0", "rs1"):
                    cast.expected_exit.add(name)
                b.kill()
                b.stop()  # its directory
                for name in ("rs0", "rs1"):  # each learns its daemon is gone, and ends
                    cast.signal(name, signal.SIGCONT)
                    stopped.pop(name, None)
                    cast.procs[name].wait(15)
                b = start_daemon(listen=b_listen, extra=engines)
                for name in ("rs0", "rs1"):
                    cast.start(name, "serve", b.socket, name)
            elif roll < 0.07:
                events["stop B"] += 1
                b.proc.send_signal(signal.SIGSTOP)
                time.sleep(rng.uniform(1.0, 5.0))
                b.proc.send_signal(signal.SIGCONT)
            else:
                name = rng.choice(sorted(cast.procs))
                if roll < 0.55:
                    events["kill"] += 1
                    cast.kill(name)
                    stopped.pop(name, None)
                    cast.start(name, *cast.specs[name])
                elif roll < 0.8 and name not in stopped:
                    events["stop"] += 1
                    cast.signal(name, signal.SIGSTOP)
                    stopped[name] = now + rng.uniform(0.5, 3.0)
        for name in stopped:
            cast.signal(name, signal.SIGCONT)
        print("events", events)

        # Recovery: every caller (the process running now) completes calls again.
        def ok_now(name):
            p = progress(callers[name])
            return p["ok"] if p.get("pid") == cast.procs[name].pid else 0

        before = {name: ok_now(name) for name in callers}
        deadline = time.monotonic() + 20
        while any(ok_now(name) < before[name] + 5 for name in callers):
            cast.check_alive()
            assert time.monotonic() < deadline, "no recovery: %s" % {
                name: (before[name], progress(out)) for name, out in callers.items()}
            time.sleep(0.2)
        cast.check_alive()
        assert a.proc.poll() is None, "ferryd A died:\n" + a.tail()
    finally:
        cast.stop_all()
    totals = {}
    for out in callers.values():
        for k, v in progress(out).items():
            if k == "pid":
                continue
            totals[k] = totals.get(k, 0) + v
    print("calls", totals)
    assert totals["ok"] > 100
    deadline = time.monotonic() + 10
    while clients_of(a) != 0:
        assert time.monotonic() < deadline, "A still counts %s clients" % clients_of(a)
        time.sleep(0.1)
    a.stop()
    b.stop()
