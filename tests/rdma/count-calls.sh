#!/usr/bin/env bash
# count-calls.sh: inside the Soft-RoCE VM (a checks line through
# run-vm-suite.sh --checks, `@no-meson` first), counts per call that
# transfer to hardware, for ferry's remote-rpc and for the peers on the same
# devices. In the steady state of each scenario it counts, for
# COUNT_SECONDS, with in-kernel hist triggers (nothing written per event):
#   every syscall per thread (raw_syscalls/sys_enter, keyed by thread and number);
#   kprobes on rxe: rxe_post_send (one per ibv_post_send: a doorbell),
#   rxe_requester (one per send-queue work request the requester takes, plus
#   one that finds the queue empty), rxe_bind_mw (memory-window binds),
#   rxe_cq_post (completions written: received messages and signalled
#   sends), rxe_req_notify_cq (CQ arms), ib_uverbs_comp_handler (completion
#   events: a CQ that was armed got an entry);
#   context switches out (sched_switch by prev_pid) and wake-ups (sched_wakeup by pid);
# and the on-CPU time of every thread (schedstat). The calls (round trips)
# of the window are the requests the serving device received (rdma_recvs of
# rxe1 for ferry, whose daemon B serves; of rxe0 for the peers). ferry's
# own counters come from ferryctl status --json before and after, per
# remote_calls of the same reads. count_calls.py prints the table.
#   ferry-MODE:SIZE (ferry-modes.sh), rstream:SIZE, fi_pingpong:SIZE, ib_send_lat:SIZE
# Environment: COUNT_SCENARIOS (default below), COUNT_SECONDS (3).
#   counts 900 tests/rdma/count-calls.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${FERRY_BUILD:?} dir=${FERRY_CHECK_DIR:-$(mktemp -d)}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-count-XXXXXX")
bench=$build/tests/perf/ferry-bench ctl=$build/control/ferryctl
port=7660 spin_us=${COUNT_SPIN_US:-2000} window=${COUNT_SECONDS:-3}
scenarios=${COUNT_SCENARIOS:-ferry-default:64 ferry-default:65536 ferry-arena:64 ferry-busy:64 ferry-nospin:64 rstream:64 rstream:65536 fi_pingpong:64 ib_send_lat:64}
pids=() daemons=()
T=/sys/kernel/tracing
probes=(rxe_post_send rxe_requester rxe_bind_mw rxe_cq_post rxe_req_notify_cq ib_uverbs_comp_handler)
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip rule del pref 98 2>/dev/null || true
  echo 0 >$T/events/kprobes/enable 2>/dev/null || true
  echo >$T/kprobe_events 2>/dev/null || true
}
trap cleanup EXIT
# shellcheck source=tests/rdma/ferry-modes.sh
source "$here/ferry-modes.sh"
# shellcheck source=tests/rdma/bench-peers.sh
source "$here/bench-peers.sh"
# shellcheck source=tests/rdma/procs.sh
source "$here/procs.sh"
exec {quiet_fd}<> <(:) # never readable: read -t on it waits without a process

mountpoint -q $T || mount -t tracefs nodev $T
echo >$T/kprobe_events
for f in "${probes[@]}"; do echo "p:ferry_$f $f" >>$T/kprobe_events; done
triggers=("raw_syscalls/sys_enter:hist:keys=common_pid,id:vals=hitcount:size=8192"
  "sched/sched_switch:hist:keys=prev_pid:vals=hitcount"
  "sched/sched_wakeup:hist:keys=pid:vals=hitcount")
for f in "${probes[@]}"; do triggers+=("kprobes/ferry_$f:hist:keys=common_pid:vals=hitcount"); done

