#!/usr/bin/env bash
# What an idle peer channel costs one daemon, on loopback tcp: a receiver
# ferryd and N sender ferryd on 127.0.0.1; one incast call from every
# sender opens N channels to the receiver, then they sit idle. Prints the
# receiver's VmRSS before and after, the figure per idle peer, and the
# mappings that grew most (/proc/PID/smaps). The rdma figures (registered
# receive memory, QPs) come from tests/rdma/scale-memory.sh in the VM.
#
#   tests/perf/idle-peer-memory.sh [--build DIR] [--peers N] [-- FERRYD_ARGS...]
set -uo pipefail
build=build peers=24
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [--build DIR] [--peers N] [-- FERRYD_ARGS...]" >&2; exit 2 ;;
  esac
done
ferryd=$build/daemon/ferryd ctl=$build/control/ferryctl bench=$build/tests/perf/ferry-bench
for b in "$ferryd" "$ctl" "$bench"; do [[ -x $b ]] || { echo "missing $b (build first)" >&2; exit 2; }; done
run=$(mktemp -d "${TMPDIR:-/tmp}/idle-peers.XXXXXX")
# shellcheck source=../../scripts/lib/daemons.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/daemons.sh"
cleanup() {
  ferry_stop_daemons
  rm -rf "$run"
}
trap cleanup EXIT
base=$((20000 + RANDOM % 20000))
common=(--transport tcp --heartbeat-ms 1000 --peer-timeout-ms 30000 --log-level warn)
start() { # start NAME PORT [ARGS...]
  local name=$1 port=$2
  shift 2
  ferry_start_daemon --wait 15 --log "$run/$name.log" "$ferryd" "$run/$name" --listen "127.0.0.1:$port" \
    "${common[@]}" "$@" || exit 1
  echo "$ferry_daemon_pid" >"$run/$name.pid"
}
incast() { # incast SENDERS SOCKETS
  "$bench" incast --size 64 --iters "$1" --senders "$1" --socket "$2" --server-socket "$run/r/ferryd.sock" \
    --target "127.0.0.1:$base" --json >"$run/incast.json" 2>&1 || { echo "incast failed:" >&2; tail -3 "$run/incast.json" >&2; exit 1; }
}
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

start r "$base" "$@"
rpid=$(cat "$run/r.pid")
socks=""
for i in $(seq 1 "$peers"); do
  start "s$i" $((base + i)) "$@"
  socks+="${socks:+,}$run/s$i/ferryd.sock"
done
incast 1 "$run/s1/ferryd.sock"  # one peer first: the receiver's one-time costs (the server's attach) before the baseline
sleep 1
cp "/proc/$rpid/smaps" "$run/smaps.before"
before=$(rss "$rpid")
incast "$peers" "$socks"
sleep 2
cp "/proc/$rpid/smaps" "$run/smaps.after"
after=$(rss "$rpid")
channels=$("$ctl" --control "$run/r/control.sock" status --json | /usr/bin/python3 -c \
  'import json,sys; s=json.load(sys.stdin); print(sum(1 for p in s.get("peers", []) if p.get("state") == "Up"))')
echo "peers $peers"
echo "receiver_channels_up $channels"
echo "receiver_rss_kib_before $before"
echo "receiver_rss_kib_after $after"
echo "receiver_rss_kib_per_idle_peer $(((after - before) / (peers - 1)))"
/usr/bin/python3 - "$run/smaps.before" "$run/smaps.after" <<'PY'
import re, sys
def rss_by_mapping(path):
    out, cur = {}, None
    for line in open(path):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            f = line.split(None, 5)
            cur = (f[5].strip() if len(f) > 5 else "[anon]") + " @" + f[0].split("-")[0]
        elif line.startswith("Rss:"):
            out[cur] = out.get(cur, 0) + int(line.split()[1])
    return out
a, b = rss_by_mapping(sys.argv[1]), rss_by_mapping(sys.argv[2])
grew = sorted(((b.get(k, 0) - a.get(k, 0), k) for k in set(a) | set(b)), reverse=True)
for kib, name in grew[:5]:
    if kib > 0:
        print(f"grew_kib {kib} {name}")
PY
