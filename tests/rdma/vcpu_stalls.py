#!/usr/bin/env python3
"""What the machine does to a guest vCPU, measured from inside the VM.

usage: vcpu_stalls.py spin SECONDS     (run one per vCPU, pinned with taskset)
       vcpu_stalls.py sleep SECONDS INTERVAL_US

spin: reads the monotonic clock in a tight loop and counts the gaps longer
than 100 us: time in which this spinning process did not run, although
nothing else in the guest wanted its vCPU (under TCG the host descheduled
the vCPU thread, or the guest kernel took an interrupt or ran softirq work).
sleep: sleeps INTERVAL_US at a time and measures how late each wake-up
came (a timer wake-up of an idle vCPU: the guest halted it, and the host
must schedule its thread again).
Prints one JSON object.
"""
import json
import statistics
import sys
import time


def spin(seconds):
    now = time.monotonic_ns
    end = now() + int(seconds * 1e9)
    last = now()
    gaps = []
    loops = 0
    while last < end:
        t = now()
        loops += 1
        if t - last > 100_000:
            gaps.append((t - last) / 1000)
        last = t
    total = sum(gaps)
    return {"mode": "spin", "seconds": seconds, "loops": loops, "gaps_over_100us": len(gaps),
            "stalled_share": round(total / (seconds * 1e6), 4),
            "gap_p50_us": round(statistics.median(gaps), 1) if gaps else 0,
            "gap_max_us": round(max(gaps), 1) if gaps else 0}


def sleep(seconds, interval_us):
    late = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic_ns()
        time.sleep(interval_us / 1e6)
        late.append((time.monotonic_ns() - t0) / 1000 - interval_us)
    late.sort()
    return {"mode": "sleep", "seconds": seconds, "interval_us": interval_us, "wakeups": len(late),
            "late_p50_us": round(late[len(late) // 2], 1), "late_p90_us": round(late[9 * len(late) // 10], 1),
            "late_max_us": round(late[-1], 1)}


if __name__ == "__main__":
    if sys.argv[1] == "spin":
        print(json.dumps(spin(float(sys.argv[2]))))
    else:
        print(json.dumps(sleep(float(sys.argv[2]), float(sys.argv[3]))))
