#!/usr/bin/env bash
# tests/perf/callgrind-engine.sh [--build DIR] [--bench PATH] [--messages N] [--size BYTES] [--out DIR]
#
# Instructions the engine thread executes per forwarded message: ferryd runs
# under valgrind --tool=callgrind (one output per thread), and
# `ferry-bench ipc-echo` sends N messages, then 3N, through it; the engine
# thread's counters are zeroed before and dumped after each run, and
#   (Ir(3N) - Ir(N)) / 2N
# is the cost of one message with each run's set-up (attach, serve, open)
# taken out. The daemon does not spin (engine-spin-us 0): a spin's idle
# turns would count as many instructions as the emulation is slow, where
# a sleeping engine does one working turn, one idle turn and a sleep per
# message, which is repeatable. The client waits on its CQ doorbell.
# Prints "instructions/message N" and the functions that take them
# (callgrind_annotate, inclusive), and keeps the dumps in --out.
#
#   --bench  the ferry-bench to drive it with (default BUILD/tests/perf/ferry-bench);
#            a ferryd of another build is measured with --build.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
bench=""
messages=2000
size=64
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift ;;
    --bench) bench=$2; shift ;;
    --messages) messages=$2; shift ;;
    --size) size=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "callgrind-engine: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
ferryd=$build/daemon/ferryd
bench=${bench:-$build/tests/perf/ferry-bench}
for bin in "$ferryd" "$bench"; do
  [[ -x "$bin" ]] || { echo "callgrind-engine: $bin is missing (build first)" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "callgrind-engine: valgrind is not installed" >&2; exit 1; }

out=${out:-$(mktemp -d /tmp/ferry-callgrind.XXXXXX)}
mkdir -p "$out"
dir=$(mktemp -d /tmp/ferry-cg-run.XXXXXX)
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
cleanup() {
  ferry_stop_daemons
  rm -rf "$dir"
}
trap cleanup EXIT

# Under valgrind (which runs ferryd in its own process: the pid is ferryd's).
ferry_start_daemon --wait 60 --log "$out/ferryd.log" \
  --prefix "valgrind --tool=callgrind --separate-threads=yes --dump-instr=no --callgrind-out-file=$out/callgrind.%p" \
  "$ferryd" "$dir" --transport tcp --engine-spin-us 0 --engine-spin-inflight-us 0 --log-level warn || exit 1
daemon_pid=$ferry_daemon_pid

# run N LABEL: zero the counters, send N messages, dump (one file per thread).
run() {
  callgrind_control -z "$daemon_pid" >/dev/null
  "$bench" ipc-echo --socket "$dir/ferryd.sock" --size "$size" --iters "$1" --warmup 0 --json >"$out/bench-$2.json"
  callgrind_control -d "$2" "$daemon_pid" >/dev/null
}
run "$messages" short
run $((3 * messages)) long

# The engine thread's dump of a run (dumps are numbered from 1, one file
# per thread): the one whose functions include Engine::run.
engine_ir() {
  local f
  for f in "$out"/callgrind."${daemon_pid}.$2"-*; do
    [[ -f "$f" ]] || continue
    if grep -q "Engine::run" "$f" && grep -q "Trigger: dump $1" "$f"; then
      awk '/^summary:/ { print $2; exit }' "$f"
      echo "$f" >"$out/engine-$1.path"
      return
    fi
  done
  echo "callgrind-engine: no engine thread dump for run $1 in $out" >&2
  exit 1
}
short_ir=$(engine_ir short 1)
long_ir=$(engine_ir long 2)
per=$(((long_ir - short_ir) / (2 * messages)))
echo "engine instructions: ${short_ir} for ${messages} messages, ${long_ir} for $((3 * messages)) messages"
echo "instructions/message ${per}"
echo
echo "where they go (the $((3 * messages))-message run, inclusive, top entries):"
callgrind_annotate --inclusive=yes "$(cat "$out/engine-long.path")" 2>/dev/null | sed -n '1,60p' |
  grep -E '^ *[0-9,]+ ' | head -30
echo "dumps: $out"
