#!/usr/bin/env bash
# tests/rdma/soft-roce-bench.sh [--build DIR] [--keep DIR]
#
# The Soft-RoCE benchmarks in ONE VM boot, bounded to 15 minutes of VM
# time, printing the tables of docs/benchmarks/soft-roce-peers.md,
# docs/benchmarks/ps-soft-roce.md and docs/benchmarks/soft-roce-counts.md:
#   1. the peers bench (bench-vs-perftest.sh): 64 B, 4 KiB, 64 KiB, 1 MiB
#      round trips of ferry remote-rpc over rdma (modes: default, busy =
#      the client and echo server busy-poll; the earlier datapaths are
#      modes of ferry-modes.sh), kernel TCP (tcp-rpc, and tcp-relay-rpc:
#      the same through a relay process on each side, ferry's four-process
#      shape), rsockets (rstream), libfabric verbs (fi_pingpong) and
#      perftest, 2 interleaved repeats, with the machine probe
#      (vcpu_stalls.py) each repeat;
#   2. the PS head-to-head (ps-vm-bench.sh): ferry-ps bench through the two
#      ferryd against per-process kernel TCP, 16 keys x dim 16 and the
#      default 512 x 64, 2 interleaved repeats;
#   3. the counts per call (count-calls.sh): doorbells, binds, CQ arms,
#      wake-ups, syscalls and CPU per call at 64 B and 64 KiB, ferry
#      default, and rstream at 64 B for comparison.
# Each part has its own timeout; one that runs out (a heavily loaded host)
# prints the tables of what it measured so far, marked STOPPED.
# Everything is also kept under DIR (default: the VM suite's results folder
# in the build tree, rewritten by the next VM run; --keep copies it there).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build keep=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "soft-roce-bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
list=$(mktemp /tmp/ferry-soft-roce-bench-XXXXXX.list)
trap 'rm -f "$list"' EXIT
# NAME TIMEOUT COMMAND: the timeouts add up to under the VM's 900 s.
cat >"$list" <<'EOF'
@no-meson
bench 420 BENCH_ITERS=300 BENCH_REPEATS=2 BENCH_MODES="default busy" BENCH_PEERS="rstream fi_pingpong" BENCH_LOCAL=0 BENCH_TOOLS="ferry tcp relay peers perftest" tests/rdma/bench-vs-perftest.sh
ps 240 PS_REPEATS=2 PS_ITERS_SMALL=200 PS_ITERS_DEFAULT=20 PS_MODES="before default" tests/rdma/ps-vm-bench.sh
counts 200 COUNT_SCENARIOS="ferry-default:64 ferry-default:65536 rstream:64" tests/rdma/count-calls.sh
EOF
echo "soft-roce-bench: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$repo" rev-parse --short HEAD), host load: $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
"$repo/tests/rdma/run-vm-suite.sh" --build "$build" --checks "$list" --timeout 900 || rc=$?
results=$build/vm-suite-results
for check in bench ps counts; do
  log=$results/checks/$check/output.log
  echo
  echo "======== $check ($log)"
  # The tables and summaries; progress lines left out.
  [[ -f $log ]] && grep -v -E '^(repeat [0-9]+ size|ps repeat|counted )' "$log" || echo "(no output)"
done
echo
echo "host load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n $keep ]]; then
  mkdir -p "$keep" && cp -r "$results/." "$keep/" && echo "kept: $keep"
fi
exit $rc
