#!/usr/bin/env bash
# bench-vs-perftest.sh: inside the Soft-RoCE VM (run it as a checks.list line
# or through run-vm-suite.sh --checks), compares ferry's remote-rpc over rdma
# lanes with perftest on the same rxe devices in the same run. Emulation
# makes absolute times meaningless (RDMA-VM.md): only ratios are printed.
#   ferry-bench remote-rpc: client on daemon A (ADDR0/rxe0) -> echo server on
#   daemon B (ADDR1/rxe1), one call outstanding, SIZE bytes each way.
#   ib_send_lat / ib_write_lat: rxe1 -> rxe0, SIZE bytes, one-way latency
#   (half a ping-pong), so an RPC round trip is compared with 2x that.
set -euo pipefail
size=${BENCH_SIZE:-64} iters=${BENCH_ITERS:-2000}
build=${FERRY_BUILD:?}
dir=${FERRY_CHECK_DIR:-$(mktemp -d)}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-bench-XXXXXX") # sockets: not on the 9p results share
port=7610
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start() { # start NAME ADDR
  mkdir -p "$run/$1"
  "$build/daemon/ferryd" --runtime-dir "$run/$1" --listen "$2:$port" --transport rdma --rdma-ack-timeout 18 \
    --connect-timeout-ms 20000 --peer-timeout-ms 10000 --channel-conns 1 >"$dir/$1.log" 2>&1 &
  pids+=($!)
}
start a "$ADDR0"
start b "$ADDR1"
deadline=$((SECONDS + 20))
until [[ -S $run/a/ferryd.sock && -S $run/b/ferryd.sock ]]; do
  ((SECONDS < deadline)) || { cat "$dir"/*.log; echo "daemons did not come up" >&2; exit 1; }
  sleep 0.1
done
# The first open also brings the channel up (rdma_cm under emulation may
# take seconds when a CM MAD is lost): a failed first try is retried.
for attempt in 1 2 3; do
  if "$build/tests/perf/ferry-bench" remote-rpc --size "$size" --iters "$iters" --socket "$run/a/ferryd.sock" \
    --server-socket "$run/b/ferryd.sock" --target "$ADDR1:$port" --json >"$dir/ferry.out" 2>&1; then
    break
  fi
  ((attempt < 3)) || { cat "$dir/ferry.out" "$dir"/*.log; exit 1; }
done
ferry_p50=$(tail -n1 "$dir/ferry.out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p50_us"])')
grep -q "data lanes on $RXE0" "$dir/a.log" || { echo "daemon A is not on rdma" >&2; exit 1; }

lat() { # lat TOOL PORT -> typical one-way usec
  "$1" -d "$RXE0" -x "$GID_INDEX" -s "$size" -n "$iters" -F -p "$2" >"$dir/$1.server" 2>&1 &
  local server=$!
  local deadline=$((SECONDS + 20))
  until ss -ltn "sport = :$2" | grep -q LISTEN; do
    ((SECONDS < deadline)) || { echo "$1 server did not listen" >&2; return 1; }
    sleep 0.1
  done
  "$1" -d "$RXE1" -x "$GID_INDEX" -s "$size" -n "$iters" -F -p "$2" "$ADDR0" >"$dir/$1.client" 2>&1
  wait $server
  # Row: bytes iterations t_min t_max t_typical ...
  awk -v s="$size" '$1 == s && NF >= 5 { print $5 }' "$dir/$1.client" | tail -n1
}
send_lat=$(lat ib_send_lat 18525)
write_lat=$(lat ib_write_lat 18526)
python3 - "$size" "$ferry_p50" "$send_lat" "$write_lat" <<'PY'
import sys
size, ferry, send, write = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print(f"size {size} B: ferry remote-rpc p50 round trip / (2 x ib_send_lat typical) = {ferry / (2 * send):.2f}")
print(f"size {size} B: ferry remote-rpc p50 round trip / (2 x ib_write_lat typical) = {ferry / (2 * write):.2f}")
PY
