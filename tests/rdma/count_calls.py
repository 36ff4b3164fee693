#!/usr/bin/env python3
"""Per-call counts from count-calls.sh.

usage: count_calls.py DIR SECONDS NAME...

DIR/NAME.counts: hist lines "EVENT { key: value[, key: value] } hitcount: N";
NAME.roles: "role ROLE PID TID ..."; NAME.cpu: "cpu 0|1 TID NS";
ferry scenarios also NAME.a0.json/.a1.json/.b0.json/.b1.json (ferryctl
status --json of daemons A and B before and after).
"""
import collections
import json
import re
import sys

SYSCALLS = {0: "read", 1: "write", 7: "poll", 16: "ioctl", 20: "writev", 24: "sched_yield", 44: "sendto",
            45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 202: "futex", 228: "clock_gettime", 230: "clock_nanosleep",
            232: "epoll_wait", 233: "epoll_ctl", 271: "ppoll", 281: "epoll_pwait", 35: "nanosleep", 3: "close"}
HIST = re.compile(r"^(\S+) \{ (.*?) \} hitcount:\s*(\d+)")
PROBES = [("rxe_post_send", "doorbells (ibv_post_send)"), ("rxe_requester", "requester runs (WRs + 1 per doorbell)"),
          ("rxe_bind_mw", "memory-window binds"), ("rxe_cq_post", "completions written (CQEs)"),
          ("rxe_req_notify_cq", "CQ arms"), ("ib_uverbs_comp_handler", "completion events (armed CQ got a CQE)")]


def load(d, name):
    role_of, order = {}, []
    for line in open(f"{d}/{name}.roles"):
        f = line.split()
        if f[0] == "role" and len(f) >= 4 and f[3].isdigit():
            role_of[int(f[3])] = f[1]
            if f[1] not in order:
                order.append(f[1])
    cpu = collections.defaultdict(dict)
    hw = collections.defaultdict(dict)  # (device, counter) -> {tag: value}
    win = collections.defaultdict(dict)  # trigger index -> {tag: (rxe0 recvs, rxe1 recvs)}
    for line in open(f"{d}/{name}.cpu"):
        f = line.split()
        if f[0] == "cpu" and len(f) == 4 and f[3].isdigit():
            cpu[int(f[2])][f[1]] = int(f[3])
        elif f[0] == "hw" and len(f) == 5:
            hw[f[2], f[3]][f[1]] = int(f[4])
        elif f[0] == "time" and len(f) == 3:
            hw["time", "us"][f[1]] = int(f[2])
        elif f[0] == "win" and len(f) == 5:
            win[int(f[2])][f[1]] = (int(f[3]), int(f[4]))
    counts = collections.Counter()  # (event, role, extra) -> n
    for line in open(f"{d}/{name}.counts"):
        m = HIST.match(line)
        if not m:
            continue
        ev, keys, n = m.group(1), dict(kv.split(":") for kv in m.group(2).replace(" ", "").split(",")), int(m.group(3))
        tid = int(keys.get("common_pid", keys.get("prev_pid", keys.get("pid", "-1"))))
        role = role_of.get(tid, "others")
        counts[ev, role, int(keys["id"]) if "id" in keys else None] += n
    # Trigger order of count-calls.sh: sys_enter, sched_switch, sched_wakeup, then the probes.
    events = ["sys_enter", "sched_switch", "sched_wakeup"] + [f"ferry_{p}" for p, _ in PROBES]
    windows = {ev: win[i] for i, ev in enumerate(events) if "0" in win[i] and "1" in win[i]}
    return role_of, order, cpu, counts, hw, windows


