#!/usr/bin/env bash
# scale-memory.sh — receive and daemon memory per idle peer channel, and QPs
# per host, in the Soft-RoCE VM (run through run-vm-suite.sh --checks, see
# docs/benchmarks/scaling.md). One receiver ferryd on ADDR1 (rxe1, default
# settings) and N sender ferryd on ADDR0 (rxe0, distinct ports); each sender
# opens a channel (k = 2 rdma lanes; k = 1, ferryd's default, in the variant
# "default") with one small incast message, then the channels sit idle. Measured on the receiver: VmRSS before any peer and
# with N idle peers, its registered memory (status counters; the old build
# logs its slabs), its QPs (`rdma res show qp`), where the RSS grew (per
# mapping, smaps_diff.py) and glibc's heap account (malloc_stats via gdb). Then QPs of one sender
# daemon serving 1, 4 and 8 client processes towards the receiver.
# Two builds in the same VM run: this tree's (FERRY_BUILD) and the pre-SRQ
# one in $FERRY_BUILD/main-bin (ferryd, ferryctl, ferry-bench copied from
# main), whose receiver can hold 16 lane connections = 8 peers.
# Output: $FERRY_CHECK_DIR/scale.txt (one "key value" line per figure).
set -euo pipefail
build=${FERRY_BUILD:?}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${FERRY_CHECK_DIR:-${TMPDIR:-/tmp}/scale-memory}
mkdir -p "$out"
run=$(mktemp -d "${TMPDIR:-/tmp}/scale.XXXXXX")
res=$out/scale.txt
: >"$res"
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
stop_all() { ferry_stop_daemons 60; }
trap stop_all EXIT
conns=(--channel-conns 2) # lanes per channel (k); the "default" variant leaves it at ferryd's default
common=(--transport rdma --rdma-ack-timeout 18 --heartbeat-ms 1000 --peer-timeout-ms 30000
        --connect-timeout-ms 20000 --log-level info)