count() { # count NAME: COUNT_SECONDS of hist counts into NAME.counts
  local t ev spec
  # Set up paused, then counted between one cont and one pause per trigger
  # (removing a trigger drops its table, and setting one up is slow).
  for t in "${triggers[@]}"; do
    ev=${t%%:*} spec=${t#*:}
    echo "$spec:pause" >>"$T/events/$ev/trigger"
  done
  # Each trigger gets its own denominator: the requests the serving
  # devices had received when its cont and its pause returned (writing a
  # trigger takes long under emulation, so one bracket for all would count
  # calls that some triggers never saw).
  local i=0
  snap "$1" 0
  for t in "${triggers[@]}"; do
    echo "${t#*:}:cont" >>"$T/events/${t%%:*}/trigger"
    win "$1" 0 $i
    i=$((i + 1))
  done
  read -r -t "$window" -u "$quiet_fd" _ || true
  i=0
  for t in "${triggers[@]}"; do
    echo "${t#*:}:pause" >>"$T/events/${t%%:*}/trigger"
    win "$1" 1 $i
    i=$((i + 1))
  done
  snap "$1" 1
  : >"$dir/$1.counts"
  for t in "${triggers[@]}"; do
    ev=${t%%:*} spec=${t#*:}
    grep '^{' "$T/events/$ev/hist" | sed "s|^|${ev#*/} |" >>"$dir/$1.counts" || true
    grep -i dropped "$T/events/$ev/hist" | sed "s|^|dropped ${ev#*/} |" >>"$dir/$1.cpu" || true
    echo "!$spec" >>"$T/events/$ev/trigger"
  done
}
# win NAME TAG INDEX: the serving devices' received requests, now.
win() {
  local a b
  read -r a <"/sys/class/infiniband/$RXE0/ports/1/hw_counters/rdma_recvs"
  read -r b <"/sys/class/infiniband/$RXE1/ports/1/hw_counters/rdma_recvs"
  echo "win $2 $3 $a $b" >>"$dir/$1.cpu"
}
# snap NAME TAG: on-CPU ns of every thread in NAME.roles and the devices'
# hw counters, with shell builtins only (a process start under emulation
# takes longer than many calls). The calls of the window are the messages
# the serving device received (rdma_recvs: one per request).
snap() {
  local t v f kind
  echo "time $2 ${EPOCHREALTIME/./}" >>"$dir/$1.cpu"
  while read -r kind _ _ t _; do
    [[ $kind == role ]] || continue
    v=-
    read -r v _ 2>/dev/null <"/proc/$t/schedstat" || v=-
    echo "cpu $2 $t $v"
  done <"$dir/$1.roles" >>"$dir/$1.cpu"
  for f in /sys/class/infiniband/{"$RXE0","$RXE1"}/ports/1/hw_counters/{rdma_recvs,rdma_sends,sent_pkts,rcvd_pkts}; do
    read -r v <"$f"
    v=${f#/sys/class/infiniband/}
    echo "hw $2 ${v%%/*} ${f##*/} $(<"$f")"
  done >>"$dir/$1.cpu"
}

ferry_scenario() { # ferry_scenario NAME MODE SIZE
  local name=$1 b srv
  mode_flags "$2"
  daemons=()
  start_daemons "$name"
  local args=(remote-rpc --size "$3" "${bench_flags[@]}" --socket "$run/a/ferryd.sock"
    --server-socket "$run/b/ferryd.sock" --target "$ADDR1:$port" --json)
  run_bench "$dir/$name-warm.out" "${args[@]}" --iters 200 || run_bench "$dir/$name-warm.out" "${args[@]}" --iters 200
  # Longer than anything below: the bench is stopped once counted.
  run_bench "$dir/$name.out" "${args[@]}" --duration 120 &
  local job=$!
  sleep 2
  b=$(pgrep -of "ferry-bench remote-rpc") srv=$(pgrep -P "$b" | head -n1)
  roles "$name" A="${daemons[0]}" B="${daemons[1]}" client="$b" server="$srv"
  : >"$dir/$name.cpu"
  # ferry's own counters over their own bracket (ferryctl starts slowly):
  # per call = delta / remote_calls delta of the same two reads.
  "$ctl" --control "$run/a/control.sock" status --json >"$dir/$name.a0.json"
  "$ctl" --control "$run/b/control.sock" status --json >"$dir/$name.b0.json"
  count "$name"
  "$ctl" --control "$run/a/control.sock" status --json >"$dir/$name.a1.json"
  "$ctl" --control "$run/b/control.sock" status --json >"$dir/$name.b1.json"
  kill -0 "$b" 2>/dev/null || echo "$name: the bench ended before the counts did" >&2
  kill "$b" 2>/dev/null || true
  wait $job 2>/dev/null || true
  stop_daemons
  port=$((port + 1))
}

peer_scenario() { # peer_scenario NAME TOOL SIZE
  local name=$1 s c
  case $2 in
    rstream)
      timeout 120 rstream -b "$ADDR0" -p $port -S "$3" -C 1 -I 1000000 >"$dir/$name.server" 2>&1 &
      s=$!
      sleep 1
      timeout 120 rstream -s "$ADDR0" -b "$ADDR1" -p $port -S "$3" -C 1 -I 1000000 >"$dir/$name.client" 2>&1 &
      c=$! ;;
    fi_pingpong)
      ip rule add pref 98 to "$ADDR0" lookup 102 # bench-peers.sh: the client resolves to rxe1
      timeout 120 fi_pingpong -p verbs -e msg -d "$RXE0" -B $((port + 40000)) -S "$3" -I 1000000 >"$dir/$name.server" 2>&1 &
      s=$!
      sleep 1
      timeout 120 fi_pingpong -p verbs -e msg -d "$RXE1" -P $((port + 40000)) -S "$3" -I 1000000 "$ADDR0" >"$dir/$name.client" 2>&1 &
      c=$! ;;
    ib_send_lat)
      timeout 120 ib_send_lat -d "$RXE0" -x "$GID_INDEX" -s "$3" -n 1000000 -F -p $((port + 1000)) >"$dir/$name.server" 2>&1 &
      s=$!
      sleep 1
      timeout 120 ib_send_lat -d "$RXE1" -x "$GID_INDEX" -s "$3" -n 1000000 -F -p $((port + 1000)) "$ADDR0" >"$dir/$name.client" 2>&1 &
      c=$! ;;
  esac
  pids+=($s $c)
  sleep 3
  roles "$name" server=$s client=$c
  : >"$dir/$name.cpu"
  count "$name"
  kill $c $s 2>/dev/null || true
  wait $c $s 2>/dev/null || true
  ip rule del pref 98 2>/dev/null || true
  port=$((port + 1))
}

names=() done_names=()
# Stopped by its check's timeout: the table of the scenarios counted so far.
trap 'echo "STOPPED (timeout): the scenarios counted so far"; ((${#done_names[@]})) && python3 "$here/count_calls.py" "$dir" "$window" "${done_names[@]}"; exit 124' TERM
for sc in $scenarios; do
  kind=${sc%%:*} size=${sc#*:} name=${sc/:/-}
  names+=("$name")
  case $kind in
    ferry-*) ferry_scenario "$name" "${kind#ferry-}" "$size" ;;
    rstream | fi_pingpong | ib_send_lat) peer_scenario "$name" "$kind" "$size" ;;
    *) echo "unknown scenario $sc" >&2; exit 2 ;;
  esac
  echo "counted $name"
  done_names+=("$name")
done
python3 "$here/count_calls.py" "$dir" "$window" "${names[@]}"
