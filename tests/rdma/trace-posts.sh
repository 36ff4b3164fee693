#!/usr/bin/env bash
# trace-posts.sh: inside the Soft-RoCE VM (a checks line through
# run-vm-suite.sh --checks, `@no-meson` first), times every write() of
# ferryd (remote-rpc at 64 B, one call outstanding, --rdma-windows 0) and
# of ib_send_lat with ftrace (raw_syscalls sys_enter/sys_exit filtered to
# write, plus sched_switch), and prints, per process and file descriptor,
# the write's size, result and duration percentiles, and whether the task
# was switched out inside. A verbs post on rxe is a 32-byte write on the
# uverbs device (the whole RoCE path runs inside it); an 8-byte write is an
# eventfd doorbell; a write failing with -11 is an empty rdma_cm event poll.
# Diagnostic, not a test (docs/benchmarks/soft-roce-rdma.md, "Where the time goes"):
#   post 400 tests/rdma/trace-posts.sh
# Environment: TRACE_MODES (default "busy-arena default-arena").
set -euo pipefail
build=${FERRY_BUILD:?} dir=${FERRY_CHECK_DIR:-$(mktemp -d)} port=7630
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
events=(sched/sched_switch raw_syscalls/sys_enter raw_syscalls/sys_exit)
trace() { # trace NAME SECONDS
  echo 0 >$T/tracing_on && echo 20000 >$T/buffer_size_kb && echo >$T/trace
  echo 'id == 1' >$T/events/raw_syscalls/sys_enter/filter
  echo 'id == 1' >$T/events/raw_syscalls/sys_exit/filter
  for ev in "${events[@]}"; do echo 1 >"$T/events/$ev/enable"; done
  echo 1 >$T/tracing_on && sleep "$2" && echo 0 >$T/tracing_on
  for ev in "${events[@]}"; do echo 0 >"$T/events/$ev/enable"; done
  cat $T/trace >"$dir/$1-trace.txt"
}
summary() { # summary NAME
  python3 - "$dir/$1-trace.txt" <<'PY'
import collections, re, statistics, sys
line = re.compile(r'^\s*(\S+)-(\d+)\s+\[\d+\].{5,6}\s+([\d.]+): (\w+): (.*)$')
open_, durs = {}, collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = line.match(l)
    if not m:
        continue
    comm, pid, ts, name, rest = m.groups()
    ts = float(ts)
    if name == 'sys_enter':
        a = re.search(r'NR 1 \((\w+), \w+, (\w+)', rest)
        open_[pid] = [ts, comm, False, a.group(1), int(a.group(2), 16)]
    elif name == 'sys_exit' and pid in open_:
        t0, c, sw, fd, n = open_.pop(pid)
        durs[(c, pid, fd, n, rest.split('= ')[-1], sw)].append((ts - t0) * 1e6)
    elif name == 'sched_switch':
        p = re.search(r'prev_pid=(\d+)', rest).group(1)
        if p in open_:
            open_[p][2] = True
print("| process | pid | fd | bytes | result | switched out inside | writes | p10 us | p50 us | p90 us |")
print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
for k, v in sorted(durs.items(), key=lambda kv: -len(kv[1])):
    if len(v) >= 5:
        v.sort()
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {'yes' if k[5] else 'no'} | {len(v)} | "
              f"{v[len(v) // 10]:.0f} | {statistics.median(v):.0f} | {v[9 * len(v) // 10]:.0f} |")
PY
}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-trace-XXXXXX")
pids=()
# shellcheck source=../../scripts/lib/daemons.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/daemons.sh"
trap 'ferry_stop_daemons; kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for mode in ${TRACE_MODES:-busy-arena default-arena}; do
  spin=() flags=()
  [[ $mode == busy* ]] && { spin=(--engine-spin-us 2000); flags=(--busy-poll); }
  for side in a b; do
    [[ $side == a ]] && addr=$ADDR0 || addr=$ADDR1
    ferry_start_daemon --wait 20 --log "$dir/$mode-$side.log" "$build/daemon/ferryd" "$run/$mode-$side" \
      --listen "$addr:$port" --transport rdma --rdma-ack-timeout 18 --connect-timeout-ms 20000 \
      --peer-timeout-ms 10000 --channel-conns 1 --rdma-windows 0 "${spin[@]}" || exit 1
  done
  bench=("$build/tests/perf/ferry-bench" remote-rpc --size 64 "${flags[@]}" --socket "$run/$mode-a/ferryd.sock"
    --server-socket "$run/$mode-b/ferryd.sock" --target "$ADDR1:$port" --json)
  "${bench[@]}" --iters 200 >"$dir/$mode-warm.out" 2>&1 # brings the channel up
  "${bench[@]}" --iters 4000 >"$dir/$mode.out" 2>&1 &
  b=$!
  sleep 1 && trace "$mode" 0.5
  wait $b
  echo "== ferry $mode: $(tail -n1 "$dir/$mode.out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("p50", j["p50_us"], "us, min", j["min_us"], "us")')"
  summary "$mode"
  ferry_stop_daemons 30
  port=$((port + 1))
done
pids=()
ib_send_lat -d "$RXE0" -x "$GID_INDEX" -s 64 -n 40000 -F -p 7700 >"$dir/perftest.server" 2>&1 &
pids+=($!)
sleep 1
ib_send_lat -d "$RXE1" -x "$GID_INDEX" -s 64 -n 40000 -F -p 7700 "$ADDR0" >"$dir/perftest.client" 2>&1 &
pids+=($!)
sleep 1.5 && trace perftest 0.5
wait "${pids[@]}"
echo "== ib_send_lat: $(grep -A1 t_min "$dir/perftest.client" | tail -n1)"
summary perftest
