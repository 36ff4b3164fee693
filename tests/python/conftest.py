"""Fixtures for the Python suites: real ferryd processes in private runtime
directories (transport tcp), helper processes, and a per-test alarm so that
no test can hang (every wait inside a test is bounded as well).

Run by meson (suite 'python') as ``/usr/bin/python3 -m pytest`` with
PYTHONPATH=build/client/python and FERRYD / FERRYCTL set.
"""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ferryd import Ferryd, FerrydFailed, die_with_parent  # noqa: E402
from ports import free_port  # noqa: E402  (a run of ports per ferryd: one per engine)

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# The benchmarks, baselines and demos that are not part of the package.
EXAMPLES = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "python"))
FERRYD = os.environ.get("FERRYD", "")
TEST_ALARM_S = int(os.environ.get("FERRY_TEST_ALARM_S", "120"))


def start_daemon(listen=None, extra=()):
    """ferryd --runtime-dir DIR --transport tcp [--listen ADDR] (tests/lib/ferryd.py), up."""
    if not FERRYD or not os.path.exists(FERRYD):
        pytest.fail("FERRYD is not set to a built ferryd (got %r)" % FERRYD)
    try:
        return Ferryd(FERRYD, args=extra, listen=listen, prefix="ferry-py-")
    except FerrydFailed as e:
        pytest.fail(str(e))


@pytest.fixture
def daemon():
    d = start_daemon()
    yield d
    d.stop()


@pytest.fixture
def two_daemons():
    a = start_daemon(listen="127.0.0.1:%d" % free_port())
    b = start_daemon(listen="127.0.0.1:%d" % free_port())
    yield a, b
    a.stop()
    b.stop()


class Helper:
    """A helper Python process (tests/python/helpers.py ROLE ...) that prints 'ready' when set up."""

    def __init__(self, role, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "helpers.py"), role] + [str(a) for a in args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e,
                                     preexec_fn=die_with_parent())
        self.lines = []
        deadline = time.monotonic() + 30
        while True:
            line = self.proc.stdout.readline()
            if not line:
                pytest.fail("helper %s exited before it was ready:\n%s" % (role, "".join(self.lines)))
            self.lines.append(line)
            if line.startswith("ready"):
                self.ready = line.split()[1:]
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail("helper %s not ready in time:\n%s" % (role, "".join(self.lines)))

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def stop(self, timeout=10):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        rest = self.proc.stdout.read()
        self.lines.append(rest)
        return "".join(self.lines)


@pytest.fixture
def helpers():
    started = []

    def start(role, *args, env=None):
        h = Helper(role, *args, env=env)
        started.append(h)
        return h

    yield start
    for h in started:
        h.stop()


@pytest.fixture(autouse=True)
def alarm():
    """Fails a test that runs past FERRY_TEST_ALARM_S (ferry's waits let signals through)."""

    def expired(*_):
        raise TimeoutError("test exceeded %d s" % TEST_ALARM_S)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_ALARM_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def shard_process(daemon, tables, spec="0/1", *extra):
    """`python3 -m ferry.ps.server` serving shard SPEC of tables on daemon; it prints 'ready ...' when serving."""
    tj = json.dumps([t.to_dict() for t in tables])
    return subprocess.Popen([sys.executable, "-m", "ferry.ps.server", "--socket", daemon.socket, "--tables", tj,
                             "--shard", spec, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=die_with_parent())