# start NAME ADDR PORT FERRYD [ARGS...]: a daemon, back when it is up.
start() {
  local name=$1 addr=$2 port=$3 ferryd=$4
  shift 4
  ferry_start_daemon --wait 30 --log "$run/$name.log" "$ferryd" "$run/$name" --listen "$addr:$port" \
    "${common[@]}" "${conns[@]}" "$@" || return 1
  echo "$ferry_daemon_pid" >"$run/$name.pid"
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# QPs a process owns, from the rdma tool's JSON (one object per QP).
qps_of() { # RC QPs of every thread of daemon $1 (rdma names the creating thread's id)
  local tids
  tids=$(ls "/proc/$1/task" 2>/dev/null | tr '\n' ' ')
  rdma -j res show qp 2>/dev/null | /usr/bin/python3 -c '
import json, sys
tids = {int(t) for t in sys.argv[1].split()}
try:
    qps = json.load(sys.stdin)
except ValueError:
    qps = []
print(sum(1 for q in qps if q.get("pid") in tids and q.get("type") == "RC"))' "$tids"
}
# The daemon-wide counter NAME (status "counters"; peers repeat some names).
counter() {
  "$1" --control "$run/$2/control.sock" status --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
try:
    print(int(json.load(sys.stdin).get("counters", {}).get(sys.argv[1], 0)))
except ValueError:
    print(0)' "$3"
}

# variant LABEL BIN_DIR PEERS SENDER_ARGS...
variant() {
  local label=$1 bin=$2 peers=$3
  shift 3
  local ferryd=$bin/ferryd ctl=$bin/ferryctl bench=$bin/ferry-bench
  [[ $bin == "$build/main-bin" ]] || { ferryd=$build/daemon/ferryd ctl=$build/control/ferryctl bench=$build/tests/perf/ferry-bench; }
  start "$label-r" "$ADDR1" 31000 "$ferryd"
  local rpid
  rpid=$(cat "$run/$label-r.pid")
  local socks="" i
  for i in $(seq 1 "$peers"); do
    start "$label-s$i" "$ADDR0" $((31000 + i)) "$ferryd" "$@"
    socks+="${socks:+,}$run/$label-s$i/ferryd.sock"
  done
  # The first peer alone first: what the receiver pays once (the server's
  # attach and registration, the first remote delivery's buffers) goes
  # into the baseline, so the figure per idle peer is what each further
  # peer adds.
  "$bench" incast --size 64 --iters 1 --senders 1 --socket "$run/$label-s1/ferryd.sock" \
    --server-socket "$run/$label-r/ferryd.sock" --target "$ADDR1:31000" --json >"$run/$label-first.json" 2>&1 || true
  sleep 2
  local rss0
  rss0=$(rss_kib "$rpid")
  cp "/proc/$rpid/smaps" "$out/$label-smaps.before"
  # One message from each sender daemon: every channel comes up, then idles.
  local ok=0
  for _ in 1 2 3 4 5; do
    if "$bench" incast --size 64 --iters "$peers" --senders "$peers" --socket "$socks" \
        --server-socket "$run/$label-r/ferryd.sock" --target "$ADDR1:31000" --json >"$run/$label-warm.json" 2>&1; then
      ok=1; break
    fi
  done
  [[ $ok == 1 ]] || { echo "$label: channels did not come up"; cat "$run/$label-warm.json"; tail -30 "$run/$label-r.log"; return 1; }
  sleep 3
  local rss qps
  rss=$(rss_kib "$rpid")
  qps=$(qps_of "$rpid")
  cp "/proc/$rpid/smaps" "$out/$label-smaps.after"
  # Where the growth is: RSS per mapping, after minus before; and glibc's
  # own account of the heap (in use against held), printed by the receiver
  # into its log through gdb.
  /usr/bin/python3 "$repo/tests/rdma/smaps_diff.py" "$out/$label-smaps.before" "$out/$label-smaps.after" \
    >"$out/$label-smaps.diff" 2>&1 || true
  sed "s/^/$label smaps_diff /" "$out/$label-smaps.diff" | head -8 | tee -a "$res"
  if command -v gdb >/dev/null; then
    timeout 60 gdb -p "$rpid" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1 || true
    grep -E '^(Arena|system bytes|in use bytes|Total)' "$run/$label-r.log" | tr -s ' ' | sed "s/^/$label malloc /" |
      tee -a "$res" || true
  fi
  rdma res show qp >"$out/$label-qps.txt" 2>&1 || true
  rdma -j res show qp >"$out/$label-qps.json" 2>&1 || true
  {
    echo "$label peers $peers"
    echo "$label receiver_rss_kib_before $rss0"
    echo "$label receiver_rss_kib_after $rss"
    echo "$label receiver_rss_kib_per_idle_peer $(( (rss - rss0) / (peers - 1) ))"
    echo "$label receiver_qps $qps"
    echo "$label receiver_log $(grep -o 'rdma: rxe1 ready.*' "$run/$label-r.log" | head -1)"
    echo "$label receiver_credits $(grep -o 'receive credits: .*' "$run/$label-r.log" | head -1)"
    echo "$label receiver_recv_registered_bytes $(counter "$ctl" "$label-r" rdma_recv_registered_bytes)"
    echo "$label receiver_send_registered_bytes $(counter "$ctl" "$label-r" rdma_send_registered_bytes)"
    echo "$label receiver_rnr_naks $(counter "$ctl" "$label-r" rnr_naks)"
  } | tee -a "$res"
  # QPs on one sender daemon with 1, 4, 8 client processes to the receiver.
  local p s1pid
  s1pid=$(cat "$run/$label-s1.pid")
  for p in 1 4 8; do
    "$bench" incast --size 64 --iters $((p * 4)) --senders "$p" --socket "$run/$label-s1/ferryd.sock" \
      --server-socket "$run/$label-r/ferryd.sock" --target "$ADDR1:31000" --json >/dev/null 2>&1 || true
    echo "$label sender_qps_with_${p}_processes $(qps_of "$s1pid")" | tee -a "$res"
  done
  stop_all
  sleep 1
}

rdma res show qp >/dev/null 2>&1 || { echo "SKIP: no rdma tool"; exit 77; }
# Transparent huge pages change what one write into a sparse mapping commits.
echo "thp $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)" | tee -a "$res"
if [[ -x $build/main-bin/ferryd && ${SCALE_MAIN:-1} == 1 ]]; then
  LD_LIBRARY_PATH=$build/main-bin variant main "$build/main-bin" 7
fi
variant srq "$build" 7 --receive-pool 64 --rdma-max-connections 4
# ferryd's defaults on both sides (one lane per channel): the issue's "per
# idle peer at default settings".
conns=()
variant default "$build" 7
conns=(--channel-conns 2)
[[ ${SCALE_30:-1} == 1 ]] && variant srq30 "$build" 30 --receive-pool 64 --rdma-max-connections 4
echo "--- $res"; cat "$res"
