#!/usr/bin/env python3
"""Smoke check of ferry-bench's --json contract (tests/perf/README.md).

Runs one scenario for a few hundred operations and checks that the last
stdout line is one JSON object with the contract fields, that the numbers
are coherent (ops as asked, p50 <= p99 <= p999, responses verified, CPU
charged) and, for a sweep, that there is one line per size. Scenarios that
go through ferryd start their own daemon in a temporary runtime dir and
are skipped (77) when the daemon binary is not built.
Correctness only: nothing here depends on how fast the machine is.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ferryd import Ferryd, FerrydFailed  # noqa: E402
from ports import free_port  # noqa: E402  (a run of ports per ferryd: one per engine)

SKIP = 77
CONTRACT = ["scenario", "size", "ops", "mean_us", "p50_us", "p99_us", "p999_us", "cpu_us_per_op", "bytes_per_s"]
ITERS = 300
SIZES = [64, 4096, 65536]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, timeout=60, env=None):
    print("$ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.stderr:
        print(p.stderr.rstrip())
    return p


def check_line(line, scenario, size, expect_daemon):
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        fail("not JSON: %r (%s)" % (line, e))
    if not isinstance(obj, dict):
        fail("not an object: %r" % line)
    missing = [k for k in CONTRACT if k not in obj]
    if missing:
        fail("missing contract fields %s in %s" % (missing, line))
    if obj["scenario"] != scenario or obj["size"] != size:
        fail("wrong scenario/size in %s" % line)
    if obj["ops"] != ITERS:
        fail("ops %s != %d" % (obj["ops"], ITERS))
    if not (0 < obj["p50_us"] <= obj["p99_us"] <= obj["p999_us"]):
        fail("percentiles out of order: %s" % line)
    if not (obj["mean_us"] > 0 and obj["cpu_us_per_op"] > 0 and obj["bytes_per_s"] > 0):
        fail("non-positive mean/cpu/bandwidth: %s" % line)
    if obj.get("verified_ops", 0) < 1:
        fail("no response was verified byte for byte: %s" % line)
    if expect_daemon and obj.get("daemon_cpu_included") is not True:
        fail("daemon CPU not included: %s" % line)
    return obj


def check_scenario(bench, scenario, extra, expect_daemon):
    sizes = ",".join(str(s) for s in SIZES)
    p = run([bench, scenario, "--sizes", sizes, "--iters", str(ITERS), "--warmup", "20", "--json"] + extra)
    if p.returncode != 0:
        fail("%s exited %d; stdout: %s" % (scenario, p.returncode, p.stdout))
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    if len(lines) != len(SIZES):
        fail("expected %d JSON lines (one per size), got %d: %s" % (len(SIZES), len(lines), p.stdout))
    for line, size in zip(lines, SIZES):
        check_line(line, scenario, size, expect_daemon)
    # Single size: the last line is the object.
    p = run([bench, scenario, "--size", "1000", "--iters", str(ITERS), "--json"] + extra)
    if p.returncode != 0:
        fail("%s --size 1000 exited %d" % (scenario, p.returncode))
    check_line(p.stdout.strip().splitlines()[-1], scenario, 1000, expect_daemon)


def with_two_daemons(ferryd, body):
    """Runs body(client_daemon, server_daemon) with two listening ferryds on
    loopback; dumps both logs when it fails or times out, stops both."""
    client = Ferryd(ferryd, listen="127.0.0.1:%d" % free_port(), wait_listener=True, prefix="ferry-bench-smoke-")
    server = None
    try:
        server = Ferryd(ferryd, listen="127.0.0.1:%d" % free_port(), wait_listener=True, prefix="ferry-bench-smoke-")
        body(client, server)
    except (subprocess.TimeoutExpired, SystemExit) as e:
        client.dump()
        if server:
            server.dump()
        if isinstance(e, SystemExit):
            raise
        fail("timed out: %s" % e)
    finally:
        client.stop()
        if server:
            server.stop()


def check_remote_rpc(bench, ferryd):
    p = run([bench, "remote-rpc", "--json"])
    if p.returncode != 2 or "--target" not in p.stderr:
        fail("remote-rpc without --target should be a usage error naming --target, got %d" % p.returncode)
    with_two_daemons(ferryd, lambda client, server: check_scenario(
        bench, "remote-rpc", ["--socket", client.socket, "--server-socket", server.socket, "--target", server.listen,
                              "--concurrency", "2"], expect_daemon=True))


def check_cli(bench):
    for bad in (["bogus"], ["uds-rpc", "--iters", "0"], ["uds-rpc", "--size", "x"],
                ["uds-rpc", "--iters", "5", "--duration", "1"], ["uds-rpc", "--concurrency", "2", "--iters", "5"]):
        p = run([bench] + bad)
        if p.returncode != 2:
            fail("%s should be a usage error (2), got %d" % (bad, p.returncode))
    p = run([bench, "uds-rpc", "--duration", "0.2", "--json"])
    if p.returncode != 0 or json.loads(p.stdout.strip().splitlines()[-1])["ops"] < 1:
        fail("--duration run failed: %s" % p.stdout)


def main():
    try:
        checks()
    except FerrydFailed as e:
        fail(str(e))


def checks():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--ferryd", required=True)
    ap.add_argument("--scenario", required=True)
    a = ap.parse_args()

    if a.scenario == "cli":
        check_cli(a.bench)
    elif a.scenario == "remote-rpc":
        if not os.access(a.ferryd, os.X_OK):
            print("SKIP: %s not built" % a.ferryd)
            sys.exit(SKIP)
        check_remote_rpc(a.bench, a.ferryd)
    elif a.scenario in ("uds-rpc", "tcp-rpc", "tcp-relay-rpc", "shm-pingpong"):
        check_scenario(a.bench, a.scenario, [], expect_daemon=False)
    else:
        if not os.access(a.ferryd, os.X_OK):
            print("SKIP: %s not built" % a.ferryd)
            sys.exit(SKIP)
        daemon = Ferryd(a.ferryd, prefix="ferry-bench-smoke-")
        try:
            check_scenario(a.bench, a.scenario, ["--socket", daemon.socket], expect_daemon=True)
        except subprocess.TimeoutExpired as e:
            daemon.dump()
            fail("timed out: %s" % e)
        except SystemExit:
            daemon.dump()
            raise
        finally:
            daemon.stop()
    print("OK")


if __name__ == "__main__":
    main()
