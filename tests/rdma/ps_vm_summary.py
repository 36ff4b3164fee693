#!/usr/bin/env python3
"""ps-vm-bench.sh's arithmetic.

  ps_vm_summary.py counts OUT SA0 SA1 SB0 SB1
      The counts of one ferry run per op (a pull or a push, counted as the
      remote calls and sends daemon A made over the run): doorbells, send
      WRs, engine sleeps, large-transfer sleeps, the daemons' CPU and context
      switches. OUT is the bench's output; OUT.{a,b}{0,1}.json the daemons'
      `ferryctl status --json` before and after; SA0.. "voluntary
      involuntary" switches of daemon A and B before and after. One JSON
      object on stdout.
  ps_vm_summary.py table RESULTS SHAPES MODES
      Per shape, medians over the repeats of ferry (each mode) and the TCP
      baseline, and the median of the per-repeat ratios ferry/tcp; then the
      counts. Markdown tables, ready for docs/benchmarks/ps-soft-roce.md.
"""
import json
import statistics
import sys

COUNTERS = ["rdma_post_calls", "rdma_wrs_posted", "engine_sleeps", "spin_large_sleeps", "spin_skips",
            "eager_responses", "rendezvous_reads", "rdma_cq_polls_empty"]


def load(path):
    with open(path) as f:
        return json.load(f)


def counts(out, sa0, sa1, sb0, sb1):
    res = {}
    try:
        a0, a1 = load(out + ".a0.json"), load(out + ".a1.json")
        b0, b1 = load(out + ".b0.json"), load(out + ".b1.json")
    except (OSError, ValueError):
        print(json.dumps({}))
        return
    ca0, ca1, cb0, cb1 = (x["counters"] for x in (a0, a1, b0, b1))
    ops = (ca1["remote_calls"] - ca0["remote_calls"]) + (ca1["remote_sends"] - ca0["remote_sends"])
    if ops <= 0:
        print(json.dumps({}))
        return
    res["ops"] = ops
    for name in COUNTERS:
        if name in ca1:
            res[name] = [(ca1[name] - ca0[name]) / ops, (cb1[name] - cb0[name]) / ops]
    cpu = lambda x: x["cpu_user_us"] + x["cpu_sys_us"]
    res["daemon_cpu_us"] = [(cpu(a1) - cpu(a0)) / ops, (cpu(b1) - cpu(b0)) / ops]
    # Of which in the kernel: the verbs posts (rxe's requester, the UDP/IP
    # stack, the veth and the other device's responder run inline in them).
    res["daemon_sys_us"] = [(a1["cpu_sys_us"] - a0["cpu_sys_us"]) / ops, (b1["cpu_sys_us"] - b0["cpu_sys_us"]) / ops]
    va0, na0 = map(int, sa0.split())
    va1, na1 = map(int, sa1.split())
    vb0, nb0 = map(int, sb0.split())
    vb1, nb1 = map(int, sb1.split())
    res["voluntary_switches"] = [(va1 - va0) / ops, (vb1 - vb0) / ops]
    res["involuntary_switches"] = [(na1 - na0) / ops, (nb1 - nb0) / ops]
    print(json.dumps(res))


METRICS = [("pull mean µs", "pull_mean_us"), ("pull P50 µs", "pull_p50_us"), ("pull P99 µs", "pull_p99_us"),
           ("push mean µs", "push_mean_us"), ("push P99 µs", "push_p99_us"), ("ops/s", "ops_per_s"),
           ("CPU µs per op (all processes)", "cpu_us_per_op")]


def fmt(v):
    return "%.0f" % v if abs(v) >= 100 else "%.1f" % v


def table(path, shapes, modes):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    arms = ["ferry-" + m for m in modes]
    for shape in shapes:
        mine = [r for r in rows if r["shape"] == shape]
        if not mine:
            continue
        x = mine[0]
        repeats = sorted({r["repeat"] for r in mine})
        print()
        print("### %s: %d keys x dim %d per pull, %d workers x %d shards, %d iterations, %d repeats" %
              (shape, x["batch"], x["dim"], x["workers"], x["shards"], x["iters"], len(repeats)))
        print()
        print("| metric | " + " | ".join(arms) + " | kernel TCP | " + " | ".join(a + " / tcp" for a in arms) + " |")
        print("|---|" + "---:|" * (2 * len(arms) + 1))
        by = {(r["repeat"], r["arm"]): r for r in mine}
        for name, key in METRICS:
            cells, ratios = [], []
            for arm in arms + ["tcp"]:
                v = [by[(rep, arm)][key] for rep in repeats if (rep, arm) in by]
                cells.append(fmt(statistics.median(v)) if v else "–")
            for arm in arms:
                q = [by[(rep, arm)][key] / by[(rep, "tcp")][key] for rep in repeats
                     if (rep, arm) in by and (rep, "tcp") in by and by[(rep, "tcp")][key]]
                ratios.append("**%.2f×**" % statistics.median(q) if q else "–")
            print("| %s | %s | %s |" % (name, " | ".join(cells), " | ".join(ratios)))
        print()
        print("Per repeat, pull mean / P99 µs: " + "; ".join(
            "r%d %s" % (rep, ", ".join("%s %s / %s" % (arm, fmt(by[(rep, arm)]["pull_mean_us"]),
                                                       fmt(by[(rep, arm)]["pull_p99_us"]))
                                      for arm in arms + ["tcp"] if (rep, arm) in by))
            for rep in repeats))
        for arm in arms:
            c = [by[(rep, arm)].get("counts") for rep in repeats if (rep, arm) in by]
            c = [v for v in c if v]
            if not c:
                continue
            print()
            print("Counts per op (pull or push), %s, daemon A (workers) / B (shards), median of repeats:" % arm)
            print()
            print("| per op | A | B |")
            print("|---|---:|---:|")
            for key in ["rdma_post_calls", "rdma_wrs_posted", "eager_responses", "rendezvous_reads", "engine_sleeps",
                        "spin_large_sleeps", "spin_skips", "voluntary_switches", "involuntary_switches",
                        "rdma_cq_polls_empty", "daemon_cpu_us", "daemon_sys_us"]:
                if all(key in v for v in c):
                    a = statistics.median(v[key][0] for v in c)
                    b = statistics.median(v[key][1] for v in c)
                    print("| %s | %s | %s |" % (key, "%.2f" % a if a < 100 else "%.0f" % a,
                                                "%.2f" % b if b < 100 else "%.0f" % b))
    # The acceptance line: the small shape, ferry's default datapath.
    small = [r for r in rows if r["shape"] == "small"]
    by = {(r["repeat"], r["arm"]): r for r in small}
    reps = sorted({r["repeat"] for r in small})
    for arm in arms:
        pairs = [(by[(p, arm)], by[(p, "tcp")]) for p in reps if (p, arm) in by and (p, "tcp") in by]
        if not pairs:
            continue
        mean = statistics.median(f["pull_mean_us"] / t["pull_mean_us"] for f, t in pairs)
        p99 = statistics.median(f["pull_p99_us"] / t["pull_p99_us"] for f, t in pairs)
        print()
        print("PS target (small shape, %s): pull mean %.2f× tcp, pull P99 %.2f× tcp: %s" %
              (arm, mean, p99, "met" if mean < 1 and p99 < 1 else "not met"))


def main():
    if sys.argv[1] == "counts":
        counts(*sys.argv[2:7])
    elif sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3].split(), sys.argv[4].split())
    else:
        sys.exit("usage: ps_vm_summary.py counts|table ...")


if __name__ == "__main__":
    main()
