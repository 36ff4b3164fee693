#!/usr/bin/env bash
# trace-roundtrip.sh: inside the Soft-RoCE VM (a checks line through
# run-vm-suite.sh --checks, `@no-meson` first), where one 64 B round trip
# spends its time. For each scenario it runs the workload in its steady
# state and records TRACE_SECONDS of ftrace: scheduler switches and wake-ups,
# softirq raise/entry/exit, timer and IPI interrupts, every syscall but
# sched_yield and clock_gettime (those two are counted per thread with hist
# triggers instead: a spinning engine makes tens of thousands), and the rxe
# and uverbs functions that move a message (requester, responder, completer,
# receive, CQ notification). trace_roundtrip.py then cuts the trace into
# round trips and each round trip into steps between the marks of its
# critical path (posts, doorbells, wake-ups, switches), with what the kernel
# did meanwhile.
#   ferry-MODE (MODE from ferry-modes.sh): ferry-bench remote-rpc, client on
#     daemon A (ADDR0/rxe0), echo server on daemon B (ADDR1/rxe1);
#   rstream / rstream-wait: rsockets on the same devices, spinning and
#     blocking on the completion channel (bench-peers.sh);
#   ib_send_lat: raw verbs, both ends spinning.
# Environment: TRACE_SCENARIOS (default "ferry-default ferry-nospin
# ferry-busy rstream rstream-wait"), TRACE_SECONDS (0.4), TRACE_SIZE (64).
# Diagnostic, not a test; writes the raw traces next to its output.
#   trace 900 tests/rdma/trace-roundtrip.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${FERRY_BUILD:?} dir=${FERRY_CHECK_DIR:-$(mktemp -d)}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-trace-XXXXXX")
bench=$build/tests/perf/ferry-bench
port=7640 spin_us=${TRACE_SPIN_US:-2000} size=${TRACE_SIZE:-64} window=${TRACE_SECONDS:-0.4}
scenarios=${TRACE_SCENARIOS:-ferry-default ferry-nospin ferry-busy rstream rstream-wait}
pids=() daemons=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
# shellcheck source=tests/rdma/ferry-modes.sh
source "$here/ferry-modes.sh"
# shellcheck source=tests/rdma/bench-peers.sh
source "$here/bench-peers.sh"
# shellcheck source=tests/rdma/procs.sh
source "$here/procs.sh" # roles

exec {quiet_fd}<> <(:) # never readable: read -t on it waits
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T
events=(sched/sched_switch sched/sched_waking irq/softirq_raise irq/softirq_entry irq/softirq_exit
  irq_vectors/local_timer_entry irq_vectors/reschedule_entry irq_vectors/call_function_single_entry
  raw_syscalls/sys_enter raw_syscalls/sys_exit)
funcs=()
for f in rxe_post_send rxe_requester rxe_responder rxe_completer rxe_rcv rxe_req_notify_cq ib_uverbs_comp_handler \
  rxe_cq_post rxe_bind_mw rxe_invalidate_mw; do
  grep -qx "$f \[.*\]\|$f" $T/available_filter_functions && funcs+=("$f")
