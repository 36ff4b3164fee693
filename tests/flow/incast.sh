#!/usr/bin/env bash
# Incast table: 16 sender processes over 4 sender daemons to one receiving
# service on a fifth daemon (ferry-bench incast), each daemon in its own
# network namespace, with the send windows at their defaults ("on") and with
# every window key 0 ("off"). Medians of --repeat runs per size; ratios
# off/on. With --slow-consumer also the slow-consumer comparison: service B
# with 8 senders alone, then with 8 more senders to a service A on the same
# daemon whose process is SIGSTOPped for the measured phase; B's goodput
# and P99 medians and whether they meet the acceptance (>= 90 %, <= 2x).
#
#   tests/flow/incast.sh [--build DIR] [--iters N] [--repeat R] [--sizes LIST]
#                        [--senders N] [--concurrency C] [--slow-consumer]
#
# Needs root (network namespaces; exits 77 otherwise). Namespaces: a hub
# with a bridge, and one per daemon with a veth "fv0" on 198.18.5.0/24
# (benchmarking range; `ip route get` is checked to name fv0 before any
# traffic). Everything is removed on exit, also on failure or Ctrl-C.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
# shellcheck source=../../scripts/lib/net.sh
source "$repo/scripts/lib/net.sh"
build="$repo/build"
iters=1600
repeat=3
sizes=65536,262144,1048576
senders=16
concurrency=16
slow=0
daemons=4
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift ;;
    --iters) iters=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --senders) senders=$2; shift ;;
    --concurrency) concurrency=$2; shift ;;
    --slow-consumer) slow=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "incast: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
ferryd=$(ferry_program "$build" ferryd) || exit 1
bench=$(ferry_program "$build" ferry-bench) || exit 1
[ "$(id -u)" = 0 ] || { echo "incast.sh needs root (network namespaces)" >&2; exit 77; }

