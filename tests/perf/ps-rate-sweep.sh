#!/usr/bin/env bash
# tests/perf/ps-rate-sweep.sh [--build DIR] [--old DIR] [--engines "1 2 4"] [--rates "R1 R2 ..."]
#                             [--workers N] [--shards M] [--keys K] [--dim D] [--iters I]
#                             [--repeat N] [--hogs] [--arm NAME=FERRYD_ARGS]... [--out DIR]
#
# Latency against throughput, the way a PS operator judges a host: for each
# offered rate, `ferry-ps bench --rate R` (open loop: Poisson arrivals per
# worker, each op's latency from its intended start), pull P50 and P99
# against the throughput achieved. Arms, one run:
#   ferry, engines=E   two ferryds on loopback (workers on A, shards on B),
#                      both with --engines E, for each E of --engines
#   old                the same with the binaries of --old (a build of an
#                      earlier ferry whose ferry-ps has --rate), engines as
#                      it had them
#   NAME               --arm NAME=ARGS: two ferryds of --build with ARGS
#                      (e.g. --arm "yield-watch=--engines 1 --engine-yield-watch on")
#   tcp                ferry-ps's per-process kernel-TCP baseline
# The arms take turns at each rate (daemons all up, order rotating), N
# rounds of turns per rate (--repeat, default 1); a point is the median of
# its N runs (achieved ops/s, P50 and P99 each), so one slow run on a
# shared machine moves no point.
# --hogs runs the whole sweep beside a batch job: one busy loop at nice 19
# pinned to each CPU this script may use (a host whose CPUs ferry's
# processes share with work that does not block).
# Writes OUT/points.jsonl (one ferry-ps JSON line per run, plus "arm" and
# "round"), OUT/latency-throughput.png (gnuplot) and prints a table of the
# medians with each metric's range over the rounds.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
old=""
engines="1 2 4"
rates="1000 2000 4000 6000 8000 10000 13000 16000 20000"
workers=4 shards=2 keys=100000 dim=64 iters=500
repeat=1
hogs=0
extra_arms=()
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift ;;
    --old) old=$2; shift ;;
    --engines) engines=$2; shift ;;
    --rates) rates=$2; shift ;;
    --workers) workers=$2; shift ;;
    --shards) shards=$2; shift ;;
    --keys) keys=$2; shift ;;
    --dim) dim=$2; shift ;;
    --iters) iters=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --hogs) hogs=1 ;;
    --arm) extra_arms+=("$2"); shift ;;
    --out) out=$2; shift ;;
    -h | --help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "ps-rate-sweep: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "ps-rate-sweep: --repeat wants a count of 1 or more" >&2; exit 2; }
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
out=${out:-$(mktemp -d /tmp/ferry-rate-sweep.XXXXXX)}
mkdir -p "$out"
run=$(mktemp -d /tmp/ferry-rate-run.XXXXXX)
hog_pids=()
stop_hogs() { [[ ${#hog_pids[@]} -eq 0 ]] || kill "${hog_pids[@]}" 2>/dev/null || true; }
trap 'stop_hogs; ferry_stop_daemons; rm -rf "$run"' EXIT
points=$out/points.jsonl
: >"$points"

common=(--workers "$workers" --shards "$shards" --keys "$keys" --dim "$dim" --iters "$iters" --warmup 20 --json)

# Every arm's daemons start first and stay up (idle ones sleep); then each
# rate runs every arm, the order rotating from rate to rate, so that a
# machine whose load drifts during the run weighs on every arm alike.
declare -A arm_build arm_port
arms=()
start_arm() {  # start_arm ARM BUILD [FERRYD_ARG...]
  local arm=$1 bdir=$2 port_a port_b
  shift 2
  port_a=$(ferry_free_port) port_b=$(ferry_free_port)
  local -a eargs=("$@")
  ferry_start_daemon "$bdir/daemon/ferryd" "$run/$arm-a" --transport tcp --listen "127.0.0.1:$port_a" "${eargs[@]}"
  ferry_start_daemon "$bdir/daemon/ferryd" "$run/$arm-b" --transport tcp --listen "127.0.0.1:$port_b" "${eargs[@]}"
  arm_build[$arm]=$bdir
  arm_port[$arm]=$port_b
  arms+=("$arm")
}

summary() {
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("achieved %.0f ops/s, pull p50 %.0f us p99 %.0f us" % (d["ops_per_s"], d["pull_p50_us"], d["pull_p99_us"]))' "$1"
}

point() {  # point ARM RATE ROUND: one ferry-ps bench --rate, appended to points
  local arm=$1 r=$2 round=$3 line
  if [[ $arm == tcp ]]; then
    line=$("$build/client/examples/ps/ferry-ps" bench --transport tcp "${common[@]}" --rate "$r" --target 127.0.0.1 |
      tail -1)
  else
    line=$("${arm_build[$arm]}/client/examples/ps/ferry-ps" bench --transport ferry "${common[@]}" --rate "$r" \
      --socket "$run/$arm-a/ferryd.sock" --server-socket "$run/$arm-b/ferryd.sock" \
      --target "127.0.0.1:${arm_port[$arm]}" | tail -1)
  fi
  echo "${line%\}},\"arm\":\"$arm\",\"round\":$round}" >>"$points"
  echo "$arm rate $r round $round: $(summary "$line")"
}

if [[ $hogs -eq 1 ]]; then
  for cpu in $(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))'); do
    taskset -c "$cpu" nice -n 19 sh -c 'while :; do :; done' &
    hog_pids+=($!)
  done
  echo "ps-rate-sweep: beside ${#hog_pids[@]} busy loop(s) at nice 19, one per CPU"
fi
echo "ps-rate-sweep: $workers workers x $shards shards, $keys keys, dim $dim, $iters iterations per worker per run," \
  "$repeat run(s) per point"
[[ -n $old ]] && start_arm old "$old"
for e in $engines; do start_arm "engines=$e" "$build" --engines "$e"; done
for a in "${extra_arms[@]}"; do
  [[ $a == *=* && -n ${a%%=*} ]] || { echo "ps-rate-sweep: --arm wants NAME=FERRYD_ARGS, got '$a'" >&2; exit 2; }
  # shellcheck disable=SC2086  # the arguments split on spaces, as typed
  start_arm "${a%%=*}" "$build" ${a#*=}
done
arms+=(tcp)
turn=0
for r in $rates; do
  n=${#arms[@]}
  for ((k = 1; k <= repeat; ++k)); do
    for ((i = 0; i < n; ++i)); do point "${arms[$(((i + turn) % n))]}" "$r" "$k"; done
    turn=$((turn + 1))
  done
done
ferry_stop_daemons

# One data file per arm (offered, then the medians of achieved ops/s, P50
# and P99 over the rounds), then both panels.
python3 - "$points" "$out" <<'PY'
import json, statistics, sys
points, out = sys.argv[1], sys.argv[2]
runs = {}  # arm -> offered -> [(achieved, p50, p99)]
for line in open(points):
    d = json.loads(line)
    runs.setdefault(d["arm"], {}).setdefault(d["offered_ops_per_s"], []).append(
        (d["ops_per_s"], d["pull_p50_us"], d["pull_p99_us"]))
with open(out + "/arms.txt", "w") as f:
    for arm in runs:
        f.write(arm + "\n")
print(f"{'arm':<12} {'offered':>9} {'achieved':>17} {'p50 us':>15} {'p99 us':>19}  (median, range over rounds)")
for arm, by_rate in runs.items():
    with open(out + "/arm-" + arm.replace("=", "") + ".dat", "w") as f:
        for offered, rs in by_rate.items():
            cols = list(zip(*rs))
            med = [statistics.median(c) for c in cols]
            f.write(f"{offered} {med[0]} {med[1]} {med[2]}\n")
            span = [f"{m:.0f} ({min(c):.0f}-{max(c):.0f})" if len(c) > 1 else f"{m:.0f}" for m, c in zip(med, cols)]
            print(f"{arm:<12} {offered:>9.0f} {span[0]:>17} {span[1]:>15} {span[2]:>19}")
PY
if command -v gnuplot >/dev/null; then
  plot=""
  while read -r arm; do
    f="$out/arm-${arm//=/}.dat"
    plot+="'$f' using 2:COL with linespoints title '$arm',"
  done <"$out/arms.txt"
  plot=${plot%,}
  gnuplot <<GP
set terminal pngcairo size 1200,500 font ",10"
set output '$out/latency-throughput.png'
set multiplot layout 1,2 title "ferry-ps bench --rate: pull latency against achieved throughput ($workers workers x $shards shards, dim $dim)"
set logscale y
set grid
set xlabel 'achieved ops/s'
set key top left
set ylabel 'pull P50 (us)'
plot ${plot//COL/3}
set ylabel 'pull P99 (us)'
plot ${plot//COL/4}
unset multiplot
GP
  echo "ps-rate-sweep: $out/latency-throughput.png"
fi
echo "ps-rate-sweep: points in $points"
