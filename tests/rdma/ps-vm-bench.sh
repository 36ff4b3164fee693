#!/usr/bin/env bash
# ps-vm-bench.sh: inside the Soft-RoCE VM (a checks line through
# run-vm-suite.sh --checks, as tests/rdma/soft-roce-bench.sh does), the parameter-server
# head-to-head over rdma: `ferry-ps bench` with its workers on ferryd A
# (ADDR0/rxe0) and its shards on ferryd B (ADDR1/rxe1), against ferry-ps's
# per-process kernel-TCP baseline (every worker its own connection to every
# shard) between the same two addresses across the same veth pair, in the
# same run, interleaved.
#   Shapes (PS_SHAPES): small = 16 keys x dim 16 per pull (1 KiB of rows per
#   pull, where rxe's emulated wire beats kernel TCP), default = ferry-ps's
#   default 512 keys x dim 64 (128 KiB per pull).
#   Modes (PS_MODES, ferry-modes.sh): the daemons' flags, e.g. "default before".
# Every ferry run is checked to have crossed both rxe devices (their packet
# counters) with data lanes on rdma; every TCP run to have left veth0.
# Per pull, from ferry's own counters (ferryctl status --json) and /proc: the
# two daemons' doorbells (rdma_post_calls), send WRs, engine sleeps, large-
# transfer sleeps and context switches (voluntary: the daemon slept and was
# woken; involuntary: preempted), and CPU per op of every process.
# Prints, per shape, a table of medians over repeats with ferry/tcp ratios
# (ps_vm_summary.py); the per-run rows stay in ps-results.jsonl.
# Environment: PS_SHAPES ("small default"), PS_MODES ("default"),
# PS_REPEATS (2), PS_ITERS_SMALL (400), PS_ITERS_DEFAULT (60), PS_WORKERS (2),
# PS_SHARDS (2), PS_KEYS (100000), PS_WARMUP (20).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
shapes=${PS_SHAPES:-small default} modes=${PS_MODES:-default} repeats=${PS_REPEATS:-2}
iters_small=${PS_ITERS_SMALL:-400} iters_default=${PS_ITERS_DEFAULT:-60}
workers=${PS_WORKERS:-2} shards=${PS_SHARDS:-2} keys=${PS_KEYS:-100000} warmup=${PS_WARMUP:-20}
build=${FERRY_BUILD:?}
dir=${FERRY_CHECK_DIR:-$(mktemp -d)}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-ps-vm-XXXXXX") # sockets: not on the 9p results share
ps=$build/client/examples/ps/ferry-ps ctl=$build/control/ferryctl
spin_us=2000 # ferry-modes.sh's busy modes
results=$dir/ps-results.jsonl
: >"$results"
pids=() daemons=() failures=0
# The shards of the TCP baseline listen on ephemeral ports: send those
# connections out of veth0 (source ADDR0) into veth1, as rxe-net.sh's rules
# do for rxe, instead of through lo.
tcp_ports=32768-60999
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip rule del pref 97 2>/dev/null || true
}
trap cleanup EXIT
# Stopped by its check's timeout: the tables of the runs so far.
trap 'echo "STOPPED (timeout): the tables of the runs so far"; python3 "$here/ps_vm_summary.py" table "$results" "$shapes" "$modes"; exit 124' TERM
# shellcheck source=tests/rdma/bench-peers.sh
source "$here/bench-peers.sh"
# shellcheck source=tests/rdma/ferry-modes.sh
source "$here/ferry-modes.sh"