done
echo "functions traced: ${funcs[*]}"
((${#funcs[@]} > 0)) || { echo "no rxe function to trace (is rdma_rxe loaded?)" >&2; exit 1; }

trace() { # trace NAME: TRACE_SECONDS of the running workload into NAME.trace
  local ev f
  echo 0 >$T/tracing_on
  echo global >$T/trace_clock
  echo 40000 >$T/buffer_size_kb
  echo nop >$T/current_tracer
  printf '%s\n' "${funcs[@]}" >$T/set_ftrace_filter
  echo >$T/trace
  echo 'id != 24 && id != 228' >$T/events/raw_syscalls/sys_enter/filter
  echo 'id != 24 && id != 228' >$T/events/raw_syscalls/sys_exit/filter
  for f in sched_yield clock_gettime; do
    echo 'hist:keys=common_pid:vals=hitcount' >$T/events/syscalls/sys_enter_$f/trigger
  done
  for ev in "${events[@]}"; do echo 1 >"$T/events/$ev/enable"; done
  echo function >$T/current_tracer
  echo 1 >$T/tracing_on
  # A builtin wait: a sleep process starting inside the window would be
  # milliseconds of CPU under emulation.
  read -r -t "$window" -u "$quiet_fd" _ || true
  echo 0 >$T/tracing_on
  # Read before the tracer changes: changing it empties the buffer.
  cat $T/trace >"$dir/$1.trace"
  echo nop >$T/current_tracer
  for ev in "${events[@]}"; do echo 0 >"$T/events/$ev/enable"; done
  for f in sched_yield clock_gettime; do
    grep -E '^\{ common_pid' $T/events/syscalls/sys_enter_$f/hist | sed "s/^/$f /" >>"$dir/$1.hist" || true
    echo '!hist:keys=common_pid:vals=hitcount' >$T/events/syscalls/sys_enter_$f/trigger
  done
  echo "$1: $(wc -l <"$dir/$1.trace") trace lines" >&2
}

ferry_scenario() { # ferry_scenario NAME MODE
  local name=$1 b srv
  mode_flags "$2"
  daemons=()
  start_daemons "$name"
  local args=(remote-rpc --size "$size" "${bench_flags[@]}" --socket "$run/a/ferryd.sock"
    --server-socket "$run/b/ferryd.sock" --target "$ADDR1:$port" --json)
  run_bench "$dir/$name-warm.out" "${args[@]}" --iters 300 || run_bench "$dir/$name-warm.out" "${args[@]}" --iters 300
  # Long enough that the roles (slow under emulation) and the window both
  # fall inside the measured phase.
  run_bench "$dir/$name.out" "${args[@]}" --duration 20 &
  local job=$!
  sleep 2
  b=$(pgrep -of "ferry-bench remote-rpc") srv=$(pgrep -P "$b" | head -n1)
  roles "$name" A="${daemons[0]}" B="${daemons[1]}" client="$b" server="$srv"
  kill -0 "$b" 2>/dev/null || echo "$name: the bench ended before the trace" >&2
  trace "$name"
  wait $job || echo "$name: bench failed: $(tail -n1 "$dir/$name.out")" >&2
  echo "== $name: $(tail -n1 "$dir/$name.out")"
  stop_daemons
  port=$((port + 1))
}

# traced_pair NAME SERVER_CMD... -- CLIENT_CMD...: a server, then its client
# (each bounded at 120 s, output in NAME.server / NAME.client), the trace of
# their steady state, both stopped.
traced_pair() {
  local name=$1 s c i
  shift
  for ((i = 1; i <= $#; i++)); do [[ ${!i} == -- ]] && break; done
  local server=("${@:1:i-1}") client=("${@:i+1}")
  timeout 120 "${server[@]}" >"$dir/$name.server" 2>&1 &
  s=$!
  pids+=($s)
  sleep 1
  timeout 120 "${client[@]}" >"$dir/$name.client" 2>&1 &
  c=$!
  pids+=($c)
  sleep 2
  roles "$name" server=$s client=$c
  trace "$name"
  kill $c $s 2>/dev/null || true
  wait $c $s 2>/dev/null || true
}

rstream_scenario() { # rstream_scenario NAME [FLAG...]
  local name=$1
  shift
  traced_pair "$name" rstream -b "$ADDR0" -p $port -S "$size" -C 1 -I 1000000 "$@" -- \
    rstream -s "$ADDR0" -b "$ADDR1" -p $port -S "$size" -C 1 -I 1000000 "$@"
  port=$((port + 1))
}

perftest_scenario() { # perftest_scenario NAME
  traced_pair "$1" ib_send_lat -d "$RXE0" -x "$GID_INDEX" -s "$size" -n 100000 -F -p 7700 -- \
    ib_send_lat -d "$RXE1" -x "$GID_INDEX" -s "$size" -n 100000 -F -p 7700 "$ADDR0"
}

for sc in $scenarios; do
  case $sc in
    ferry-*) ferry_scenario "$sc" "${sc#ferry-}" ;;
    rstream) rstream_scenario "$sc" ;;
    rstream-wait) rstream_scenario "$sc" -T b ;;
    ib_send_lat) perftest_scenario "$sc" ;;
    *) echo "unknown scenario $sc" >&2; exit 2 ;;
  esac
done
python3 "$here/trace_roundtrip.py" "$dir" $scenarios
