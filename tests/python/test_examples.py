"""The examples a user pastes (client/python/examples/) run as they are, against a real ferryd."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "client", "python", "examples")


def test_quickstart_runs_and_learns(daemon):
    path = os.path.join(EXAMPLES, "quickstart.py")
    with open(path) as f:
        assert len(f.read().rstrip("\n").splitlines()) <= 20  # the README's budget
    env = dict(os.environ, FERRY_SOCKET=daemon.socket)
    p = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120, env=env)
    print(p.stdout, p.stderr[-2000:])
    assert p.returncode == 0
    losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", p.stdout)]
    assert len(losses) == 5
    assert losses[-1] < 0.5 * losses[0], losses  # it learned, through the parameter server
