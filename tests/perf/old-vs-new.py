#!/usr/bin/env python3
"""Old binaries against new ones in one sitting, interleaved: every figure of
tests/perf/compare.py, the parameter-server head-to-head
(scripts/ps-head-to-head.sh, the C++ `ferry-ps bench` shape) and the fast
path (`ipc-echo --busy-poll` against `shm-pingpong`), as medians over rounds
and ratios new/old. Each round runs the old tree and the new one back to
back (the order alternates), each against a fresh ferryd of its own build.

  tests/perf/old-vs-new.py --old OLD_REPO [--old-build OLD_REPO/build]
      [--new-build build] [--rounds 3] [--iters 5000] [--sizes 64,4096,65536,1048576]
      [--pingpong-rounds 5] [--ps-args "--workers 2 --shards 2 --keys 100000 --iters 1000"]
      [--parts compare,ps,pingpong] [--out DIR]

The old tree's own scripts drive its binaries (OLD_REPO/scripts/ps-head-to-head.sh);
compare.py's scenarios are run by this script through the same function.
Writes DIR/old-vs-new.json and prints Markdown tables.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (run(): one ferry-bench scenario, --json)

sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from ferryd import Ferryd, FerrydFailed  # noqa: E402

PS_KEYS = ["pull_mean_us", "pull_p50_us", "pull_p99_us", "pull_p999_us", "push_mean_us", "push_p50_us",
           "push_p99_us", "push_p999_us", "ops_per_s", "cpu_us_per_op", "rss_kb"]
BENCH_KEYS = ["p50_us", "p99_us", "cpu_us_per_op", "ops_per_s"]


def start_daemon(build):
    """A fresh ferryd of `build` in its own runtime directory."""
    try:
        return Ferryd(os.path.join(build, "daemon", "ferryd"), prefix="ferry-ovn-", timeout=30)
    except FerrydFailed as e:
        sys.exit("ferryd of %s did not come up: %s" % (build, e))


def bench(build):
    return os.path.join(build, "tests", "perf", "ferry-bench")


def run_compare(build, sizes, iters):
    d = start_daemon(build)
    try:
        return {"%s/%d" % (s, size): compare.run(bench(build), s, size, iters, d.socket, [])
                for size in sizes for s in compare.SCENARIOS}
    finally:
        d.stop()


def run_ps(repo, build, ps_args, out):
    cmd = [os.path.join(repo, "scripts", "ps-head-to-head.sh"), "--local", "--build", build, "--out", out]
    cmd += shlex.split(ps_args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit("%s failed (%d):\n%s\n%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return {t: json.load(open(os.path.join(out, t + ".json"))) for t in ("ferry", "tcp")}


def run_pingpong(build, iters, with_pingpong):
    r = {}
    if with_pingpong:
        r["shm-pingpong"] = compare.run(bench(build), "shm-pingpong", 64, iters, "/nonexistent", [])
    d = start_daemon(build)
    try:
        r["ipc-echo"] = compare.run(bench(build), "ipc-echo", 64, iters, d.socket, ["--busy-poll"])
    finally:
        d.stop()
    return r


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True, help="the old tree (its scripts drive its binaries)")
    ap.add_argument("--old-build", default=None)
    ap.add_argument("--new-build", default=os.path.join(REPO, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--sizes", default="64,4096,65536,1048576")
    ap.add_argument("--pingpong-rounds", type=int, default=5)
    ap.add_argument("--pingpong-iters", type=int, default=20000)
    ap.add_argument("--ps-args", default="--workers 2 --shards 2 --keys 100000 --iters 1000")
    ap.add_argument("--parts", default="compare,ps,pingpong")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    trees = {"old": (os.path.abspath(a.old), os.path.abspath(a.old_build or os.path.join(a.old, "build"))),
             "new": (REPO, os.path.abspath(a.new_build))}
    parts = a.parts.split(",")
    sizes = [int(s) for s in a.sizes.split(",")]
    out = a.out or tempfile.mkdtemp(prefix="ferry-old-vs-new-")
    os.makedirs(out, exist_ok=True)
    runs = {"compare": {"old": [], "new": []}, "ps": {"old": [], "new": []}, "pingpong": {"old": [], "new": []}}
    rounds = max(a.rounds if ("compare" in parts or "ps" in parts) else 0,
                 a.pingpong_rounds if "pingpong" in parts else 0)
    for r in range(rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for t in order:
            repo, build = trees[t]
            if "compare" in parts and r < a.rounds:
                print("round %d: compare.py scenarios, %s" % (r + 1, t), flush=True)
                runs["compare"][t].append(run_compare(build, sizes, a.iters))
            if "ps" in parts and r < a.rounds:
                print("round %d: ps-head-to-head, %s" % (r + 1, t), flush=True)
                runs["ps"][t].append(run_ps(repo, build, a.ps_args, os.path.join(out, "ps-%s-%d" % (t, r + 1))))
            if "pingpong" in parts and r < a.pingpong_rounds:
                print("round %d: shm-pingpong / ipc-echo --busy-poll, %s" % (r + 1, t), flush=True)
                # The old tree has no shm-pingpong: the new bench's is the same sitting's baseline.
                runs["pingpong"][t].append(run_pingpong(build, a.pingpong_iters, t == "new"))
    json.dump({"args": vars(a), "runs": runs}, open(os.path.join(out, "old-vs-new.json"), "w"), indent=1)

    if runs["compare"]["old"]:
        print("\n## compare.py scenarios, medians of %d rounds (--iters %d), new/old\n" % (a.rounds, a.iters))
        print("| scenario | size | p50 µs old | p50 µs new | p50 new/old | P99 new/old | CPU/op new/old | ops/s new/old |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for size in sizes:
            for s in compare.SCENARIOS:
                k = "%s/%d" % (s, size)
                m = {t: {f: median([x[k][f] for x in runs["compare"][t]]) for f in BENCH_KEYS} for t in trees}
                print("| %s | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f |" % (
                    s, compare.human(size), m["old"]["p50_us"], m["new"]["p50_us"],
                    m["new"]["p50_us"] / m["old"]["p50_us"], m["new"]["p99_us"] / m["old"]["p99_us"],
                    m["new"]["cpu_us_per_op"] / m["old"]["cpu_us_per_op"],
                    m["new"]["ops_per_s"] / m["old"]["ops_per_s"]))
    if runs["ps"]["old"]:
        print("\n## ps-head-to-head (%s), medians of %d rounds, new/old\n" % (a.ps_args, a.rounds))
        print("| metric | ferry old | ferry new | ferry new/old | tcp old | tcp new | tcp new/old |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for key in PS_KEYS:
            m = {(t, x): median([float(r[x][key]) for r in runs["ps"][t]]) for t in trees for x in ("ferry", "tcp")}
            print("| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |" % (
                key, m[("old", "ferry")], m[("new", "ferry")], m[("new", "ferry")] / m[("old", "ferry")],
                m[("old", "tcp")], m[("new", "tcp")], m[("new", "tcp")] / m[("old", "tcp")]))
    if runs["pingpong"]["old"]:
        print("\n## 64 B p50 µs per round: shm-pingpong, ipc-echo --busy-poll new, old\n")
        print("| round | shm-pingpong | ipc-echo new | ipc-echo old | new / pingpong | old / pingpong |")
        print("|---|---:|---:|---:|---:|---:|")
        pp, en, eo = [], [], []
        for i, (n, o) in enumerate(zip(runs["pingpong"]["new"], runs["pingpong"]["old"])):
            pp.append(n["shm-pingpong"]["p50_us"])
            en.append(n["ipc-echo"]["p50_us"])
            eo.append(o["ipc-echo"]["p50_us"])
            print("| %d | %.3f | %.3f | %.3f | %.1f× | %.1f× |" % (i + 1, pp[-1], en[-1], eo[-1], en[-1] / pp[-1],
                                                                 eo[-1] / pp[-1]))
        print("| median | %.3f | %.3f | %.3f | %.1f× | %.1f× |" % (median(pp), median(en), median(eo),
                                                                  median(en) / median(pp), median(eo) / median(pp)))
    print("\nresults: %s/old-vs-new.json" % out)


if __name__ == "__main__":
    main()
