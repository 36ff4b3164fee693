#!/usr/bin/env bash
# tests/perf/callgrind-engine.sh [--build DIR] [--bench PATH] [--messages N] [--size BYTES] [--rounds R] [--out DIR]
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
# --rounds R (default 3) repeats the pair of runs R times in the same
# daemon: a run where the machine's other work descheduled the client
# has the engine sleep and wake more often, which only adds instructions,
# so the least N-message run and the least 3N-message run are the figure,
#   (min Ir(3N) - min Ir(N)) / 2N
# (a minimum of the per-round differences would be biased low: noise in a
# round's N-message run subtracts), and the median of the rounds'
# differences says how noisy the machine was. Prints each round, then
# "instructions/message N" and
# the functions that take them (callgrind_annotate, inclusive), and keeps
# the dumps in --out.
#
#   --bench  the ferry-bench to drive it with (default BUILD/tests/perf/ferry-bench);
#            a ferryd of another build is measured with --build.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
bench=""
messages=2000
size=64
rounds=3
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift ;;
    --bench) bench=$2; shift ;;
    --messages) messages=$2; shift ;;
    --size) size=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
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
# engine_ir LABEL: the engine thread's instructions in dump LABEL (one
# file per thread and dump: the engine's is the one that ran Engine::turn).
engine_ir() {
  local f best="" best_ir=0 ir
  for f in "$out"/callgrind."${daemon_pid}".*; do
    [[ -f "$f" ]] || continue
    grep -q "^desc: Trigger: .*dump $1\$" "$f" || continue
    grep -q "Engine::turn" "$f" || continue
    ir=$(awk '/^summary:/ { print $2; exit }' "$f")
    if [[ -n "$ir" && "$ir" -gt "$best_ir" ]]; then best_ir=$ir best=$f; fi
  done
  [[ -n "$best" ]] || { echo "callgrind-engine: no engine thread dump for run $1 in $out" >&2; exit 1; }
  echo "$best" >"$out/engine-$1.path"
  echo "$best_ir"
}
per_round=()
least_short=""
least_long=""
best=1
for ((r = 1; r <= rounds; r++)); do
  run "$messages" "short$r"
  run $((3 * messages)) "long$r"
  short_ir=$(engine_ir "short$r")
  long_ir=$(engine_ir "long$r")
  [[ -z "$least_short" || "$short_ir" -lt "$least_short" ]] && least_short=$short_ir
  if [[ -z "$least_long" || "$long_ir" -lt "$least_long" ]]; then
    least_long=$long_ir
    best=$r
  fi
  per_round+=($(((long_ir - short_ir) / (2 * messages))))
  echo "round $r: engine instructions ${short_ir} for ${messages} messages, ${long_ir} for $((3 * messages)): $((
    (long_ir - short_ir) / (2 * messages))) per message"
done
sorted=$(printf '%s\n' "${per_round[@]}" | sort -n)
figure=$(((least_long - least_short) / (2 * messages)))
median=$(sed -n "$(((rounds + 1) / 2))p" <<<"$sorted")
echo "instructions/message ${figure} (least runs of ${rounds} rounds; median ${median})"
echo
echo "where they go (round ${best}'s $((3 * messages))-message run, inclusive, top entries):"
callgrind_annotate --inclusive=yes "$(cat "$out/engine-long${best}.path")" 2>/dev/null | sed -n '1,60p' |
  grep -E '^ *[0-9,]+ ' | head -30
echo "dumps: $out"
