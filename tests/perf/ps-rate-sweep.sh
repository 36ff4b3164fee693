#!/usr/bin/env bash
# tests/perf/ps-rate-sweep.sh [--build DIR] [--old DIR] [--engines "1 2 4"] [--rates "R1 R2 ..."]
#                             [--workers N] [--shards M] [--keys K] [--dim D] [--iters I] [--out DIR]
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
#   tcp                ferry-ps's per-process kernel-TCP baseline
# The arms take turns at each rate (daemons all up, order rotating).
# Writes OUT/points.jsonl (one ferry-ps JSON line per point, plus "arm"),
# OUT/latency-throughput.png (gnuplot) and prints a table.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
old=""
engines="1 2 4"
rates="1000 2000 4000 6000 8000 10000 13000 16000 20000"
workers=4 shards=2 keys=100000 dim=64 iters=500
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
    --out) out=$2; shift ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "ps-rate-sweep: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
out=${out:-$(mktemp -d /tmp/ferry-rate-sweep.XXXXXX)}
mkdir -p "$out"
run=$(mktemp -d /tmp/ferry-rate-run.XXXXXX)
trap 'ferry_stop_daemons; rm -rf "$run"' EXIT
points=$out/points.jsonl
: >"$points"

common=(--workers "$workers" --shards "$shards" --keys "$keys" --dim "$dim" --iters "$iters" --warmup 20 --json)

# Every arm's daemons start first and stay up (idle ones sleep); then each
# rate runs every arm, the order rotating from rate to rate, so that a
# machine whose load drifts during the run weighs on every arm alike.
declare -A arm_build arm_port
arms=()
start_arm() {  # start_arm ARM BUILD [ENGINES]
  local arm=$1 bdir=$2 eng=${3:-} port_a port_b
  port_a=$(ferry_free_port) port_b=$(ferry_free_port)
  local -a eargs=()
  [[ -n $eng ]] && eargs=(--engines "$eng")
  ferry_start_daemon "$bdir/daemon/ferryd" "$run/$arm-a" --transport tcp --listen "127.0.0.1:$port_a" "${eargs[@]}"
  ferry_start_daemon "$bdir/daemon/ferryd" "$run/$arm-b" --transport tcp --listen "127.0.0.1:$port_b" "${eargs[@]}"
  arm_build[$arm]=$bdir
  arm_port[$arm]=$port_b
  arms+=("$arm")
}

summary() {
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("achieved %.0f ops/s, pull p50 %.0f us p99 %.0f us" % (d["ops_per_s"], d["pull_p50_us"], d["pull_p99_us"]))' "$1"
}

point() {  # point ARM RATE: one ferry-ps bench --rate, appended to points
  local arm=$1 r=$2 line
  if [[ $arm == tcp ]]; then
    line=$("$build/client/examples/ps/ferry-ps" bench --transport tcp "${common[@]}" --rate "$r" --target 127.0.0.1 |
      tail -1)
  else
    line=$("${arm_build[$arm]}/client/examples/ps/ferry-ps" bench --transport ferry "${common[@]}" --rate "$r" \
      --socket "$run/$arm-a/ferryd.sock" --server-socket "$run/$arm-b/ferryd.sock" \
      --target "127.0.0.1:${arm_port[$arm]}" | tail -1)
  fi
  echo "${line%\}},\"arm\":\"$arm\"}" >>"$points"
  echo "$arm rate $r: $(summary "$line")"
}

echo "ps-rate-sweep: $workers workers x $shards shards, $keys keys, dim $dim, $iters iterations per worker per point"
[[ -n $old ]] && start_arm old "$old"
for e in $engines; do start_arm "engines=$e" "$build" "$e"; done
arms+=(tcp)
turn=0
for r in $rates; do
  n=${#arms[@]}
  for ((i = 0; i < n; ++i)); do point "${arms[$(((i + turn) % n))]}" "$r"; done
  turn=$((turn + 1))
done
ferry_stop_daemons

# One data file per arm (achieved ops/s, P50, P99), then both panels.
python3 - "$points" "$out" <<'PY'
import json, sys
points, out = sys.argv[1], sys.argv[2]
arms = {}
for line in open(points):
    d = json.loads(line)
    arms.setdefault(d["arm"], []).append((d["offered_ops_per_s"], d["ops_per_s"], d["pull_p50_us"], d["pull_p99_us"]))
with open(out + "/arms.txt", "w") as f:
    for arm in arms:
        f.write(arm + "\n")
for arm, rows in arms.items():
    with open(out + "/arm-" + arm.replace("=", "") + ".dat", "w") as f:
        for offered, achieved, p50, p99 in rows:
            f.write(f"{offered} {achieved} {p50} {p99}\n")
print(f"{'arm':<12} {'offered':>9} {'achieved':>9} {'p50 us':>9} {'p99 us':>10}")
for arm, rows in arms.items():
    for offered, achieved, p50, p99 in rows:
        print(f"{arm:<12} {offered:>9.0f} {achieved:>9.0f} {p50:>9.0f} {p99:>10.0f}")
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
