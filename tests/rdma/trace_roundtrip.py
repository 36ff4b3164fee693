#!/usr/bin/env python3
"""Cuts the traces of trace-roundtrip.sh into round trips and steps.

usage: trace_roundtrip.py DIR SCENARIO...

For each scenario, DIR holds SCENARIO.trace (ftrace text: sched, softirq,
irq vector and syscall events plus function hits of rxe/uverbs), .roles
(which threads are whose and what their fds are) and .hist (sched_yield and
clock_gettime counts per thread). A round trip runs from one reply post of
the serving side to the next (ferry: daemon B's post; the peers: their
server's post). Each round trip is a sequence of marks (posts, doorbells,
sleeps, wake-ups, switch-ins of the scenario's processes); the most common
sequence is reported step by step with the median and mean of each step,
its share of the round trip, and what the kernel did meanwhile (softirq
time by kind, ksoftirqd, idle vCPUs, other tasks). Then totals per round
trip over the whole window: CPU by process, syscalls, rxe function calls by
the context they ran in, wake-up latencies.
"""
import bisect
import collections
import re
import statistics
import sys

LINE = re.compile(r"^\s*(.*?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+(\d+\.\d+):\s+(\w+?):?\s(.*)$")
KV = re.compile(r"(\w+)=(\S+)")
SOFTIRQ = {0: "HI", 1: "TIMER", 2: "NET_TX", 3: "NET_RX", 4: "BLOCK", 5: "IRQ_POLL", 6: "TASKLET", 7: "SCHED",
           8: "HRTIMER", 9: "RCU"}
SYSCALLS = {0: "read", 1: "write", 7: "poll", 23: "select", 24: "sched_yield", 35: "nanosleep", 202: "futex",
            228: "clock_gettime", 230: "clock_nanosleep", 232: "epoll_wait", 233: "epoll_ctl", 271: "ppoll",
            281: "epoll_pwait", 16: "ioctl", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg",
            20: "writev", 19: "readv", 290: "eventfd2", 441: "epoll_pwait2"}
WAITS = {"poll", "ppoll", "epoll_wait", "epoll_pwait", "epoll_pwait2", "select", "futex", "nanosleep", "clock_nanosleep"}


