#!/usr/bin/env python3
"""Runs ipc-echo, local-rpc and uds-rpc back to back against one ferryd and
prints a Markdown table: p50 and P99 per size and their ratio to uds-rpc
(ratio < 1: faster than the kernel Unix-socket baseline), plus CPU per op.

  tests/perf/compare.py --bench build/tests/perf/ferry-bench --socket DIR/ferryd.sock \
      [--sizes 64,4096,65536,1048576] [--iters 20000] [--repeat 3]

With --repeat N each (scenario, size) runs N times, interleaved, and the run
with the median p50 is kept, which damps noise from a shared machine.
"""
import argparse
import json
import statistics
import subprocess
import sys

SCENARIOS = ["uds-rpc", "ipc-echo", "local-rpc"]


def run(bench, scenario, size, iters, socket, extra):
    cmd = [bench, scenario, "--size", str(size), "--iters", str(iters), "--json", "--socket", socket] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr))
    return json.loads(p.stdout.strip().splitlines()[-1])


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return "%d %s" % (size >> shift, unit)
    return "%d B" % size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--sizes", default="64,4096,65536,1048576")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--busy-poll", action="store_true")
    a = ap.parse_args()
    extra = ["--busy-poll"] if a.busy_poll else []
    sizes = [int(s) for s in a.sizes.split(",")]
    results = {}
    for size in sizes:
        runs = {s: [] for s in SCENARIOS}
        for _ in range(a.repeat):
            for s in SCENARIOS:
                runs[s].append(run(a.bench, s, size, a.iters, a.socket, extra))
        for s in SCENARIOS:
            med = statistics.median_low([r["p50_us"] for r in runs[s]])
            results[(s, size)] = next(r for r in runs[s] if r["p50_us"] == med)

    print("| scenario | size | p50 µs | P99 µs | p50 vs uds-rpc | P99 vs uds-rpc | CPU µs/op | ops/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        base = results[("uds-rpc", size)]
        for s in SCENARIOS:
            r = results[(s, size)]
            print("| %s | %s | %.1f | %.1f | %.2f× | %.2f× | %.1f%s | %.0f |" % (
                s, human(size), r["p50_us"], r["p99_us"], r["p50_us"] / base["p50_us"],
                r["p99_us"] / base["p99_us"], r["cpu_us_per_op"],
                "" if r.get("daemon_cpu_included") or s == "uds-rpc" else " (no daemon)", r["ops_per_s"]))


if __name__ == "__main__":
    main()
