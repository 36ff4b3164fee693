#!/usr/bin/env bash
# bench-rails.sh — the multi-rail numbers (docs/benchmarks/multi-rail.md),
# inside the Soft-RoCE VM after scripts/vm/rxe-net.sh (run through
# tests/rdma/run-vm-suite.sh --checks tests/rdma/bench-rails.list). In one
# VM run, interleaved REPEATS times:
#   ferry 1 rail : daemon A --device rxe0, B --device rxe1, --channel-conns 2;
#   ferry 2 rails: A --device rxe0,rxe2, B --device rxe1,rxe3 (both lanes
#                  of the channel, one per rail);
#   both with CLIENTS ferry-bench remote-rpc processes at once (1 MiB calls,
#   1 MiB answers, concurrency 2 each, DURATION s), summed bytes_per_s;
#   raw ib_write_bw 1 MiB on rxe0->rxe1 alone, then on rxe0->rxe1 and
#   rxe2->rxe3 at the same time (summed): what the VM's two vCPUs give
#   two rails without ferry.
# Prints "rails: ..." rows and a median summary.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${FERRY_BUILD:?}
cd "$repo"
scripts/vm/rxe-rails.sh
bench=$build/tests/perf/ferry-bench
repeats=${BENCH_REPEATS:-3} duration=${BENCH_DURATION:-8} clients=${BENCH_CLIENTS:-2}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-rails-XXXXXX")
dir=${FERRY_CHECK_DIR:-$run}
port=$((20000 + RANDOM % 20000))
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
rdma_flags=(--transport rdma --rdma-ack-timeout 18 --connect-timeout-ms 20000 --peer-timeout-ms 10000
            --channel-conns 2)

start() { # start DEVA DEVB TAG
  rm -rf "$run/a" "$run/b"
  ferry_start_daemon --wait 30 --log "$dir/$3-a.log" "$build/daemon/ferryd" "$run/a" --listen "$ADDR0:$port" \
    --device "$1" "${rdma_flags[@]}" || return 1
  ferry_start_daemon --wait 30 --log "$dir/$3-b.log" "$build/daemon/ferryd" "$run/b" --listen "$ADDR1:$port" \
    --device "$2" "${rdma_flags[@]}" || return 1
}
stop() {
  ferry_stop_daemons 30
  port=$((port + 1))
}
bps() { python3 -c 'import json,sys; print(int(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["bytes_per_s"]))' "$1"; }

ferry_run() { # ferry_run DEVA DEVB TAG -> prints summed bytes/s
  start "$1" "$2" "$3"
  local i pids=() total=0
  for ((i = 0; i < clients; i++)); do
    FERRY_BENCH_SERVICE=bench-echo-$i "$bench" remote-rpc --socket "$run/a/ferryd.sock" --server-socket "$run/b/ferryd.sock" --target "$ADDR1:$port" \
      --size 1M --concurrency 2 --duration "$duration" --warmup 20 --json >"$dir/$3-c$i.out" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  for ((i = 0; i < clients; i++)); do total=$((total + $(bps "$dir/$3-c$i.out"))); done
  "$build/control/ferryctl" --control "$run/a/control.sock" status --json >"$dir/$3-status.json"
  stop
  echo "$total"
}

# Raw verbs: a count of 1 MiB WRITEs (a duration-bound run of two pairs at
# once never printed its result under TCG), the QP timeout of ferry's own
# VM runs (-u 18: rxe retransmits under emulation), at most 120 s.
raw_iters=${BENCH_RAW_ITERS:-300}
wbw() { # wbw DEV ADDR_SERVER DEV_CLIENT ADDR_CLIENT PORT OUT: ib_write_bw 1 MiB, prints MB/s
  (timeout 150 ib_write_bw -d "$1" -x 1 -s 1048576 -n "$raw_iters" -u 18 -p "$5" >/dev/null 2>&1 &)
  # The server listens for the exchange on TCP port $5: wait for it (TCG is slow to start it).
  local hex deadline=$((SECONDS + 20))
  hex=$(printf ':%04X ' "$5")
  until grep -q "$hex" /proc/net/tcp 2>/dev/null; do
    ((SECONDS < deadline)) || break
    sleep 0.2
  done
  timeout 120 ib_write_bw -d "$3" -x 1 -s 1048576 -n "$raw_iters" -u 18 -p "$5" "$2" >"$6" 2>&1 || true
  awk '/^ *1048576/ {print $4}' "$6"
}

for ((r = 1; r <= repeats; r++)); do
  one=$(ferry_run "$RXE0" "$RXE1" "one-$r")
  two=$(ferry_run "$RXE0,rxe2" "$RXE1,rxe3" "two-$r")
  raw1=$(wbw "$RXE1" "$ADDR1" "$RXE0" "$ADDR0" 18600 "$dir/raw1-$r.txt")
  (wbw rxe3 198.18.1.2 rxe2 198.18.1.1 18601 "$dir/raw2b-$r.txt" >"$dir/raw2b-$r.val") &
  raw2a=$(wbw "$RXE1" "$ADDR1" "$RXE0" "$ADDR0" 18602 "$dir/raw2a-$r.txt")
  wait
  raw2b=$(cat "$dir/raw2b-$r.val")
  echo "rails: repeat=$r ferry_1rail_Bps=$one ferry_2rails_Bps=$two raw_1pair_MBps=$raw1 raw_2pairs_MBps=$raw2a+$raw2b"
done | tee "$dir/rows.txt"
python3 - "$dir/rows.txt" <<'PY'
import re, statistics, sys
rows = [dict(kv.split("=") for kv in l.split()[1:]) for l in open(sys.argv[1]) if l.startswith("rails:")]
med = lambda k, f=float: statistics.median(f(r[k]) for r in rows)
one, two = med("ferry_1rail_Bps"), med("ferry_2rails_Bps")
# perftest sometimes ends without a result under TCG: only complete raw rows count.
ones = [float(r["raw_1pair_MBps"]) for r in rows if r["raw_1pair_MBps"]]
twos = [sum(map(float, p)) for p in (r["raw_2pairs_MBps"].split("+") for r in rows) if all(p)]
r1 = statistics.median(ones) if ones else 0
r2 = statistics.median(twos) if twos else 0
print(f"rails-summary: ferry 1 rail {one/1e6:.1f} MB/s, 2 rails {two/1e6:.1f} MB/s, ratio {two/one:.2f}; "
      f"raw ib_write_bw 1 pair {r1:.1f} MB/s ({len(ones)} runs), 2 pairs at once {r2:.1f} MB/s ({len(twos)} runs), "
      f"ratio {r2/r1 if r1 else 0:.2f}")
PY
