#!/usr/bin/env bash
# tests/perf/engines-scaling.sh [--build DIR | --bundle DIR] [--workers "1 2 4 8 16"]
#                               [--engines "1 auto"] [--old DIR] [--shards M] [--keys K] [--dim D] [--iters I]
#                               [--out DIR]
#
# Parameter-server throughput and pull latency as worker processes grow, the
# way the engines were sized: two ferryds on loopback (workers on A, shards
# on B), both with --engines E, `ferry-ps bench --workers W`, for each E and
# W; and ferry-ps's per-process kernel-TCP arm for each W. One JSON line
# per point in OUT/points.jsonl (ferry-ps's, plus "arm"), a table at the
# end, with each ferry arm's ops/s as a ratio to TCP's at the same W.
#   --build DIR   binaries of a meson build (default build/)
#   --bundle DIR  a bundle made by the device tooling (DIR/run NAME runs bin/NAME)
#   --old DIR     also an "old" arm: the binaries of a build from before the
#                 engines (a build dir, or a bundle with DIR/run), one engine
#   --engines     a list of E; an entry A/B gives the workers' ferryd A engines
#                 and the shards' B (which side's engines cost what)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
bundle=""
old=""
workers="1 2 4 8 16"
engines="1 auto"
shards=4 keys=512 dim=64 iters=1000
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift ;;
    --bundle) bundle=$2; shift ;;
    --workers) workers=$2; shift ;;
    --engines) engines=$2; shift ;;
    --old) old=$2; shift ;;
    --shards) shards=$2; shift ;;
    --keys) keys=$2; shift ;;
    --dim) dim=$2; shift ;;
    --iters) iters=$2; shift ;;
    --out) out=$2; shift ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "engines-scaling: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
if [[ -n $bundle ]]; then
  ferryd="$bundle/run ferryd"
  ps=("$bundle/run" ferry-ps)
else
  ferryd=$build/daemon/ferryd
  ps=("$build/client/examples/ps/ferry-ps")
fi
out=${out:-$(mktemp -d /tmp/ferry-engines-scaling.XXXXXX)}
mkdir -p "$out"
run=$(mktemp -d /tmp/ferry-es-run.XXXXXX)
trap 'ferry_stop_daemons; rm -rf "$run"' EXIT
points=$out/points.jsonl
: >"$points"
common=(--shards "$shards" --keys "$keys" --dim "$dim" --iters "$iters" --json)
echo "engines-scaling: $(nproc) CPUs; shards $shards, keys $keys, dim $dim, $iters iterations per worker"

for w in $workers; do
  line=$("${ps[@]}" bench --transport tcp --workers "$w" "${common[@]}" --target 127.0.0.1 | tail -1)
  echo "${line%\}},\"arm\":\"tcp\"}" >>"$points"
done
# arm NAME FERRYD PS... -- [ENGINES_A [ENGINES_B]]: two daemons (with
# --engines ENGINES_A and ENGINES_B where given), every worker count.
arm() {
  local name=$1 daemon=$2 port_a port_b w line
  shift 2
  local -a client=() args_a=() args_b=()
  while [[ $1 != -- ]]; do client+=("$1"); shift; done
  shift
  [[ $# -ge 1 ]] && args_a=(--engines "$1")
  [[ $# -ge 2 ]] && args_b=(--engines "$2")
  port_a=$(ferry_free_port 64) port_b=$(ferry_free_port 64)
  local prefix=""  # "BUNDLE/run ferryd": BUNDLE/run is the prefix
  [[ $daemon == *" "* ]] && prefix=${daemon% *}
  FERRY_DAEMON_PREFIX="$prefix" ferry_start_daemon "${daemon##* }" "$run/a-$name" --transport tcp \
    --listen "127.0.0.1:$port_a" "${args_a[@]}"
  FERRY_DAEMON_PREFIX="$prefix" ferry_start_daemon "${daemon##* }" "$run/b-$name" --transport tcp \
    --listen "127.0.0.1:$port_b" "${args_b[@]}"
  for w in $workers; do
    line=$("${client[@]}" bench --transport ferry --workers "$w" "${common[@]}" --socket "$run/a-$name/ferryd.sock" \
      --server-socket "$run/b-$name/ferryd.sock" --target "127.0.0.1:$port_b" | tail -1)
    echo "${line%\}},\"arm\":\"$name\"}" >>"$points"
  done
  ferry_stop_daemons
}
if [[ -n $old ]]; then
  if [[ -x $old/run ]]; then
    arm old "$old/run ferryd" "$old/run" ferry-ps --
  else
    arm old "$old/daemon/ferryd" "$old/client/examples/ps/ferry-ps" --
  fi
fi
for e in $engines; do
  arm "engines=$e" "$ferryd" "${ps[@]}" -- "${e%/*}" "${e#*/}"
done

python3 - "$points" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tcp = {r["workers"]: r for r in rows if r["arm"] == "tcp"}
print(f"{'arm':<12} {'workers':>7} {'ops/s':>9} {'x tcp':>6} {'pull mean':>9} {'pull p99':>9} {'cpu us/op':>9}")
for r in rows:
    t = tcp.get(r["workers"])
    ratio = r["ops_per_s"] / t["ops_per_s"] if t else float("nan")
    print(f"{r['arm']:<12} {r['workers']:>7} {r['ops_per_s']:>9.0f} {ratio:>6.2f} {r['pull_mean_us']:>9.1f} "
          f"{r['pull_p99_us']:>9.1f} {r['cpu_us_per_op']:>9.1f}")
PY
echo "engines-scaling: points in $points"
