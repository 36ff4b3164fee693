#!/usr/bin/env bash
# bench-vs-perftest.sh: inside the Soft-RoCE VM (run it as a checks line
# through run-vm-suite.sh --checks, e.g. tests/rdma/bench.list), compares
# ferry's remote-rpc over rdma lanes with the other ways of making one round
# trip between the same two rxe devices and addresses, all in the same run:
#   ferry-bench remote-rpc: client on daemon A (ADDR0/rxe0) -> echo server on
#     daemon B (ADDR1/rxe1), one call outstanding, SIZE bytes each way, in
#     each of BENCH_MODES (mode_flags below: ferryd defaults, busy polling,
#     no memory windows, engine spin settings, CPU pinning in the guest);
#   ferry-bench tcp-rpc: kernel TCP, client (source ADDR0, forced across
#     veth0) -> `ferry-bench tcp-server` on ADDR1, blocking I/O, TCP_NODELAY;
#   ferry-bench tcp-relay-rpc ("relay"): the same kernel TCP through a relay
#     process on each side (client -> relay A -> relay B -> server), the
#     four processes of a ferry call with no ferry code in the path;
#   the software RDMA peers (bench-peers.sh): rsockets' rstream (spinning,
#     and "rstream-wait": blocking on the completion channel) and
#     libfabric's verbs provider (fi_pingpong, RC endpoints), client on rxe1,
#     server on rxe0, each checked to have crossed both devices;
#   raw verbs: ib_send_lat / ib_write_lat rxe1 -> rxe0 (one-way latency,
#     half a ping-pong; stored as twice that, a round trip);
#   the machine (vcpu_stalls.py, each repeat): the share of time a spinning
#     vCPU does not run, and how late a sleeping one wakes;
#   ferry-bench local-rpc (per mode, daemon A alone) and uds-rpc: the
#     process hops of a call without the wire, and the machine's cost of one
#     kernel-mediated round trip between two processes (BENCH_LOCAL=0 skips).
# Emulation makes absolute times meaningless (docs/testing.md, the
# Soft-RoCE VM; docs/rdma-latency.md): the summary (bench_summary.py) gives ratios of medians
# over repeats, per size; raw medians are printed too, for the record.
# Every measurement is repeated BENCH_REPEATS times, interleaved (each repeat
# runs, size by size, every tool once), so host load drifts hit all tools alike.
# Environment: BENCH_SIZES (default "64 4096 65536 1048576"; BENCH_SIZE, one
# size, still works), BENCH_ITERS (per size up to 4 KiB; 64 KiB gets 1/4,
# 1 MiB 1/20), BENCH_REPEATS (3), BENCH_MODES ("default busy"),
# BENCH_PEERS ("rstream fi_pingpong"; add rstream-wait), BENCH_TOOLS
# (default "ferry tcp relay peers perftest uds"), BENCH_LOCAL (1),
# BENCH_SPIN_US (2000: at 100000, four spinning processes on the VM's 2
# vCPUs starved the channel handshake, which timed out again and again).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sizes=${BENCH_SIZES:-${BENCH_SIZE:-64 4096 65536 1048576}}
iters_base=${BENCH_ITERS:-2000} repeats=${BENCH_REPEATS:-3}
modes=${BENCH_MODES:-default busy} spin_us=${BENCH_SPIN_US:-2000}
peers=${BENCH_PEERS:-rstream fi_pingpong} tools=${BENCH_TOOLS:-ferry tcp relay peers perftest uds}
with_local=${BENCH_LOCAL:-1}
build=${FERRY_BUILD:?}
dir=${FERRY_CHECK_DIR:-$(mktemp -d)}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-bench-XXXXXX") # sockets: not on the 9p results share
bench=$build/tests/perf/ferry-bench
port=7610 tcp_port=7620 relay_port=7621
# One row per measurement: repeat tool size p50_us min_us mean_us cpu_us
# daemon_cpu_us. Round trips throughout (perftest: twice its one-way
# figures); cpu_us is the CPU of every process of the tool per round trip,
# daemon_cpu_us that of the two ferryd. Empty where the tool has no such
# figure (rstream and fi_pingpong report a mean only).
results=$dir/results.tsv
: >"$results"
pids=() daemons=() failures=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip rule del pref 99 2>/dev/null || true
  ip rule del pref 98 2>/dev/null || true
}
trap cleanup EXIT
# Stopped by its check's timeout: the summary of what was measured so far
# (the bench under a heavily loaded host may not finish its repeats).
summary() { python3 "$here/bench_summary.py" "$results" "$sizes" "$modes" "$dir/machine.jsonl"; }
trap 'echo "STOPPED (timeout): the summary of the measurements taken so far"; summary; exit 124' TERM
# shellcheck source=tests/rdma/bench-peers.sh
source "$here/bench-peers.sh"
# shellcheck source=tests/rdma/ferry-modes.sh
source "$here/ferry-modes.sh"