work=$(mktemp -d /tmp/ferry-incast-XXXXXX)
nss=()
cleanup() {
  ferry_stop_daemons
  for n in "${nss[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

show() { echo "+ $*" >&2; "$@"; }

# Host 0 is the receiver, 1..daemons the senders: 198.18.5.(i+1).
hub="fic$$-hub"
addr() { echo "198.18.5.$(($1 + 1))"; }
ns() { echo "fic$$-h$1"; }
show ip netns add "$hub"; nss+=("$hub")
show ip -n "$hub" link set lo up
show ip -n "$hub" link add br0 type bridge
show ip -n "$hub" link set br0 up
for i in $(seq 0 $daemons); do
  n=$(ns "$i")
  show ip netns add "$n"; nss+=("$n")
  show ip -n "$n" link set lo up
  show ip -n "$hub" link add "p$i" type veth peer name fv0 netns "$n"
  show ip -n "$hub" link set "p$i" master br0
  show ip -n "$hub" link set "p$i" up
  show ip -n "$n" addr add "$(addr "$i")/24" dev fv0
  show ip -n "$n" link set fv0 up
done
# Before any traffic: every host's route to every other names its own veth.
for i in $(seq 0 $daemons); do
  for j in $(seq 0 $daemons); do
    [ "$i" = "$j" ] && continue
    ferry_check_route --netns "$(ns "$i")" fv0 "$(addr "$j")" || exit 1
  done
done

# start_daemons SET PORT ARGS...: one ferryd per namespace for daemon set SET
# (window on/off), listening on PORT, with extra ARGS. Both sets run side by
# side so their runs can alternate (no drift between a first and a second half).
start_daemons() {
  local set=$1 port=$2 i; shift 2
  for i in $(seq 0 $daemons); do
    ferry_start_daemon --show --netns "$(ns "$i")" --port "$port" "$ferryd" "$work/$set$i" \
      --listen "$(addr "$i"):$port" --transport tcp --log-level warn --peer-timeout-ms 5000 "$@" || exit 1
  done
}
window_off=(--endpoint-window-ops 0 --channel-window-ops 0 --channel-window-bytes 0 --nic-window-bytes 0)
start_daemons on 7400
start_daemons off 7401 "${window_off[@]}"

# incast SET ARGS...: ferry-bench incast from the sender daemons of SET to its receiver daemon.
incast() {
  local set=$1 port; shift
  port=$([ "$set" = on ] && echo 7400 || echo 7401)
  local sockets
  sockets=$(for i in $(seq 1 $daemons); do printf '%s' "$work/$set$i/ferryd.sock,"; done)
  echo "+ $bench incast --socket ${sockets%,} --server-socket $work/${set}0/ferryd.sock --target $(addr 0):$port --concurrency $concurrency --json $*" >&2
  "$bench" incast --socket "${sockets%,}" --server-socket "$work/${set}0/ferryd.sock" --target "$(addr 0):$port" \
    --concurrency "$concurrency" --json "$@"
}

for r in $(seq 1 "$repeat"); do
  for mode in on off; do
    incast $mode --sizes "$sizes" --iters "$iters" --senders "$senders" | sed "s/^{/{\"window\":\"$mode\",/" >>"$work/incast.json"
  done
  if [ $slow = 1 ]; then
    for stall in 0 8; do
      incast on --size 262144 --iters "$iters" --senders 8 --stall-senders $stall >>"$work/slow.json"
    done
  fi
done

python3 - "$work/incast.json" "$work/slow.json" "$senders" "$daemons" "$concurrency" <<'EOF'
import json, os, statistics, sys
def load(path):
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            o = json.loads(line)
            if "error" in o:
                sys.exit("incast failed: %s" % o.get("message"))
            rows.append(o)
    return rows
med = lambda rows, k: statistics.median(r[k] for r in rows)
rows = load(sys.argv[1])
print("\nincast %s:1 over tcp (%s sender daemons, network namespaces), %s Sends outstanding per sender; medians of %d runs"
      % (sys.argv[3], sys.argv[4], sys.argv[5], len(rows) // max(1, len({(r["window"], r["size"]) for r in rows}))))
print("| size | window | p50 ms | p99 ms | p999 ms | goodput MB/s | busy retries | window_stalls | credit_stalls | busy_rejects | rnr_naks |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for size in sorted({r["size"] for r in rows}):
    by = {}
    for mode in ("on", "off"):
        rs = [r for r in rows if r["size"] == size and r["window"] == mode]
        if not rs:
            continue
        by[mode] = rs
        print("| %d KiB | %s | %.2f | %.2f | %.2f | %.0f | %d | %d | %d | %d | %d |" % (
            size // 1024, mode, med(rs, "p50_us") / 1e3, med(rs, "p99_us") / 1e3, med(rs, "p999_us") / 1e3,
            med(rs, "bytes_per_s") / 1e6, med(rs, "busy_retries"), med(rs, "window_stalls"),
            med(rs, "credit_stalls"), med(rs, "busy_rejects"), max(r["rnr_naks"] for r in rs)))
    if len(by) == 2:
        print("| %d KiB | off/on | %.2f | %.2f | %.2f | %.2f | | | | | |" % (
            size // 1024, *(med(by["off"], k) / med(by["on"], k) for k in ("p50_us", "p99_us", "p999_us", "bytes_per_s"))))
slow = load(sys.argv[2])
if slow:
    base = [r for r in slow if r["stall_senders"] == 0]
    stalled = [r for r in slow if r["stall_senders"] > 0]
    bw = med(stalled, "bytes_per_s") / med(base, "bytes_per_s")
    p99 = med(stalled, "p99_us") / med(base, "p99_us")
    print("\nslow consumer, 256 KiB, windows on: service B (8 senders) alone vs with service A (8 senders) stalled; medians of %d" % len(base))
    print("| run | B goodput MB/s | B p99 ms | A Sends | A Ok | A Busy | A Timeout | busy_rejects | window_stalls | credit_stalls |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, rs in (("B alone", base), ("B + A stalled", stalled)):
        print("| %s | %.0f | %.2f | %d | %d | %d | %d | %d | %d | %d |" % (
            name, med(rs, "bytes_per_s") / 1e6, med(rs, "p99_us") / 1e3, med(rs, "stall_sends"), med(rs, "stall_ok"),
            med(rs, "stall_busy"), med(rs, "stall_timeouts"), med(rs, "busy_rejects"), med(rs, "window_stalls"),
            med(rs, "credit_stalls")))
    ok = bw >= 0.9 and p99 <= 2.0
    print("\nB keeps %.0f %% of its goodput (want >= 90 %%), P99 x%.2f (want <= 2): %s" % (100 * bw, p99, "PASS" if ok else "FAIL"))
    sys.exit(0 if ok else 3)
EOF