shape_args() { # shape_args SHAPE: sets sargs and min_msgs (the fewest messages a run sends each way)
  case $1 in
    small) sargs=(--batch 16 --dim 16 --iters "$iters_small") min_msgs=$((iters_small * workers)) ;;
    default) sargs=(--batch 512 --dim 64 --iters "$iters_default") min_msgs=$((iters_default * workers)) ;;
    *) echo "unknown shape $1" >&2; return 1 ;;
  esac
  sargs+=(--workers "$workers" --shards "$shards" --keys "$keys" --warmup "$warmup" --json)
}
# switches PID: "voluntary involuntary" context switches of every thread.
switches() {
  local t v=0 n=0 a b
  for t in /proc/"$1"/task/*/status; do
    a=$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t" 2>/dev/null) || continue
    b=$(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t" 2>/dev/null) || continue
    v=$((v + ${a:-0})) n=$((n + ${b:-0}))
  done
  echo "$v $n"
}
# One JSON line into ps-results.jsonl: the bench's summary plus the run's
# facts (repeat, shape, arm) and, for ferry, the counts (ps_vm_summary.py counts).
record() { # record REPEAT SHAPE ARM OUT [COUNTS_JSON]
  tail -n1 "$4" | python3 -c '
import json, sys
j = json.load(sys.stdin)
j.update(repeat=int(sys.argv[1]), shape=sys.argv[2], arm=sys.argv[3])
if len(sys.argv) > 4 and sys.argv[4]:
    j["counts"] = json.loads(sys.argv[4])
print(json.dumps(j))' "$1" "$2" "$3" "${5:-}" >>"$results"
}

declare -A mode_port=()
start_all_daemons() {
  local i=0 mode
  for mode in $modes; do
    mode_flags "$mode" || { failures=$((failures + 1)); continue; }
    pair="ps-$mode-" port=$((7650 + i)) daemons=()
    i=$((i + 1))
    if start_daemons "ps-$mode"; then
      mode_port[$mode]="$port ${daemons[0]} ${daemons[1]}"
    else
      failures=$((failures + 1))
    fi
  done
}
status_of() { "$ctl" --control "$run/$1/control.sock" status --json; }

ferry_one() { # ferry_one REPEAT MODE SHAPE
  local r=$1 mode=$2 shape=$3 out before after ok=0 attempt p a b sa0 sb0 sa1 sb1 counts
  [[ -n ${mode_port[$mode]:-} ]] || return 0
  read -r p a b <<<"${mode_port[$mode]}"
  mode_flags "$mode"
  pair="ps-$mode-"
  shape_args "$shape"
  out=$dir/r$r-ps-ferry-$mode-$shape.out
  status_of "${pair}a" >"$out.a0.json" && status_of "${pair}b" >"$out.b0.json" || true
  sa0=$(switches "$a") sb0=$(switches "$b")
  before=$(dev_pkts)
  # The first open also brings the channel up (rdma_cm under emulation may
  # take seconds when a CM MAD is lost): a failed first try is retried.
  for attempt in 1 2; do
    if timeout 600 "$ps" bench --transport ferry "${sargs[@]}" "${bench_flags[@]}" \
      --socket "$run/${pair}a/ferryd.sock" --server-socket "$run/${pair}b/ferryd.sock" --target "$ADDR1:$p" \
      >"$out" 2>"$out.err"; then
      ok=1 && break
    fi
    echo "ps ferry $mode $shape repeat $r: attempt $attempt failed: $(tail -n2 "$out.err")" >&2
  done
  after=$(dev_pkts)
  sa1=$(switches "$a") sb1=$(switches "$b")
  status_of "${pair}a" >"$out.a1.json" && status_of "${pair}b" >"$out.b1.json" || true
  if ((ok)) && ! crossed_both "$before" "$after" "$min_msgs"; then
    echo "ps ferry $mode $shape: packets did not cross both devices ($before -> $after)" >&2
    ok=0
  fi
  ((ok)) || { failures=$((failures + 1)); return 0; }
  counts=$(python3 "$here/ps_vm_summary.py" counts "$out" "$sa0" "$sa1" "$sb0" "$sb1")
  record "$r" "$shape" "ferry-$mode" "$out" "$counts"
}

tcp_one() { # tcp_one REPEAT SHAPE
  local r=$1 shape=$2 out tx0 tx1
  shape_args "$shape"
  out=$dir/r$r-ps-tcp-$shape.out
  tx0=$(cat /sys/class/net/veth0/statistics/tx_packets)
  if timeout 600 "$ps" bench --transport tcp "${sargs[@]}" --target "$ADDR1" >"$out" 2>"$out.err"; then
    tx1=$(cat /sys/class/net/veth0/statistics/tx_packets)
    # Proof that the pulls crossed the veth pair, not lo.
    if ((tx1 - tx0 < min_msgs)); then
      echo "ps tcp $shape: only $((tx1 - tx0)) packets left veth0" >&2
      failures=$((failures + 1))
    else
      record "$r" "$shape" tcp "$out"
    fi
  else
    echo "ps tcp $shape repeat $r failed: $(tail -n2 "$out.err")" >&2
    failures=$((failures + 1))
  fi
}

ip rule add pref 97 to "$ADDR1" ipproto tcp dport "$tcp_ports" lookup 101
route=$(ip route get "$ADDR1" ipproto tcp dport 40000)
[[ "$route" == *" dev veth0 "* ]] || { echo "ps tcp route does not use veth0: $route" >&2; exit 1; }
echo "VM: nproc $(nproc); shapes: $shapes; modes: $modes; repeats: $repeats; $workers workers x $shards shards, $keys keys"
start_all_daemons
for ((r = 1; r <= repeats; r++)); do
  for shape in $shapes; do
    for mode in $modes; do ferry_one "$r" "$mode" "$shape"; done
    tcp_one "$r" "$shape"
    echo "ps repeat $r shape $shape done at ${SECONDS}s"
  done
done
for mode in "${!mode_port[@]}"; do
  grep -q "data lanes on $RXE0" "$dir/ps-$mode-a.log" || { echo "ps $mode: daemon A is not on rdma" >&2; failures=$((failures + 1)); }
done
daemons=("${pids[@]}") && stop_daemons

python3 "$here/ps_vm_summary.py" table "$results" "$shapes" "$modes"
echo "failures: $failures"
((failures == 0))