iters_for() { # iters_for SIZE
  if (($1 >= 1048576)); then echo $((iters_base / 20 > 20 ? iters_base / 20 : 20))
  elif (($1 >= 65536)); then echo $((iters_base / 4 > 50 ? iters_base / 4 : 50))
  else echo "$iters_base"; fi
}
# bench_row OUT [EXTRA_CPU_US]: "p50 min mean cpu daemon_cpu" of a ferry-bench --json line.
bench_row() {
  tail -n1 "$1" | python3 -c '
import json, sys
j = json.load(sys.stdin)
ops, extra = j["ops"], float(sys.argv[1])
cpu = j["cpu_us_per_op"] + extra / ops if j["server_cpu_included"] or extra else ""
dcpu = j["cpu_daemon_us"] / ops if j["daemon_cpu_included"] else ""
print(j["p50_us"], j["min_us"], j["mean_us"], cpu, dcpu, sep="\t")' "${2:-0}"
}
cpu_ns_of() { # cpu_ns_of PID: on-CPU time of every thread
  local t v c=0
  for t in /proc/"$1"/task/*/schedstat; do read -r v _ <"$t" && c=$((c + v)); done
  echo "$c"
}

echo "VM: nproc $(nproc), $(grep -c ^processor /proc/cpuinfo) processors in /proc/cpuinfo"
echo "sizes: $sizes; repeats: $repeats; modes: $modes; peers: $peers; tools: $tools"

# --- ferry remote-rpc over rdma (modes: ferry-modes.sh) ---------------------
# Every mode's pair of daemons runs for the whole bench (on ports of its
# own; a pair not in use sleeps), so that each repeat can run every tool at
# one size back to back: host load that drifts over minutes then hits all of
# them alike.
declare -A mode_port=()
start_all_daemons() {
  local i=0 mode
  for mode in $modes; do
    mode_flags "$mode" || { failures=$((failures + 1)); continue; }
    pair="$mode-" port=$((7610 + i)) daemons=()
    i=$((i + 1))
    if start_daemons "$mode"; then
      mode_port[$mode]=$port
    else
      failures=$((failures + 1))
    fi
  done
}
ferry_one() { # ferry_one REPEAT MODE SIZE
  local size=$3 out ok=0 attempt before after n
  [[ -n ${mode_port[$2]:-} ]] || return 0
  mode_flags "$2"
  pair="$2-" port=${mode_port[$2]}
  local sock=(--socket "$run/${pair}a/ferryd.sock")
  out=$dir/r$1-ferry-$2-$size.out n=$(iters_for "$size")
  before=$(dev_pkts)
  # The first open also brings the channel up (rdma_cm under emulation may
  # take seconds when a CM MAD is lost): a failed first try is retried.
  for attempt in 1 2 3; do
    if run_bench "$out" remote-rpc --size "$size" --iters "$n" "${bench_flags[@]}" "${sock[@]}" \
      --server-socket "$run/${pair}b/ferryd.sock" --target "$ADDR1:$port" --json; then
      ok=1 && break
    fi
    echo "ferry $2 size $size repeat $1: attempt $attempt failed: $(tail -n1 "$out")" >&2
  done
  after=$(dev_pkts)
  if ((ok)) && ! crossed_both "$before" "$after" "$n"; then
    echo "ferry $2 size $size: packets did not cross both devices ($before -> $after)" >&2
    ok=0
  fi
  if ((ok)); then
    printf '%s\tferry-%s\t%s\t%s\n' "$1" "$2" "$size" "$(bench_row "$out")" >>"$results"
  else
    failures=$((failures + 1))
  fi
  ((with_local)) || return 0
  # The same call through daemon A alone (client -> daemon -> server ->
  # daemon -> client): the process hops of a remote call without the wire.
  out=$dir/r$1-local-$2-$size.out
  if run_bench "$out" local-rpc --size "$size" --iters "$n" "${bench_flags[@]}" "${sock[@]}" --json; then
    printf '%s\tlocal-%s\t%s\t%s\n' "$1" "$2" "$size" "$(bench_row "$out")" >>"$results"
  else
    echo "local-rpc $2 size $size repeat $1 failed: $(tail -n1 "$out")" >&2
    failures=$((failures + 1))
  fi
}
check_lanes() { # every mode's daemon A carried its calls on rdma
  local mode
  for mode in "${!mode_port[@]}"; do
    grep -q "data lanes on $RXE0" "$dir/$mode-a.log" || { echo "$mode: daemon A is not on rdma" >&2; failures=$((failures + 1)); }
  done
}

# --- kernel TCP between the same two addresses -------------------------------
# tcp-rpc: client -> tcp-server (two processes). tcp-relay-rpc: the same
# kernel TCP in ferry's process shape, client -> relay A -> relay B ->
# server (four processes, blocking relays where the daemons sit): what the
# shape's two extra process hops cost on this machine without ferry's code.
declare -A kernel_server=()
start_kernel_servers() {
  # The guest owns both addresses, so without a rule the kernel would route
  # ADDR0 -> ADDR1 through lo; like rxe-net.sh's rules for rxe, this one
  # sends the benchmarks' TCP connections out of veth0 (source ADDR0) into veth1.
  ip rule add pref 99 to "$ADDR1" ipproto tcp dport "$tcp_port-$relay_port" lookup 101
  local route deadline kind port
  for kind in tcp-server tcp-relay-server; do
    [[ $kind == tcp-server ]] && port=$tcp_port || port=$relay_port
    route=$(ip route get "$ADDR1" ipproto tcp dport "$port")
    [[ "$route" == *" dev veth0 "* ]] || { echo "$kind route does not use veth0: $route" >&2; exit 1; }
    "$bench" "$kind" --listen "$ADDR1:$port" >"$dir/$kind.log" 2>&1 &
    kernel_server[$kind]=$!
    pids+=($!)
    deadline=$((SECONDS + 20))
    until ss -ltn "sport = :$port" | grep -q LISTEN; do
      ((SECONDS < deadline)) || { echo "$kind did not listen" >&2; exit 1; }
      sleep 0.1
    done
  done
}

kernel_one() { # kernel_one REPEAT SIZE SCENARIO (tcp-rpc | tcp-relay-rpc)
  local size=$2 scenario=$3 out tx0 tx1 s0 s1 kind port
  [[ $scenario == tcp-rpc ]] && kind=tcp-server port=$tcp_port || kind=tcp-relay-server port=$relay_port
  out=$dir/r$1-$scenario-$size.out
  tx0=$(cat /sys/class/net/veth0/statistics/tx_packets)
  s0=$(cpu_ns_of "${kernel_server[$kind]}")
  if "$bench" "$scenario" --size "$size" --iters "$(iters_for "$size")" --target "$ADDR1:$port" --json >"$out" 2>&1; then
    tx1=$(cat /sys/class/net/veth0/statistics/tx_packets)
    s1=$(cpu_ns_of "${kernel_server[$kind]}")
    # Proof that the calls crossed the veth pair, not lo.
    if ((tx1 - tx0 < $(iters_for "$size"))); then
      echo "$scenario size $size: only $((tx1 - tx0)) packets left veth0" >&2
      failures=$((failures + 1))
    else
      # The listening server's CPU over the whole run (warm-up included: a slight overcount).
      printf '%s\t%s\t%s\t%s\n' "$1" "$scenario" "$size" "$(bench_row "$out" $(((s1 - s0) / 1000)))" >>"$results"
    fi
  else
    echo "$scenario size $size repeat $1 failed: $(tail -n1 "$out")" >&2
    failures=$((failures + 1))
  fi
}

# --- uds-rpc: the machine's floor for one process-to-process round trip ---
uds_one() { # uds_one REPEAT SIZE
  local size=$2 out
  out=$dir/r$1-uds-$size.out
  if "$bench" uds-rpc --size "$size" --iters "$(iters_for "$size")" --json >"$out" 2>&1; then
    printf '%s\tuds-rpc\t%s\t%s\n' "$1" "$size" "$(bench_row "$out")" >>"$results"
  else
    echo "uds-rpc size $size repeat $1 failed: $(tail -n1 "$out")" >&2
    failures=$((failures + 1))
  fi
}

# --- perftest ---------------------------------------------------------------
lat() { # lat TOOL PORT SIZE OUT -> "2*t_typical 2*t_min 2*t_avg" (a round trip)
  local iters server deadline
  iters=$(iters_for "$3")
  "$1" -d "$RXE0" -x "$GID_INDEX" -s "$3" -n "$iters" -F -p "$2" >"$4.server" 2>&1 &
  server=$!
  deadline=$((SECONDS + 20))
  until ss -ltn "sport = :$2" | grep -q LISTEN; do
    ((SECONDS < deadline)) || { echo "$1 server did not listen" >&2; kill $server; return 1; }
    sleep 0.1
  done
  "$1" -d "$RXE1" -x "$GID_INDEX" -s "$3" -n "$iters" -F -p "$2" "$ADDR0" >"$4" 2>&1 || { kill $server; return 1; }
  wait $server
  # Row: bytes iterations t_min t_max t_typical t_avg ...; perftest prints
  # inf when its cycle count went wrong: no number.
  awk -v s="$3" '$1 == s && NF >= 6 && $5 ~ /^[0-9.]+$/ && $3 ~ /^[0-9.]+$/ && $6 ~ /^[0-9.]+$/ {
    printf "%.2f\t%.2f\t%.2f\n", 2 * $5, 2 * $3, 2 * $6 }' "$4" | tail -n1
}
perftest_one() { # perftest_one REPEAT SIZE
  local size=$2 tool port v
  for tool in ib_send_lat ib_write_lat; do
    [[ $tool == ib_send_lat ]] && port=18525 || port=18526
    # perftest now and then prints inf (its cycle count went wrong): once more.
    if { v=$(lat "$tool" "$port" "$size" "$dir/r$1-$tool-$size.out") && [[ -n "$v" ]]; } ||
      { v=$(lat "$tool" "$port" "$size" "$dir/r$1-$tool-$size.out") && [[ -n "$v" ]]; }; then
      printf '%s\t%s\t%s\t%s\t\t\n' "$1" "$tool" "$size" "$v" >>"$results"
    else
      echo "$tool size $size repeat $1 failed" >&2
      failures=$((failures + 1))
    fi
  done
}

# --- the machine: how much a spinning vCPU loses, how late an idle one wakes
machine_round() { # machine_round REPEAT: one JSON line per probe and vCPU into machine.jsonl
  local cpu mode p=()
  for mode in "spin 1" "sleep 1 200"; do
    for cpu in 0 1; do
      # shellcheck disable=SC2086 # mode is the probe's words
      taskset -c $cpu python3 "$here/vcpu_stalls.py" $mode | sed "s/^{/{\"repeat\": $1, \"cpu\": $cpu, /" >>"$dir/machine.jsonl" &
      p+=($!)
    done
    wait "${p[@]}" || failures=$((failures + 1))
    p=()
  done
}

has() { [[ " $tools " == *" $1 "* ]]; }
{ has tcp || has relay; } && start_kernel_servers
has ferry && start_all_daemons
for ((r = 1; r <= repeats; r++)); do
  machine_round "$r"
  for size in $sizes; do
    if has ferry; then for mode in $modes; do ferry_one "$r" "$mode" "$size"; done; fi
    has tcp && kernel_one "$r" "$size" tcp-rpc
    has relay && kernel_one "$r" "$size" tcp-relay-rpc
    has peers && peers_one "$r" "$size"
    has perftest && perftest_one "$r" "$size"
    has uds && ((with_local)) && uds_one "$r" "$size"
    echo "repeat $r size $size done at ${SECONDS}s"
  done
done
has ferry && check_lanes
daemons=("${pids[@]}") && stop_daemons

summary
echo "failures: $failures"
((failures == 0))
