"""Chaos: callers (or ferry.ps workers), echo servers (or shard servers) and
a peer daemon killed, stopped and restarted at random while calls are in
flight (chaos_roles.py).

Two ferryd of three engines each (A: the callers and one server, so local
calls cross engines; B: two servers, reached over tcp lanes). For
FERRY_CHAOS_S seconds (default 40) a seeded schedule (FERRY_CHAOS_SEED,
printed) picks one event every 0.3-1 s: SIGKILL a server or a caller and
start it again, SIGSTOP one for up to 3 s, SIGSTOP daemon B past its
peers' 3 s timeout or not, or kill daemon B and start a new one in its
directory on the same port (at least once, by half time; the echo servers
end with it and are started again). Every call must complete, with its own
bytes echoed or a status the user guide gives for a call, within 30 s of
the wait for it (a caller
exits non-zero otherwise and the test fails at once); after the chaos every
caller must complete calls again (recovery), daemon A must still run,
and it must count no client once all are gone. The ps test does the same
for half the time with three ferry.ps workers on A and two shard servers
on B (which keep their rows over B's restarts and serve them again), and
kills ferryd A once and starts it again in its directory: every
pull and push completes (rows of the right shape, finite) or fails with
such a status within 30 s, and afterwards every worker, the same Worker
object, completes operations again.
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
        self.procs, self.specs = {}, {}
        self.expected_exit = {}  # name -> the exit codes allowed now

    def start(self, name, *args):
        self.specs[name] = args
        log = open(os.path.join(self.workdir, name + ".log"), "a")
        self.procs[name] = subprocess.Popen([sys.executable, ROLES] + [str(a) for a in args], stdout=log,
                                            stderr=subprocess.STDOUT)
        self.expected_exit.pop(name, None)

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
        """Fails on a process that exited on its own, unless allowed (those of a replaced daemon)."""
        for name, p in self.procs.items():
            rc = p.poll()
            if rc is None or rc in self.expected_exit.get(name, ()):
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


class Chaos:
    """The seeded schedule: ferryd A (the callers' side) and B (the served
    side, replaced on the same port now and then), and the processes of
    `cast` attached to B (`b_side`: name -> its arguments given B's socket),
    which end, with an exit code in `b_exits`, when B does."""

    def __init__(self, cast, b_side, b_exits, b_reattach=False):
        seed = int(os.environ.get("FERRY_CHAOS_SEED", str(random.randrange(1 << 30))))
        print("FERRY_CHAOS_SEED=%d" % seed)
        self.rng = random.Random(seed)
        self.cast, self.b_side, self.b_exits, self.b_reattach = cast, b_side, b_exits, b_reattach
        self.engines = ["--engines", "3"]
        self.a = start_daemon(listen="127.0.0.1:%d" % free_port(), extra=self.engines)
        self.b_listen = "127.0.0.1:%d" % free_port()
        self.b = start_daemon(listen=self.b_listen, extra=self.engines)
        self.events = {"kill": 0, "stop": 0, "stop B": 0, "restart B": 0, "restart A": 0}
        self.restart_a_at = None  # a fraction of the run: ferryd A killed and started again in its directory

    def start_b_side(self):
        for name, args in self.b_side.items():
            self.cast.start(name, *args(self.b.socket))

    def restart_b(self, stopped):
        # B killed and started again in its directory, on the same port. What
        # was attached to the old one ends (an echo server), or attaches
        # again with what it holds (a shard server, `b_reattach`).
        self.events["restart B"] += 1
        for name in self.b_side:
            self.cast.expected_exit[name] = self.b_exits
            self.cast.signal(name, signal.SIGCONT)
            stopped.pop(name, None)
        self.b.restart()
        if not self.b_reattach:
            for name in self.b_side:  # each learns its daemon is gone, and ends
                self.cast.procs[name].wait(15)
            self.start_b_side()

    def revive_b_side(self):
        # One that ended as its daemon went (one still starting when B
        # restarted, say) is started again.
        for name, args in self.b_side.items():
            rc = self.cast.procs[name].poll()
            if rc is not None and rc in self.cast.expected_exit.get(name, ()):
                self.cast.start(name, *args(self.b.socket))

    def run(self, seconds):
        cast, rng = self.cast, self.rng
        stopped = {}  # name -> when to SIGCONT
        b_restarted_at = time.monotonic()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.3, 1.0))
            now = time.monotonic()
            for name in [n for n, at in stopped.items() if now > at]:
                cast.signal(name, signal.SIGCONT)
                del stopped[name]
            self.revive_b_side()
            cast.check_alive()
            self.check_daemons()
            roll = rng.random()
            halfway = now > end - seconds / 2
            if self.restart_a_at is not None and not self.events["restart A"] and \
                    now > end - seconds * (1 - self.restart_a_at):
                self.restart_a()
            elif (roll < 0.04 and now - b_restarted_at > 8) or (halfway and self.events["restart B"] == 0):
                b_restarted_at = now
                self.restart_b(stopped)
            elif roll < 0.07:
                self.events["stop B"] += 1
                self.b.proc.send_signal(signal.SIGSTOP)
                time.sleep(rng.uniform(1.0, 5.0))
                self.b.proc.send_signal(signal.SIGCONT)
            else:
                name = rng.choice(sorted(cast.procs))
                if roll < 0.55:
                    self.events["kill"] += 1
                    cast.kill(name)
                    stopped.pop(name, None)
                    cast.start(name, *cast.specs[name])
                elif roll < 0.8 and name not in stopped:
                    self.events["stop"] += 1
                    cast.signal(name, signal.SIGSTOP)
                    stopped[name] = now + rng.uniform(0.5, 3.0)
        for name in stopped:
            cast.signal(name, signal.SIGCONT)
        print("events", self.events)

    def restart_a(self):
        # The callers' ferryd killed and started again in its directory (an
        # upgrade's restart): its clients that can carry on, do.
        self.events["restart A"] += 1
        self.a.restart()

    def check_daemons(self):
        assert self.a.proc.poll() is None, "ferryd A died:\n" + self.a.tail()
        assert self.b.proc.poll() is None, "ferryd B died:\n" + self.b.tail()

    def recovered(self, progress_files, at_least=5, within=45):
        """Every process of `progress_files` (the one running now) completes
        `at_least` more, the last of them after this call began (a count
        saved late may hold operations from before the last event)."""
        cast = self.cast
        since = time.monotonic()

        def ok_now(name):
            p = progress(progress_files[name])
            return p["ok"] if p.get("pid") == cast.procs[name].pid else 0

        def done(name):
            return ok_now(name) >= before[name] + at_least and progress(progress_files[name]).get("last_ok", 0) > since

        before = {name: ok_now(name) for name in progress_files}
        deadline = time.monotonic() + within
        while not all(done(name) for name in progress_files):
            self.revive_b_side()
            cast.check_alive()
            assert time.monotonic() < deadline, "no recovery: %s" % {
                name: (before[name], progress(out)) for name, out in progress_files.items()}
            time.sleep(0.2)
        cast.check_alive()
        self.check_daemons()

    def finish(self, progress_files):
        """Stops everything; the totals of the last processes; A counts no client."""
        self.cast.stop_all()
        totals = {}
        for out in progress_files.values():
            for k, v in progress(out).items():
                if k not in ("pid", "reattached", "last_ok"):
                    totals[k] = totals.get(k, 0) + v
        print("totals", totals)
        deadline = time.monotonic() + 10
        while clients_of(self.a) != 0:
            assert time.monotonic() < deadline, "A still counts %s clients" % clients_of(self.a)
            time.sleep(0.1)
        return totals

    def close(self):
        self.cast.stop_all()
        self.a.stop()
        self.b.stop()


def test_every_call_completes_through_kills_stops_and_a_peer_restart(tmp_path):
    cast = Cast(str(tmp_path))
    chaos = Chaos(cast, {name: (lambda sock, n=name: ("serve", sock, n)) for name in ("rs0", "rs1")}, (0,))
    try:
        chaos.start_b_side()
        cast.start("ls0", "serve", chaos.a.socket, "ls0")
        targets = ",".join([chaos.b_listen + "/rs0", chaos.b_listen + "/rs1", "ls0"])
        callers = {"c%d" % i: str(tmp_path / ("c%d.json" % i)) for i in range(4)}
        for i, (name, out) in enumerate(callers.items()):
            cast.start(name, "call", chaos.a.socket, targets, [1, 4, 8, 8][i], out)
        chaos.run(CHAOS_S)
        chaos.recovered(callers)
        assert chaos.finish(callers)["ok"] > 100
    finally:
        chaos.close()


def test_every_ps_operation_completes_through_shard_and_peer_restarts(tmp_path):
    # ferry.ps workers on A, two shard servers on B: a shard killed, stopped
    # or gone with its ferryd is found again by the same workers once it is
    # started again (the worker opens its target again), and the workers'
    # own ferryd A restarted once is attached to again.
    import ferry.ps as ps
    tables = json.dumps([ps.Embedding("emb", rows=50_000, dim=16, optimizer=ps.Adagrad(lr=0.1)).to_dict()])
    cast = Cast(str(tmp_path))
    shards = {"shard%d" % i: (lambda sock, i=i: ("shard", sock, tables, "%d/2" % i)) for i in range(2)}
    # A shard server keeps its rows over a restart of B and serves them again
    # (one still starting then may exit 1, "ferryd went away": started again).
    chaos = Chaos(cast, shards, (0, 1), b_reattach=True)
    try:
        chaos.restart_a_at = 0.7  # the workers' own ferryd restarts once: the same Worker objects go on
        chaos.start_b_side()
        workers = {"w%d" % i: str(tmp_path / ("w%d.json" % i)) for i in range(3)}
        for name, out in workers.items():
            cast.start(name, "ps", chaos.a.socket, chaos.b_listen, tables, out)
        chaos.run(CHAOS_S / 2)
        chaos.recovered(workers, at_least=3)
        # Once more with every worker's Worker made and nothing else going on:
        # each of them must attach again.
        chaos.restart_a()
        chaos.recovered(workers, at_least=3)
        reattached = {name: progress(out).get("reattached") for name, out in workers.items()}
        assert all(n and n >= 1 for n in reattached.values()), reattached
        # And B, with every shard serving: each keeps its rows and serves them again.
        chaos.restart_b({})
        chaos.recovered(workers, at_least=3)
        for name in shards:
            assert "ferryd went away and is back: serving" in cast.log(name), cast.log(name)
        assert chaos.finish(workers)["ok"] > 20
    finally:
        chaos.close()