class Scenario:
    def __init__(self, d, name):
        self.name = name
        self.role_of = {}   # tid -> role
        self.fds = collections.defaultdict(dict)  # role -> fd -> target
        self.cpu_ns = collections.Counter()
        for line in open(f"{d}/{name}.roles"):
            f = line.split()
            if f[0] == "role" and len(f) >= 4 and f[3].isdigit():
                self.role_of[int(f[3])] = f[1]
                if len(f) >= 5 and f[4].isdigit():
                    self.cpu_ns[int(f[3])] = int(f[4])
            elif f[0] == "fd" and len(f) >= 4 and f[2].isdigit():
                self.fds[f[1]][int(f[2])] = f[3]
        self.hist = collections.Counter()
        try:
            for line in open(f"{d}/{name}.hist"):
                m = re.match(r"(\w+) \{ common_pid:\s*(\d+) \} hitcount:\s*(\d+)", line)
                if m:
                    self.hist[m.group(1), int(m.group(2))] += int(m.group(3))
        except FileNotFoundError:
            pass
        self.events = []
        for line in open(f"{d}/{name}.trace"):
            if line.startswith("#"):
                continue
            m = LINE.match(line)
            if m:
                comm, tid, cpu, flags, ts, ev, rest = m.groups()
                self.events.append((float(ts), int(cpu), int(tid), comm, flags, ev, rest))
        self.events.sort(key=lambda e: e[0])
        self.kind = "ferry" if name.startswith("ferry") else "peer"
        self.boundary = "B:post>" if self.kind == "ferry" else "server:post>"

    def who(self, tid, comm):
        if tid in self.role_of:
            return self.role_of[tid]
        if tid == 0:
            return "idle"
        if comm.startswith("ksoftirqd"):
            return "ksoftirqd"
        if comm.startswith("kworker"):
            return "kworker"
        return "other"

    def classify(self, role, nr, args, count):
        name = SYSCALLS.get(nr, f"sys{nr}")
        if nr in (0, 1) and args:
            target = self.fds.get(role, {}).get(args[0], "")
            if "uverbs" in target:
                if nr == 1:
                    return "post" if count == 32 else "verbs-cmd"
                return "verbs-read"
            if "eventfd" in target:
                return "bell" if nr == 1 else "bell-read"
            if "infinibandevent" in target or "[infiniband" in target:
                return "cq-event-read"
            if "rdma_cm" in target:
                return "cm-" + name
        return name

    def analyse(self):
        ev = self.events
        if not ev:
            print(f"\n## {self.name}: empty trace")
            return
        t_start, t_end = ev[0][0], ev[-1][0]
        cur = {}          # cpu -> (tid, comm, since)
        run = collections.defaultdict(list)   # category -> [(start, end)]
        ontime = collections.Counter()        # who -> seconds on CPU
        soft = collections.defaultdict(list)  # vec name -> [(start, end)]
        soft_open = {}
        soft_in = collections.Counter()       # (vec, context who) -> seconds
        sys_open = {}
        syscalls = collections.Counter()      # (role, class) -> count
        sys_time = collections.Counter()      # (role, class) -> seconds
        marks = []
        waking = {}                           # tid -> (ts, target cpu idle?)
        wake_lat = collections.defaultdict(list)  # (role, cpu was idle) -> [us]
        funcs = collections.Counter()         # (func, context) -> count
        timers = []
        switches = collections.Counter()
        other_comm = collections.Counter()
        for ts, cpu, tid, comm, flags, name, rest in ev:
            if cpu not in cur:
                cur[cpu] = (tid, comm, t_start)
            if name == "sched_switch":
                kv = dict(KV.findall(rest))
                ptid, ntid = int(kv.get("prev_pid", tid)), int(kv.get("next_pid", 0))
                _, pcomm, since = cur[cpu]
                w = self.who(ptid, pcomm)
                run[w].append((since, ts))
                ontime[w] += ts - since
                if w == "other":
                    other_comm[pcomm] += ts - since
                ncomm = rest.split("next_comm=")[1].split(" next_pid=")[0] if "next_comm=" in rest else ""
                cur[cpu] = (ntid, ncomm, ts)
                switches[w] += 1
                if ptid in self.role_of and kv.get("prev_state", "R")[0] in "SD":
                    marks.append((ts, f"{self.role_of[ptid]}:sleep"))
                if ntid in self.role_of:
                    if ntid in waking:
                        wts, idle = waking.pop(ntid)
                        wake_lat[self.role_of[ntid], idle].append((ts - wts) * 1e6)
                        marks.append((ts, f"{self.role_of[ntid]}:run"))
            elif name == "sched_waking":
                kv = dict(KV.findall(rest))
                target = int(kv.get("pid", -1))
                if target in self.role_of:
                    tcpu = int(kv.get("target_cpu", "-1"))
                    idle = tcpu in cur and cur[tcpu][0] == 0
                    waking[target] = (ts, idle)
                    ctx = "irq" if "h" in flags[2:3] or "s" in flags[2:3] else ""
                    marks.append((ts, f"wake {self.role_of[target]} by {self.who(tid, comm)}{'/' + ctx if ctx else ''}"))
            elif name == "softirq_entry":
                vec = SOFTIRQ.get(int(rest.split("vec=")[1].split()[0]), "?")
                soft_open[cpu] = (ts, vec, self.who(tid, comm))
            elif name == "softirq_exit" and cpu in soft_open:
                t0, vec, w = soft_open.pop(cpu)
                soft[vec].append((t0, ts))
                soft_in[vec, w] += ts - t0
            elif name == "local_timer_entry":
                timers.append(ts)
            elif name == "sys_enter" and tid in self.role_of:
                m = re.match(r"NR (\d+) \(([^)]*)\)", rest)
                if m:
                    args = [int(a, 16) for a in m.group(2).split(", ") if a]
                    nr = int(m.group(1))
                    role = self.role_of[tid]
                    cls = self.classify(role, nr, args, args[2] if len(args) > 2 else -1)
                    sys_open[tid] = (ts, cls)
                    syscalls[role, cls] += 1
                    if cls in ("post", "bell", "verbs-cmd"):
                        marks.append((ts, f"{role}:{cls}>"))
            elif name == "sys_exit" and tid in sys_open:
                t0, cls = sys_open.pop(tid)
                role = self.role_of[tid]
                sys_time[role, cls] += ts - t0
                if cls == "post":
                    marks.append((ts, f"{role}:post<"))
            elif not rest.startswith("<-"):
                continue
            else:  # function hit
                ctx = "hardirq" if flags[2:3] in ("h", "H") else "softirq" if flags[2:3] == "s" else "task"
                w = self.who(tid, comm)
                funcs[name, f"{ctx} in {w}"] += 1
                if name == "rxe_cq_post":  # a completion lands in a CQ: a message has arrived
                    marks.append((ts, "cqe"))
        for cpu, (tid, comm, since) in cur.items():
            w = self.who(tid, comm)
            run[w].append((since, t_end))
            ontime[w] += t_end - since
        for k in run:
            run[k].sort()
        marks.sort()
        self.other_comm = other_comm
        self.report(t_start, t_end, run, ontime, soft, soft_in, syscalls, sys_time, marks, wake_lat, funcs, timers,
                    switches)

    def report(self, t0, t1, run, ontime, soft, soft_in, syscalls, sys_time, marks, wake_lat, funcs, timers, switches):
        b = [ts for ts, label in marks if label == self.boundary]
        n = len(b) - 1
        print(f"\n## {self.name}: {t1 - t0:.3f} s traced, {n} round trips ({self.boundary} to the next)")
        if n < 3:
            print("too few round trips to cut")
            return
        rtts = [(b[i + 1] - b[i]) * 1e6 for i in range(n)]
        span = b[-1] - b[0]
        print(f"round trip: p10 {sorted(rtts)[n // 10]:.0f} us, median {statistics.median(rtts):.0f} us, "
              f"mean {statistics.mean(rtts):.0f} us")
        # Each round trip cut at fixed milestones of its critical path.
        segs = STEPS[self.kind]
        cuts = collections.defaultdict(list)  # step index -> [(start, end, marks inside)]
        used = 0
        used_rtts = []
        j = bisect.bisect_left(marks, (b[0], ""))
        for i in range(n):
            inside = []
            while j < len(marks) and marks[j][0] < b[i + 1]:
                inside.append(marks[j])
                j += 1
            points = milestones(self.kind, inside, b[i], b[i + 1])
            if points is None:
                continue
            used += 1
            used_rtts.append(rtts[i])
            for k in range(len(points) - 1):
                a, e = points[k], points[k + 1]
                if a is None:
                    continue
                nxt = next((p for p in points[k + 1:] if p is not None))
                cuts[k].append((a, nxt, [lab for ts, lab in inside if a <= ts < nxt and lab != self.boundary]))
        if not used:
            print("no round trip has all milestones")
            return
        mean_rtt = statistics.mean(used_rtts)
        print(f"cut into steps: {used} of {n} round trips (the others lack a milestone); theirs: median "
              f"{statistics.median(used_rtts):.0f} us, mean {mean_rtt:.0f} us")
        cats = ["NET_RX", "TASKLET", "TIMER", "RCU", "SCHED"]
        busy_other = sorted(run.get("other", []) + run.get("kworker", []))
        print("\nsteps (mean us per round trip: a step missing from a round trip counts 0 there; share of the mean")
        print("round trip); kernel columns: mean us of the step spent, over both vCPUs, in softirq by kind, in")
        print("ksoftirqd, idle, on other tasks; events: per round trip, inside the step")
        print("| step | p10 us | median us | mean us | share | " + " | ".join(cats) + " | ksoftirqd | idle | other | events |")
        print("|---|---:|---:|---:|---:|" + "---:|" * (len(cats) + 3) + "---|")
        for k, title in enumerate(segs):
            if not cuts[k]:
                continue
            d = sorted((e - a) * 1e6 for a, e, _ in cuts[k])
            mean = sum(d) / used
            kern = [sum(overlap(soft.get(c, []), a, e) for a, e, _ in cuts[k]) / used * 1e6 for c in cats]
            ks = sum(overlap(run.get("ksoftirqd", []), a, e) for a, e, _ in cuts[k]) / used * 1e6
            idle = sum(overlap(run.get("idle", []), a, e) for a, e, _ in cuts[k]) / used * 1e6
            oth = sum(overlap(busy_other, a, e) for a, e, _ in cuts[k]) / used * 1e6
            evs = collections.Counter(lab.rstrip("<>") for _, _, labs in cuts[k] for lab in labs
                                      if not lab.endswith("<"))
            ev_text = ", ".join(f"{lab} {c / used:.2f}" for lab, c in evs.most_common(6))
            print(f"| {title} | {d[len(d) // 10]:.0f} | {statistics.median(d):.0f} | {mean:.0f} | {100 * mean / mean_rtt:.0f}% | " +
                  " | ".join(f"{x:.0f}" for x in kern) + f" | {ks:.0f} | {idle:.0f} | {oth:.0f} | {ev_text} |")

        per = 1e6 / n
        print(f"\nper round trip over the window (us of CPU time, both vCPUs; {2 * span * per:.0f} us of vCPU time each)")
        print("| who | on CPU | in softirq while current (NET_RX / TASKLET / other) | switched out |")
        print("|---|---:|---:|---:|")
        whos = sorted(set(ontime) | {w for _, w in soft_in}, key=lambda w: -ontime[w])
        for w in whos:
            nr = soft_in["NET_RX", w] * per
            tl = soft_in["TASKLET", w] * per
            ot = sum(v for (vec, ww), v in soft_in.items() if ww == w and vec not in ("NET_RX", "TASKLET")) * per
            print(f"| {w} | {ontime[w] * per:.0f} | {nr:.0f} / {tl:.0f} / {ot:.0f} | {switches[w] / n:.2f} |")
        print(f"timer interrupts per round trip: {len(timers) / n:.2f}; 'other' was: " +
              ", ".join(f"{c} {t * per:.0f}" for c, t in self.other_comm.most_common(5)))

        print("\nsyscalls per round trip (traced; sched_yield and clock_gettime counted by hist) and us inside")
        roles = sorted(set(self.role_of.values()))
        for r in roles:
            items = sorted(((c, k) for (rr, k), c in syscalls.items() if rr == r), reverse=True)
            tids = [t for t, rr in self.role_of.items() if rr == r]
            for f in ("sched_yield", "clock_gettime"):
                c = sum(self.hist[f, t] for t in tids)
                if c:
                    items.append((c, f))
            text = ", ".join(f"{k} {c / n:.2f}" + (f" ({sys_time[r, k] * 1e6 / c:.0f} us each)"
                                                    if sys_time[r, k] and c else "") for c, k in items)
            print(f"  {r}: {text or '-'}")

        print("\nrxe/uverbs functions per round trip, by the context they ran in")
        byf = collections.defaultdict(list)
        for (f, ctx), c in funcs.items():
            byf[f].append((c, ctx))
        for f in sorted(byf):
            print(f"  {f}: " + ", ".join(f"{ctx} {c / n:.2f}" for c, ctx in sorted(byf[f], reverse=True)))

        print("\nwake-ups of the scenario's threads: waking -> running, us (target vCPU idle at the wake-up or busy)")
        for (r, idle), v in sorted(wake_lat.items()):
            v.sort()
            print(f"  {r} ({'idle vCPU' if idle else 'busy vCPU'}): {len(v) / n:.2f} per round trip, "
                  f"p50 {v[len(v) // 2]:.0f}, p90 {v[9 * len(v) // 10]:.0f}, max {v[-1]:.0f}")


