#!/usr/bin/env python3
"""Integration tests of ferry-ps (client/examples/ps), one case per meson test.

  check-tcp / check-ferry   deterministic mode: every parameter equals the
                            sequential reference (exit 0), over kernel TCP on
                            loopback / through a real ferryd started here
  check-fails               the same check with an injected fault (a dropped
                            push) must exit non-zero: the check can fail
  check-ferry-pool1         check-ferry with one response buffer per shard
                            and 4 workers: requests queue in the shard for the
                            buffer (the shard must say so on stderr) and are
                            each applied once
  check-remote              two ferryds (--listen on loopback), workers on A,
                            shards on B, --target B
  bench-json-ferry / -tcp   `ferry-ps bench --json` prints the contract fields
                            with coherent values and writes the latency dump
  server-reattach           `ferry-ps server` keeps serving across a ferryd
                            restart (it says so; a worker started after it
                            runs); with --reattach-s 0 it exits 1 at once,
                            with --reattach-s 1 after that second
  options                   the command line (boost.program_options) refuses
                            abbreviations, stray words, bad values and unknown
                            commands with exit 2 and a message
Every subprocess runs with a timeout; daemons are stopped on exit.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from ferryd import Ferryd, FerrydFailed  # noqa: E402
from ports import free_port  # noqa: E402  (a run of ports per ferryd: one per engine)

SKIP = 77
SMALL = ["--workers", "2", "--shards", "2", "--keys", "10000", "--dim", "16", "--iters", "50", "--dense", "32"]
CONTRACT = ["pull_mean_us", "pull_p50_us", "pull_p99_us", "push_mean_us", "push_p50_us", "push_p99_us",
            "ops_per_s", "cpu_us_per_op", "pull_p999_us", "push_p999_us", "rss_kb"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, timeout=90):
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    print(p.stdout.rstrip())
    if p.stderr:
        print(p.stderr.rstrip())
    return p


def start(ferryd, listen=None):
    try:
        return Ferryd(ferryd, listen=listen, prefix="ferry-ps-test-")
    except FerrydFailed as e:
        fail(str(e))


def need_ferryd(path):
    if not path or not os.path.exists(path):
        print("SKIP: ferryd not built at %s" % path)
        sys.exit(SKIP)


def check_ok(p, what):
    if p.returncode != 0:
        fail("%s exited %d" % (what, p.returncode))
    if "equal the sequential reference exactly" not in p.stdout:
        fail("%s: no success line" % what)


def check_bench_json(p, transport, dump):
    if p.returncode != 0:
        fail("bench exited %d" % p.returncode)
    last = p.stdout.strip().splitlines()[-1]
    try:
        obj = json.loads(last)
    except json.JSONDecodeError as e:
        fail("last line is not JSON: %r (%s)" % (last, e))
    missing = [k for k in CONTRACT if k not in obj]
    if missing:
        fail("missing fields %s" % missing)
    for op in ("pull", "push"):
        if not (0 < obj[op + "_p50_us"] <= obj[op + "_p99_us"] <= obj[op + "_p999_us"]):
            fail("%s percentiles out of order: %s" % (op, last))
        if obj[op + "_mean_us"] <= 0:
            fail("%s mean not positive" % op)
    if obj["pulls"] != 2 * 40 or obj["pushes"] != 2 * 40:
        fail("expected 80 pulls and 80 pushes (2 workers x 40 iters): %s" % last)
    if not (obj["ops_per_s"] > 0 and obj["cpu_us_per_op"] > 0 and obj["rss_kb"] > 0):
        fail("non-positive ops_per_s/cpu/rss: %s" % last)
    if transport == "ferry" and (obj["daemon_cpu_included"] is not True or obj["cpu_daemons_us"] <= 0):
        fail("daemon CPU not charged: %s" % last)
    with open(dump) as f:
        lines = [l.split() for l in f if not l.startswith("#")]
    if sum(1 for l in lines if l[0] == "pull") != 80 or sum(1 for l in lines if l[0] == "push") != 80:
        fail("latency dump does not hold 80 pull and 80 push samples")


def server_reattach(a, daemons):
    need_ferryd(a.ferryd)
    d = start(a.ferryd)
    daemons.append(d)
    shape = ["--keys", "1000", "--dim", "4"]

    def server(*extra):
        p = subprocess.Popen([a.ps, "server", "--shard", "0/1", "--socket", d.socket] + shape + list(extra),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not p.stdout.readline().startswith("ready ps-shard-0"):
            p.kill()
            fail("ferry-ps server did not start: %s" % (p.communicate(timeout=10),))
        return p

    def worker():
        return run([a.ps, "worker", "--worker-id", "0", "--shards", "1", "--iters", "5", "--socket", d.socket] + shape,
                   timeout=60)

    p = server()
    try:
        if worker().returncode != 0:
            fail("a worker against the server failed")
        d.restart()
        said = ""
        while "is back" not in said:  # blocks until the server says it serves again (the test's timeout bounds it)
            line = p.stderr.readline()
            if not line:
                fail("the server exited instead of serving again: %r" % said)
            said += line
        if "ferryd went away and is back: serving ps-shard-0 again, with its rows (1 time)" not in said:
            fail("the server did not say it serves again: %r" % said)
        if worker().returncode != 0:
            fail("a worker after the restart failed")
        p.terminate()
        out, err = p.communicate(timeout=30)
        if p.returncode != 0 or "served " not in out:
            fail("the server did not stop cleanly: exit %d, %r %r" % (p.returncode, out, err))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for window, said in (("0", "ferryd went away (DaemonGone)\n"),
                         ("1", "ferryd went away (DaemonGone) and was not back within --reattach-s 1 s")):
        p = server("--reattach-s", window)
        d.kill()
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            fail("--reattach-s %s: the server did not exit once ferryd stayed away" % window)
        if p.returncode != 1 or said not in err:
            fail("--reattach-s %s: exit %d, stderr %r" % (window, p.returncode, err))
        d.restart()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ps", required=True)
    ap.add_argument("--ferryd", default=os.environ.get("FERRYD", ""))
    ap.add_argument("--case", required=True)
    a = ap.parse_args()
    case = a.case
    daemons = []
    try:
        if case == "check-tcp":
            check_ok(run([a.ps, "check", "--transport", "tcp"] + SMALL), "check tcp")
        elif case == "check-fails":
            p = run([a.ps, "check", "--transport", "tcp", "--fault-skip-push", "7"] + SMALL)
            if p.returncode == 0 or "differ from the reference" not in p.stderr:
                fail("check passed although worker 0 dropped a push")
        elif case == "check-ferry":
            need_ferryd(a.ferryd)
            d = start(a.ferryd)
            daemons.append(d)
            p = run([a.ps, "check", "--transport", "ferry", "--socket", d.socket] + SMALL)
            if p.returncode != 0:
                d.dump()
            check_ok(p, "check ferry")
        elif case == "check-ferry-pool1":
            need_ferryd(a.ferryd)
            d = start(a.ferryd)
            daemons.append(d)
            args = list(SMALL)
            args[args.index("--workers") + 1] = "4"
            p = run([a.ps, "check", "--transport", "ferry", "--socket", d.socket, "--shard-pool", "1"] + args)
            if p.returncode != 0:
                d.dump()
            check_ok(p, "check ferry, pool 1")
            waited = re.findall(r"ferry-ps shard \d+: (\d+) requests waited for a response buffer \(pool 1\)", p.stderr)
            if not waited or sum(int(n) for n in waited) == 0:
                fail("no request waited for a response buffer (the path under test did not run): %r" % p.stderr)
        elif case == "check-remote":
            need_ferryd(a.ferryd)
            pa, pb = free_port(), free_port()
            da = start(a.ferryd, "127.0.0.1:%d" % pa)
            daemons.append(da)
            db = start(a.ferryd, "127.0.0.1:%d" % pb)
            daemons.append(db)
            p = run([a.ps, "check", "--transport", "ferry", "--socket", da.socket, "--server-socket", db.socket,
                     "--target", "127.0.0.1:%d" % pb] + SMALL)
            check_ok(p, "check remote")
        elif case.startswith("bench-json-"):
            transport = case[len("bench-json-"):]
            tmp = tempfile.mkdtemp(prefix="ferry-ps-bench-")
            dump = os.path.join(tmp, "lat.txt")
            cmd = [a.ps, "bench", "--transport", transport, "--workers", "2", "--shards", "2", "--keys", "20000",
                   "--dim", "32", "--iters", "40", "--warmup", "5", "--json", "--latency-dump", dump]
            if transport == "ferry":
                need_ferryd(a.ferryd)
                d = start(a.ferryd)
                daemons.append(d)
                cmd += ["--socket", d.socket]
            check_bench_json(run(cmd), transport, dump)
            shutil.rmtree(tmp, ignore_errors=True)
        elif case == "server-reattach":
            server_reattach(a, daemons)
        elif case == "options":
            bad = [(["bench", "--worker", "2"], "unrecognised option '--worker'"),
                   (["bench", "--workers", "2", "stray"], "too many positional"),
                   (["bench", "--workers", "-1"], "bad value '-1' for --workers"),
                   (["bench", "--transport", "udp"], "bad value 'udp' for --transport"),
                   (["server", "--shard", "2/2"], "bad value '2' for --shard"),
                   (["server", "--shard", "0/1", "--reattach-s", "86401"], "bad value '86401' for --reattach-s"),
                   (["bench", "--dim"], "--dim"),
                   (["fly"], "unknown command 'fly'")]
            for args, want in bad:
                p = run([a.ps] + args, timeout=10)
                if p.returncode != 2 or want not in p.stderr:
                    fail("%s: exit %d, stderr %r (wanted exit 2 and %r)" % (args, p.returncode, p.stderr, want))
            p = run([a.ps, "--help"], timeout=10)
            if p.returncode != 0 or "ferry-ps bench" not in p.stdout:
                fail("--help did not print the usage")
        else:
            fail("unknown case " + case)
    except subprocess.TimeoutExpired as e:
        fail("timed out: %s" % e)
    finally:
        for d in daemons:
            d.stop()
    print("PASS " + case)


if __name__ == "__main__":
    main()
