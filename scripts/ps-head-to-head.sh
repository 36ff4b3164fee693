#!/usr/bin/env bash
# scripts/ps-head-to-head.sh [--local|--netns] [--small] [--workers N] [--shards M]
#                            [--keys K] [--dim D] [--iters I] [--batch B] [--build DIR] [--out DIR]
#
# The parameter-server head-to-head (ferry issue 7): `ferry-ps bench` with N
# worker processes x M shard processes, once through ferry and once over
# per-process kernel TCP, then a table (pull/push mean, P50, P99, P999,
# ops/s, CPU us per op over every process incl. daemons, RSS) with the ratio
# ferry/tcp, and a latency CDF plot (PNG, gnuplot) of both, pull and push.
#
#   --local  one ferryd, everything on loopback (default)
#   --netns  two network namespaces joined by a veth pair (198.18.1.1 and
#            198.18.1.2), a ferryd in each with --listen on its address,
#            workers on A, shards on B; needs root and remote endpoints in
#            ferryd (fails with a clear message while open(HOST:PORT/SERVICE)
#            is NotSupported). Namespaces are removed on exit.
#   --small  a preset that finishes in well under a minute (scripts/demo).
# Environment: FERRYD_TRANSPORT (default tcp) is the daemons' --transport;
# FERRYD_ARGS, more ferryd flags (split on spaces), e.g. "--engine-spin-inflight-us 0".
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=local
workers=4 shards=2 keys=1000000 dim=64 iters=2000 batch=512 warmup=50
build="$repo/build"
out=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --local) mode=local ;;
    --netns) mode=netns ;;
    --small) workers=2 shards=2 keys=100000 dim=64 iters=300 warmup=20 ;;
    --workers) workers=$2; shift ;;
    --shards) shards=$2; shift ;;
    --keys) keys=$2; shift ;;
    --dim) dim=$2; shift ;;
    --iters) iters=$2; shift ;;
    --batch) batch=$2; shift ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "ps-head-to-head: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

ps="$build/client/examples/ps/ferry-ps"
ferryd="$build/daemon/ferryd"
for bin in "$ps" "$ferryd"; do
  [[ -x "$bin" ]] || { echo "ps-head-to-head: $bin is missing: build first (ninja -C $build)" >&2; exit 1; }
done
if ! command -v gnuplot >/dev/null 2>&1; then
  # shellcheck source=lib/deps.sh
  source "$repo/scripts/lib/deps.sh"
  ferry_install_deps gnuplot-nox
fi

out=${out:-$(mktemp -d /tmp/ferry-ps-h2h.XXXXXX)}
mkdir -p "$out"
ns_a="ferry-ps-a-$$" ns_b="ferry-ps-b-$$"
veth_a="fpsa$$" veth_b="fpsb$$"
veth_a=${veth_a:0:15} veth_b=${veth_b:0:15}
daemon_pids=()