def counters_delta(d, name, side):
    try:
        a = json.load(open(f"{d}/{name}.{side}0.json"))
        b = json.load(open(f"{d}/{name}.{side}1.json"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    ca, cb = a.get("counters", a.get("result", {}).get("counters", {})), b.get("counters", b.get("result", {}).get("counters", {}))
    return {k: cb[k] - ca.get(k, 0) for k in cb if isinstance(cb[k], (int, float))}


def main():
    d, window = sys.argv[1], float(sys.argv[2])
    table = []
    for name in sys.argv[3:]:
        seconds = window
        try:
            role_of, order, cpu, counts, hw, windows = load(d, name)
        except FileNotFoundError as e:
            print(f"\n## {name}: missing {e.filename}")
            continue
        ferry = name.startswith("ferry")
        dev = "rxe1" if ferry else "rxe0"  # the serving side's device
        r = hw.get((dev, "rdma_recvs"), {})
        calls = r.get("1", 0) - r.get("0", 0)
        what = f"{'calls' if ferry else 'round trips'} ({dev} rdma_recvs: requests received)"
        # Per event, the calls its own trigger was active for (the serving device's requests).
        col = 1 if ferry else 0

        def per(ev):
            w = windows.get(ev)
            return (w["1"][col] - w["0"][col]) if w else calls
        da = db = None
        if ferry:
            da, db = counters_delta(d, name, "a"), counters_delta(d, name, "b")
        tm = hw.get(("time", "us"), {})
        if "0" in tm and "1" in tm:
            seconds = (tm["1"] - tm["0"]) / 1e6
        print(f"\n## {name}: {calls} {what} in {seconds:.2f} s (each count is divided by the requests"
              " received while its own trigger was on)")
        if not calls:
            print("nothing to divide by")
            continue
        print("| per call | " + " | ".join(order) + " | others | total |")
        print("|---|" + "---:|" * (len(order) + 2))
        for probe, title in PROBES:
            v = [counts[f"ferry_{probe}", r, None] for r in order + ["others"]]
            c = max(per(f"ferry_{probe}"), 1)
            print(f"| {title} | " + " | ".join(f"{x / c:.2f}" for x in v) + f" | {sum(v) / c:.2f} |")
        sys_total = {r: sum(n for (ev, rr, _), n in counts.items() if ev == "sys_enter" and rr == r) for r in order}
        c = max(per("sys_enter"), 1)
        print("| syscalls | " + " | ".join(f"{sys_total[r] / c:.1f}" for r in order) + " | | |")
        for ev, title in (("sched_switch", "switched out"), ("sched_wakeup", "woken up")):
            v = [counts[ev, r, None] for r in order]
            c = max(per(ev), 1)
            print(f"| {title} | " + " | ".join(f"{x / c:.2f}" for x in v) + " | | |")
        cpu_us = {}
        for r in order:
            ns = sum(c["1"] - c["0"] for t, c in cpu.items() if role_of.get(t) == r and "0" in c and "1" in c)
            cpu_us[r] = ns / 1000 / calls
        print("| CPU us | " + " | ".join(f"{cpu_us[r]:.0f}" for r in order) + f" | | {sum(cpu_us.values()):.0f} |")
        print(f"| wall us (window / calls) | " + " | ".join("" for _ in order) + f" | | {seconds * 1e6 / calls:.0f} |")
        c = max(per("sys_enter"), 1)
        for r in order:
            items = sorted(((n, SYSCALLS.get(i, f"sys{i}")) for (ev, rr, i), n in counts.items()
                            if ev == "sys_enter" and rr == r), reverse=True)
            print(f"  {r} syscalls per call: " + ", ".join(f"{k} {n / c:.2f}" for n, k in items[:8]))
        for side, delta in (("A", da), ("B", db)):
            if delta and da and da.get("remote_calls"):
                per = da["remote_calls"]
                nz = {k: v for k, v in delta.items() if v and k not in ("uptime_s", "cpu_user_us", "cpu_sys_us")}
                print(f"  ferryd {side} counters per call (over {per} calls): " +
                      ", ".join(f"{k} {v / per:.2f}" for k, v in sorted(nz.items())))
        pk = {k: v.get("1", 0) - v.get("0", 0) for k, v in hw.items() if k[0] != "time"}
        print("  devices per call: " + ", ".join(f"{dv} {c} {n / calls:.2f}" for (dv, c), n in sorted(pk.items())))
        daemons = sum(cpu_us.get(r, 0) for r in ("A", "B"))
        table.append((name, calls, [counts[f"ferry_{p}", r, None] for p, _ in PROBES for r in order + ["others"]],
                      daemons if ferry else sum(cpu_us.values())))
    print("\nsummary: CPU per call (ferry: the two ferryd; peers: both processes), us")
    for name, calls, _, c in table:
        print(f"  {name}: {c:.0f}")


if __name__ == "__main__":
    main()
