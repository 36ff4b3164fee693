#!/usr/bin/env python3
"""Summary of bench-vs-perftest.sh: medians over repeats and ratios per size.

usage: bench_summary.py RESULTS.tsv "SIZES" "MODES" [MACHINE.jsonl]

RESULTS rows: repeat tool size p50_us min_us mean_us cpu_us daemon_cpu_us
(round trips; empty fields where a tool has no such figure). Every figure
printed is the median over the repeats of that tool at that size; every ratio
is of two such medians from the same VM run.
"""
import json
import os
import statistics
import sys

COLS = {"p50": 3, "min": 4, "mean": 5, "cpu": 6, "dcpu": 7}
PEERS = ("rstream", "fi_pingpong")  # the software RDMA peers ("best peer": the faster)


def load(path):
    rows = []
    for line in open(path).read().splitlines():
        if line:
            f = line.split("\t")
            rows.append(f + [""] * (8 - len(f)))
    return rows


def fmt_size(s):
    n = int(s)
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def main():
    rows = load(sys.argv[1])
    sizes, modes = sys.argv[2].split(), sys.argv[3].split()
    tools = sorted({r[1] for r in rows})
    med = {}  # (tool, size, column name) -> (median, repeats)
    for t in tools:
        for s in sizes:
            for name, col in COLS.items():
                v = [float(r[col]) for r in rows if r[1] == t and r[2] == s and r[col] != ""]
                if v:
                    med[t, s, name] = (statistics.median(v), len(v))

    def get(t, s, c):
        m = med.get((t, s, c))
        return m[0] if m else None

    def ratio(a, b):
        return f"{a / b:.2f}x" if a is not None and b else "n/a"

    def num(v, digits=0):
        return f"{v:.{digits}f}" if v is not None else "-"

    def best_peer(s, c="mean"):
        v = [(get(p, s, c), p) for p in PEERS if get(p, s, c) is not None]
        return min(v) if v else (None, None)

    ferry = [f"ferry-{m}" for m in modes if any(r[1] == f"ferry-{m}" for r in rows)]
    others = [t for t in ("tcp-rpc", "tcp-relay-rpc", "rstream", "rstream-wait", "fi_pingpong", "ib_send_lat", "ib_write_lat", "uds-rpc")
              if t in tools]

    print("round trip, medians over repeats, emulated us: p50 / mean (min) [repeats]")
    print("(rstream and fi_pingpong print a mean only; perftest: 2x t_typical / 2x t_avg (2x t_min))")
    for s in sizes:
        cells = []
        for t in ferry + others:
            p50, mean, mn = get(t, s, "p50"), get(t, s, "mean"), get(t, s, "min")
            if mean is None and p50 is None:
                continue
            n = (med.get((t, s, "mean")) or med.get((t, s, "p50")))[1]
            cells.append(f"{t} {num(p50)} / {num(mean)} ({num(mn)}) [{n}]")
        print(f"  {fmt_size(s)}: " + "; ".join(cells))

    print("\nratios per size (medians of the same run). p50 columns: ferry's median round trip against")
    print("tcp-rpc's median and perftest's t_typical; mean columns: against the peers' mean round trip")
    print("| size | mode | / tcp-rpc p50 | / tcp-relay-rpc p50 | / rstream mean | / fi_pingpong mean | / best peer mean "
          "| / 2x ib_send_lat p50 |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for s in sizes:
        bp, bname = best_peer(s)
        for t in ferry:
            p50, mean = get(t, s, "p50"), get(t, s, "mean")
            best = f"{ratio(mean, bp)} ({bname})" if bname else "n/a"
            print(f"| {fmt_size(s)} | {t[6:]} | {ratio(p50, get('tcp-rpc', s, 'p50'))} | "
                  f"{ratio(p50, get('tcp-relay-rpc', s, 'p50'))} | "
                  f"{ratio(mean, get('rstream', s, 'mean'))} | {ratio(mean, get('fi_pingpong', s, 'mean'))} | "
                  f"{best} | {ratio(p50, get('ib_send_lat', s, 'p50'))} |")

    print("\nthe references against each other (means)")
    print("| size | tcp-rpc / best peer | tcp-relay-rpc / tcp-rpc (p50) | rstream-wait / rstream | fi_pingpong / rstream "
          "| best peer / 2x ib_send_lat |")
    print("|---:|---:|---:|---:|---:|---:|")
    for s in sizes:
        bp, bname = best_peer(s)
        print(f"| {fmt_size(s)} | {ratio(get('tcp-rpc', s, 'mean'), bp)} | "
              f"{ratio(get('tcp-relay-rpc', s, 'p50'), get('tcp-rpc', s, 'p50'))} | "
              f"{ratio(get('rstream-wait', s, 'mean'), get('rstream', s, 'mean'))} | "
              f"{ratio(get('fi_pingpong', s, 'mean'), get('rstream', s, 'mean'))} | "
              f"{ratio(bp, get('ib_send_lat', s, 'mean'))} |")

    print("\nCPU per round trip, us (all processes of the tool; ferry: client + server + both ferryd,")
    print("and the two ferryd alone; peers: both processes over their measured phase)")
    print("| size | tool | CPU per round trip | daemons' CPU per call | daemons / best peer's CPU |")
    print("|---:|---|---:|---:|---:|")
    for s in sizes:
        bp_cpu = min((get(p, s, "cpu") for p in PEERS if get(p, s, "cpu") is not None), default=None)
        for t in ferry + others:
            cpu, dcpu = get(t, s, "cpu"), get(t, s, "dcpu")
            if cpu is None and dcpu is None:
                continue
            print(f"| {fmt_size(s)} | {t} | {num(cpu)} | {num(dcpu)} | {ratio(dcpu, bp_cpu) if dcpu else ''} |")

    locals_ = [m for m in modes if any(r[1] == f"local-{m}" for r in rows)]
    if locals_:
        print("\nprocess hops against the wire (p50): uds-rpc is one blocking Unix-socket round trip between two")
        print("processes; local-rpc is ferry's call through daemon A alone, the same four ring hops as a remote")
        print("call without the wire; the last column is what remote-rpc adds to local-rpc")
        print("| size | mode | uds-rpc / 2x ib_send_lat | local-rpc / 2x ib_send_lat | remote-rpc / local-rpc | "
              "(remote - local) / 2x ib_send_lat |")
        print("|---:|---|---:|---:|---:|---:|")
        for s in sizes:
            send, uds = get("ib_send_lat", s, "p50"), get("uds-rpc", s, "p50")
            for m in locals_:
                f, loc = get(f"ferry-{m}", s, "p50"), get(f"local-{m}", s, "p50")
                wire = f"{(f - loc) / send:.2f}x" if f and loc and send else "n/a"
                print(f"| {fmt_size(s)} | {m} | {ratio(uds, send)} | {ratio(loc, send)} | {ratio(f, loc)} | {wire} |")


def machine(path):
    if not os.path.exists(path):
        return
    probes = [json.loads(line) for line in open(path) if line.strip()]
    spins = [p for p in probes if p["mode"] == "spin"]
    sleeps = [p for p in probes if p["mode"] == "sleep"]
    print("\nthe machine, per repeat and vCPU (vcpu_stalls.py): a spinning vCPU's share of time not run")
    print("(gaps over 100 us: the host descheduled its thread, or guest interrupts); an idle vCPU's")
    print("lateness waking from a 200 us sleep")
    for p in spins:
        print(f"  repeat {p['repeat']} vCPU {p['cpu']}: spin stalled {100 * p['stalled_share']:.1f}% "
              f"({p['gaps_over_100us']} gaps, p50 {p['gap_p50_us']} us, max {p['gap_max_us']} us)")
    for p in sleeps:
        print(f"  repeat {p['repeat']} vCPU {p['cpu']}: sleep late p50 {p['late_p50_us']} us, "
              f"p90 {p['late_p90_us']} us, max {p['late_max_us']} us ({p['wakeups']} wake-ups)")
    if spins and sleeps:
        print(f"  medians: spin stalled {100 * statistics.median(p['stalled_share'] for p in spins):.1f}%, "
              f"sleep late p50 {statistics.median(p['late_p50_us'] for p in sleeps):.0f} us")


if __name__ == "__main__":
    main()
    if len(sys.argv) > 4:
        machine(sys.argv[4])
