#!/usr/bin/env python3
"""An idle ferryd sleeps on every engine: with --engines 4, after a client
came, called and went, the daemon uses under 1 % of a core (user + system
time from /proc) over 10 s. A CPU bound, not a timing: an engine that spins
or polls while idle burns far more than this whatever the machine's load.
usage: test_idle.py FERRYD OPS_HELLO"""
import os
import subprocess
import sys
import time

from opslib import Daemon, check, main

FERRYD, OPS_HELLO = [os.path.abspath(a) for a in sys.argv[1:3]]
WINDOW_S = 10.0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_four_idle_engines_use_under_one_percent_of_a_core():
    with Daemon(FERRYD, ["--engines", "4"]) as d:
        d.wait_ready()
        for _ in range(4):  # one client per engine (least loaded placement), each gone again
            p = subprocess.run([OPS_HELLO], env=dict(os.environ, FERRY_SOCKET=d.socket), capture_output=True,
                               text=True, timeout=30)
            check(p.returncode == 0, "hello: %d %s%s" % (p.returncode, p.stdout, p.stderr))
        time.sleep(0.5)  # the spin after the last work ends
        before, t0 = cpu_s(d.proc.pid), time.monotonic()
        time.sleep(WINDOW_S)
        used, wall = cpu_s(d.proc.pid) - before, time.monotonic() - t0
        print("idle ferryd, 4 engines: %.3f s CPU in %.1f s (%.2f %% of a core)" % (used, wall, 100 * used / wall))
        check(used / wall < 0.01, "an idle ferryd with 4 engines used %.3f s CPU in %.1f s" % (used, wall))


if __name__ == "__main__":
    main([("four_idle_engines_use_under_one_percent_of_a_core", test_four_idle_engines_use_under_one_percent_of_a_core)])