_longest = {}


STEPS = {
    "ferry": ["1 B's reply post until the reply is in A's CQ (inline wire)",
              "2 A sees the reply, completes to the client, client wakes",
              "3 client runs and submits; A picks the call up",
              "4 A binds the window (until the SEND post)",
              "5 A's SEND post until the request is in B's CQ (inline wire)",
              "6 B sees the request, delivers, server wakes",
              "7 server runs and replies; B picks the reply up and posts"],
    "peer": ["1 server's post until the reply is in the client's CQ (inline wire)",
             "2 client sees the reply and posts the next request",
             "3 client's post until the request is in the server's CQ (inline wire)",
             "4 server sees the request and posts the reply"],
}


def first(marks, label, after):
    return next((ts for ts, lab in marks if lab == label and ts >= after), None)


def last(marks, label, before, after):
    v = [ts for ts, lab in marks if lab == label and after <= ts < before]
    return v[-1] if v else None


def milestones(kind, inside, t0, t_next):
    """Start times of the steps of STEPS[kind] in one round trip, then t_next;
    None for a step that did not happen (a process that never slept). A
    message has arrived at the first completion posted after its post began
    (rxe_cq_post: the receiver's responder, inline in the sender's post)."""
    if kind == "ferry":
        ta = first(inside, "cqe", t0)
        if ta is None:
            return None
        tc = first(inside, "client:run", ta)
        ta1 = first(inside, "A:post>", tc if tc is not None else ta)
        if ta1 is None:
            return None
        tsv = first(inside, "server:run", ta1)
        send = last(inside, "A:post>", tsv if tsv is not None else t_next, ta1)
        tb = first(inside, "cqe", send)
        if tb is None or (tsv is not None and tb > tsv):
            return None
        return [t0, ta, tc, ta1, send if send > ta1 else None, tb, tsv, t_next]
    ta = first(inside, "cqe", t0)
    t2 = first(inside, "client:post>", ta) if ta is not None else None
    tb = first(inside, "cqe", t2) if t2 is not None else None
    if tb is None:
        return None
    return [t0, ta, t2, tb, t_next]


def overlap(intervals, a, b):
    """Seconds of [a, b] covered by the intervals (sorted by start)."""
    if not intervals:
        return 0.0
    key = id(intervals)
    if key not in _longest or _longest[key][0] is not intervals:
        _longest[key] = (intervals, max(e - s for s, e in intervals))
    i = bisect.bisect_left(intervals, (a - _longest[key][1], 0.0))
    total = 0.0
    while i < len(intervals) and intervals[i][0] < b:
        s, e = intervals[i]
        if e > a:
            total += min(e, b) - max(s, a)
        i += 1
    return total


def main():
    d = sys.argv[1]
    for name in sys.argv[2:]:
        try:
            Scenario(d, name).analyse()
        except FileNotFoundError as e:
            print(f"\n## {name}: missing {e.filename}")


if __name__ == "__main__":
    main()
