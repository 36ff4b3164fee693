#!/usr/bin/env bash
# large-sleep.sh — engine-spin-bulk-bytes on rxe (daemon/loop/spin_policy.h,
# Transfer::Large): two ferryd on rxe0/rxe1 with their defaults (the hold is
# in effect on a software provider) serve 12 remote calls of 1 MiB (request
# READ by rendezvous, reply WRITTEN into the caller's window). Both daemons
# must log the choice at start-up and count spin_large_sleeps > 0: they
# slept instead of spinning while a transfer of 256 KiB or more was in
# flight. The same calls with --engine-spin-bulk-bytes 0 must count none
# (the policy's off switch), and with either setting every call completes
# (ferry-bench checks every reply's length and stamp).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FERRY_BUILD:?}
dir=${FERRY_CHECK_DIR:-${TMPDIR:-/tmp}/large-sleep}
mkdir -p "$dir"
run=$(mktemp -d "${TMPDIR:-/tmp}/large-sleep.XXXXXX")
ctl=$build/control/ferryctl bench=$build/tests/perf/ferry-bench
for exe in "$build/daemon/ferryd" "$ctl" "$bench"; do
  [[ -x $exe ]] || { echo "SKIP: $exe not built"; exit 77; }
done
port=7740 spin_us=2000 pids=() daemons=()
# shellcheck source=tests/rdma/ferry-modes.sh
source "$here/ferry-modes.sh"
trap 'stop_daemons' EXIT

large_sleeps() { # large_sleeps NAME: the counter of daemon NAME (a or b)
  "$ctl" --control "$run/$1/control.sock" status --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["counters"]["spin_large_sleeps"])'
}
one() { # one TAG EXPECT(some|none) [FERRYD FLAGS...]
  local tag=$1 expect=$2 out a b attempt ok=0
  shift 2
  mode_flags default
  ferryd_flags=("$@")
  start_daemons "$tag"
  out=$dir/$tag.out
  for attempt in 1 2 3; do # the first open also brings the channel up (rdma_cm under emulation)
    if run_bench "$out" remote-rpc --size 1048576 --iters 12 --warmup 2 --socket "$run/a/ferryd.sock" \
      --server-socket "$run/b/ferryd.sock" --target "$ADDR1:$port" --json; then
      ok=1 && break
    fi
    echo "$tag: attempt $attempt failed: $(tail -n1 "$out")"
  done
  ((ok)) || { echo "FAIL $tag: remote-rpc did not complete"; exit 1; }
  python3 -c 'import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
sys.exit(0 if j["ops"] == 12 else "calls missing: %s" % j)' "$out"
  grep -q "data lanes on $RXE0" "$dir/$tag-a.log" || { echo "FAIL $tag: daemon A is not on rdma"; exit 1; }
  a=$(large_sleeps a) b=$(large_sleeps b)
  echo "$tag: spin_large_sleeps A $a, B $b"
  if [[ $expect == some ]]; then
    grep -q "no in-flight spin while a transfer of 262144 bytes" "$dir/$tag-a.log" ||
      { echo "FAIL $tag: the choice is not logged"; exit 1; }
    ((a > 0 && b > 0)) || { echo "FAIL $tag: a daemon never slept for a large transfer"; exit 1; }
  else
    grep -q "engine-spin-bulk-bytes not in effect" "$dir/$tag-a.log" ||
      { echo "FAIL $tag: the choice is not logged"; exit 1; }
    ((a == 0 && b == 0)) || { echo "FAIL $tag: large-transfer sleeps with engine-spin-bulk-bytes 0"; exit 1; }
  fi
  stop_daemons
  port=$((port + 1))
}

one defaults some
one off none --engine-spin-bulk-bytes 0
echo OK
