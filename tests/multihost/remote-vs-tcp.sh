#!/usr/bin/env bash
# remote-rpc (ferry, two daemons) against tcp-rpc (kernel TCP, one
# connection per process pair) in the same run: median and P99 per size,
# plus CPU per operation. Prints every command it runs.
#
#   tests/multihost/remote-vs-tcp.sh [--netns] [--build DIR] [--iters N] [--sizes LIST]
#
# Loopback (default): two ferryd on 127.0.0.1 with free ports; tcp-rpc forks
# its server on 127.0.0.1 (its CPU is charged).
# --netns (root): two network namespaces joined by a veth pair with
# 198.18.3.1/.2 (benchmarking range; `ip route get` is checked to name the
# veth before any traffic), one ferryd in each; the measuring client runs
# in the first; tcp-rpc talks to `ferry-bench tcp-server` in the second
# (that server's CPU is not charged: ferry-bench did not fork it).
# Everything is removed on exit, also on failure or Ctrl-C.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
# shellcheck source=../../scripts/lib/net.sh
source "$repo/scripts/lib/net.sh"
build="$repo/build"
iters=2000
sizes=64,4096,65536,1048576
netns=0
transport=${FERRY_TRANSPORT:-tcp}
while [ $# -gt 0 ]; do
  case "$1" in
    --netns) netns=1 ;;
    --build) build=$2; shift ;;
    --iters) iters=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "remote-vs-tcp: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
ferryd=$(ferry_program "$build" ferryd) || exit 1
bench=$(ferry_program "$build" ferry-bench) || exit 1

work=$(mktemp -d /tmp/ferry-remote-vs-tcp-XXXXXX)
pids=()
nss=()
cleanup() {
  ferry_stop_daemons
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

show() { echo "+ $*" >&2; "$@"; }

# in_ns NS CMD...: run CMD in namespace NS (or here, in loopback mode).
in_ns() {
  local ns=$1; shift
  if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi
}


ns_a="" ns_b=""
if [ $netns = 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "--netns needs root" >&2; exit 77; }
  ns_a="frvt$$-a" ns_b="frvt$$-b"
  host_a=198.18.3.1 host_b=198.18.3.2 port_a=7400 port_b=7400
  for n in "$ns_a" "$ns_b"; do show ip netns add "$n"; nss+=("$n"); show ip -n "$n" link set lo up; done
  show ip -n "$ns_a" link add fv0 type veth peer name fv0 netns "$ns_b"
  show ip -n "$ns_a" addr add $host_a/24 dev fv0
  show ip -n "$ns_b" addr add $host_b/24 dev fv0
  show ip -n "$ns_a" link set fv0 up
  show ip -n "$ns_b" link set fv0 up
  # Before any traffic: each side's route to the other names its own veth.
  ferry_check_route --netns "$ns_a" fv0 $host_b || exit 1
  ferry_check_route --netns "$ns_b" fv0 $host_a || exit 1
else
  host_a=127.0.0.1 host_b=127.0.0.1 port_a=$(ferry_free_port) port_b=$(ferry_free_port)
fi

ferry_start_daemon --show ${ns_a:+--netns "$ns_a"} --port "$port_a" "$ferryd" "$work/a" --listen "$host_a:$port_a" \
  --transport "$transport" --log-level warn || exit 1
ferry_start_daemon --show ${ns_b:+--netns "$ns_b"} --port "$port_b" "$ferryd" "$work/b" --listen "$host_b:$port_b" \
  --transport "$transport" --log-level warn || exit 1

common=(--sizes "$sizes" --iters "$iters" --json)
show in_ns "$ns_a" "$bench" remote-rpc "${common[@]}" --socket "$work/a/ferryd.sock" \
  --server-socket "$work/b/ferryd.sock" --target "$host_b:$port_b" >"$work/remote.json"
if [ $netns = 1 ]; then
  tport=7500
  echo "+ ip netns exec $ns_b $bench tcp-server --listen $host_b:$tport" >&2
  ip netns exec "$ns_b" "$bench" tcp-server --listen "$host_b:$tport" >"$work/tcp-server.log" 2>&1 &
  pids+=($!)
  deadline=$((SECONDS + 10))
  until ip netns exec "$ns_b" ss -Hltn "sport = :$tport" | grep -q .; do
    [ $SECONDS -lt $deadline ] || { echo "tcp-server did not come up" >&2; exit 1; }
    sleep 0.05
  done
  show in_ns "$ns_a" "$bench" tcp-rpc "${common[@]}" --target "$host_b:$tport" >"$work/tcp.json"
else
  show "$bench" tcp-rpc "${common[@]}" >"$work/tcp.json"
fi

python3 - "$work/remote.json" "$work/tcp.json" "$([ $netns = 1 ] && echo netns || echo loopback)" <<'EOF'
import json, sys
def load(path):
    rows = {}
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            o = json.loads(line)
            if "error" in o:
                sys.exit("%s: %s" % (o.get("scenario"), o.get("message")))
            rows[o["size"]] = o
    return rows
remote, tcp = load(sys.argv[1]), load(sys.argv[2])
print("\nremote-rpc (ferry, 2 daemons, %s) vs tcp-rpc (kernel TCP), concurrency 1" % sys.argv[3])
print("| size | remote p50 us | tcp p50 us | p50 ratio | remote p99 us | tcp p99 us | p99 ratio | remote cpu us/op | tcp cpu us/op |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for size in sorted(remote):
    r, t = remote[size], tcp.get(size)
    if t is None:
        continue
    print("| %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %.1f | %.1f |" % (
        size, r["p50_us"], t["p50_us"], r["p50_us"] / t["p50_us"], r["p99_us"], t["p99_us"],
        r["p99_us"] / t["p99_us"], r["cpu_us_per_op"], t["cpu_us_per_op"]))
print("\nratio < 1: ferry faster. remote cpu includes both daemons and the forked server.")
EOF