cleanup() {
  local pid
  for pid in "${daemon_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ $mode == netns ]]; then
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# start_daemon DIR [NETNS LISTEN]: ferryd in DIR, waits (deadline) for its sockets.
start_daemon() {
  local dir=$1 ns=${2:-} listen=${3:-}
  mkdir -p "$dir"
  local cmd=("$ferryd" --runtime-dir "$dir" --transport "${FERRYD_TRANSPORT:-tcp}" ${FERRYD_ARGS:-})
  [[ -n $listen ]] && cmd+=(--listen "$listen")
  if [[ -n $ns ]]; then cmd=(ip netns exec "$ns" "${cmd[@]}"); fi
  "${cmd[@]}" >"$dir/ferryd.log" 2>&1 &
  daemon_pids+=($!)
  local i
  for ((i = 0; i < 200; i++)); do
    [[ -S $dir/ferryd.sock && -S $dir/control.sock ]] && return 0
    kill -0 "${daemon_pids[-1]}" 2>/dev/null || break
    sleep 0.05
  done
  echo "ps-head-to-head: ferryd in $dir did not come up:" >&2
  tail -20 "$dir/ferryd.log" >&2
  exit 1
}

common=(--workers "$workers" --shards "$shards" --keys "$keys" --dim "$dim" --iters "$iters"
        --batch "$batch" --warmup "$warmup" --json)

if [[ $mode == local ]]; then
  start_daemon "$out/ferryd"
  ferry_args=(--socket "$out/ferryd/ferryd.sock")
  tcp_args=(--target 127.0.0.1)
  where="one ferryd, loopback"
else
  [[ $(id -u) -eq 0 ]] || { echo "ps-head-to-head: --netns needs root (ip netns)" >&2; exit 1; }
  ip netns add "$ns_a"
  ip netns add "$ns_b"
  ip link add "$veth_a" type veth peer name "$veth_b"
  ip link set "$veth_a" netns "$ns_a"
  ip link set "$veth_b" netns "$ns_b"
  ip -n "$ns_a" addr add 198.18.1.1/24 dev "$veth_a"
  ip -n "$ns_b" addr add 198.18.1.2/24 dev "$veth_b"
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
  ip -n "$ns_a" link set "$veth_a" up
  ip -n "$ns_b" link set "$veth_b" up
  # Nothing is sent before the route from A to B is proven to be the veth.
  route=$(ip netns exec "$ns_a" ip route get 198.18.1.2)
  if [[ $route != *"dev $veth_a"* ]]; then
    echo "ps-head-to-head: route from $ns_a to 198.18.1.2 is not via $veth_a: $route" >&2
    exit 1
  fi
  echo "route check: $route"
  start_daemon "$out/ferryd-a" "$ns_a" 198.18.1.1:7470
  start_daemon "$out/ferryd-b" "$ns_b" 198.18.1.2:7470
  ferry_args=(--socket "$out/ferryd-a/ferryd.sock" --server-socket "$out/ferryd-b/ferryd.sock"
              --target 198.18.1.2:7470)
  tcp_args=(--target 198.18.1.2 --worker-netns "$ns_a" --shard-netns "$ns_b")
  where="two namespaces over veth 198.18.1.1 -> 198.18.1.2"
fi

echo "== ferry-ps head-to-head ($where): $workers workers x $shards shards, $keys keys, dim $dim, batch $batch, $iters iters"
for t in ferry tcp; do
  if [[ $t == ferry ]]; then args=("${ferry_args[@]}"); else args=("${tcp_args[@]}"); fi
  echo "-- $t"
  if ! "$ps" bench --transport "$t" "${common[@]}" "${args[@]}" --latency-dump "$out/$t.lat" \
      >"$out/$t.out" 2>"$out/$t.err"; then
    cat "$out/$t.out" "$out/$t.err" >&2
    if grep -q NotSupported "$out/$t.err"; then
      echo "ps-head-to-head: ferryd does not support remote endpoints yet (open HOST:PORT/SERVICE -> NotSupported); --netns needs daemon-to-daemon channels" >&2
    fi
    exit 1
  fi
  grep -v '^{' "$out/$t.out"
  tail -n 1 "$out/$t.out" >"$out/$t.json"
done

python3 - "$out/ferry.json" "$out/tcp.json" <<'PY'
import json, sys
f, t = (json.load(open(p)) for p in sys.argv[1:3])
rows = [("pull mean us", "pull_mean_us"), ("pull p50 us", "pull_p50_us"), ("pull p99 us", "pull_p99_us"),
        ("pull p999 us", "pull_p999_us"), ("push mean us", "push_mean_us"), ("push p50 us", "push_p50_us"),
        ("push p99 us", "push_p99_us"), ("push p999 us", "push_p999_us"), ("ops/s", "ops_per_s"),
        ("cpu us/op", "cpu_us_per_op"), ("rss kB", "rss_kb")]
print()
print("%-14s %12s %12s %12s" % ("metric", "ferry", "tcp", "ferry/tcp"))
for name, key in rows:
    a, b = float(f[key]), float(t[key])
    print("%-14s %12.1f %12.1f %12.3f" % (name, a, b, a / b if b else float("nan")))
PY

# CDF data: "latency_us cumulative_fraction" per transport and op.
for t in ferry tcp; do
  for op in pull push; do
    awk -v op="$op" '$1 == op { print $2 }' "$out/$t.lat" | sort -g |
      awk '{ v[NR] = $1 } END { for (i = 1; i <= NR; i++) print v[i], i / NR }' >"$out/$t-$op.cdf"
  done
done
plot="$out/ps-latency-cdf.png"
gnuplot <<GP
set terminal pngcairo size 1200,500 noenhanced
set output "$plot"
set multiplot layout 1,2 title "ferry-ps latency CDF ($where; $workers workers x $shards shards, dim $dim, batch $batch)"
set logscale x
set xlabel "latency (us)"
set ylabel "fraction of operations"
set key bottom right
set grid
set yrange [0:1]
set title "pull"
plot "$out/ferry-pull.cdf" using 1:2 with lines lw 2 title "ferry", "$out/tcp-pull.cdf" using 1:2 with lines lw 2 title "kernel TCP"
set title "push"
plot "$out/ferry-push.cdf" using 1:2 with lines lw 2 title "ferry", "$out/tcp-push.cdf" using 1:2 with lines lw 2 title "kernel TCP"
unset multiplot
GP
echo
echo "results: $out (ferry.json, tcp.json, *.lat raw latencies)"
echo "plot: $plot"
