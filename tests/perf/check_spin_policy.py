#!/usr/bin/env python3
"""The engines' in-flight spin turns off when answers come late (daemon/loop/spin_policy.h).

Two daemons on loopback (tcp lanes); `ferry-bench remote-rpc` with a server
that holds each call 10 ms (--server-delay-us) before it answers. Every call
must still complete (the bench verifies each response) and take at least the
delay; both daemons must then report `spin_skips` > 0 in `ferryctl status
--json`: they slept instead of spinning a millisecond per call for answers
that come ten milliseconds later. A counter check, not a timing check: the
policy turns the spin off after four late answers, and 60 calls are made.
"""
import argparse
import json
import os
import sys

from check_bench_json import SKIP, fail, run, with_two_daemons

DELAY_US = 10000
ITERS = 60


def counters(ferryctl, daemon):
    p = run([ferryctl, "--control", os.path.join(daemon.dir, "control.sock"), "status", "--json"], timeout=20)
    if p.returncode != 0:
        fail("ferryctl status exited %d" % p.returncode)
    return json.loads(p.stdout)["counters"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--ferryd", required=True)
    ap.add_argument("--ferryctl", required=True)
    a = ap.parse_args()
    for exe in (a.ferryd, a.ferryctl):
        if not os.access(exe, os.X_OK):
            print("SKIP: %s not built" % exe)
            sys.exit(SKIP)

    def body(client, server):
        p = run([a.bench, "remote-rpc", "--size", "64", "--iters", str(ITERS), "--warmup", "10", "--json",
                 "--server-delay-us", str(DELAY_US), "--socket", client.socket, "--server-socket", server.socket,
                 "--target", server.listen], timeout=60)
        if p.returncode != 0:
            fail("remote-rpc exited %d: %s" % (p.returncode, p.stdout))
        obj = json.loads(p.stdout.strip().splitlines()[-1])
        if obj["ops"] != ITERS or obj.get("verified_ops", 0) < 1:
            fail("calls missing or unverified: %s" % obj)
        # The server held every call: no round trip can be shorter than that.
        if obj["p50_us"] < DELAY_US:
            fail("median round trip %.0f us is under the server's delay of %d us: the delay did not apply" %
                 (obj["p50_us"], DELAY_US))
        for name, d in (("caller's daemon", client), ("server's daemon", server)):
            c = counters(a.ferryctl, d)
            print("%s: spin_skips %d, engine_sleeps %d" % (name, c["spin_skips"], c["engine_sleeps"]))
            if c["spin_skips"] < 1:
                fail("%s never skipped the in-flight spin although every answer came %d ms late" %
                     (name, DELAY_US // 1000))

    with_two_daemons(a.ferryd, body)
    print("OK")


if __name__ == "__main__":
    main()
