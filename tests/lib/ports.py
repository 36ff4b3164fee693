"""Ports for test daemons: a ferryd with E engines listens on PORT..PORT+E-1.

free_port() hands out the first of a run of `count` ports that nothing holds
now, outside Linux's ephemeral range (32768-60999) so that a client socket
cannot take one between the choice and the daemon's bind, and never the same
run twice in one process. scripts/lib/daemons.sh's ferry_free_port and
tests/multihost/cluster.cpp's pick_free_port follow the same rule.
"""
import random
import socket

PORTS_PER_DAEMON = 4
_handed_out = set()


def free_port(count=PORTS_PER_DAEMON):
    for _ in range(500):
        base = random.randint(20000, 32000 - count)
        run = range(base, base + count)
        if any(p in _handed_out for p in run):
            continue
        ok = True
        for p in run:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            _handed_out.update(run)
            return base
    raise RuntimeError("no run of %d free ports between 20000 and 32000" % count)
