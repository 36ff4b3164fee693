#!/usr/bin/env bash
# tests/perf/remote-rpc-ab.sh [--build DIR] --old FERRYD [--sizes "4K 64K"] [--rounds R]
#                             [--iters N] [--concurrency C]
#
# Two ferryd binaries against each other on the path between two daemons:
# `ferry-bench remote-rpc` (client on daemon A, echo server on daemon B,
# tcp lanes over loopback) with this build's ferryd and with FERRYD, the
# arms taking turns each round (the order alternating), so both meet the
# same machine. Per arm, size and round: calls per second, CPU µs per call
# (client, server and both daemons), and what perf counts in the two
# daemons per call: recvfrom system calls and page faults. Then the median
# of each per arm and size. ferry-bench is this build's for both arms (the
# protocol between client and daemon is the same). Needs perf.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
old=""
sizes="4K 32K 64K 256K"
rounds=5 iters=3000 concurrency=8
usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift ;;
    --old) old=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --iters) iters=$2; shift ;;
    --concurrency) concurrency=$2; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "remote-rpc-ab: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[[ -x $old ]] || { echo "remote-rpc-ab: --old FERRYD (an executable ferryd) is required" >&2; exit 2; }
command -v perf >/dev/null || { echo "remote-rpc-ab: perf is required (apt-get install linux-perf)" >&2; exit 2; }
bench=$build/tests/perf/ferry-bench
new=$build/daemon/ferryd
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
work=$(mktemp -d /tmp/remote-rpc-ab.XXXXXX)
trap 'ferry_stop_daemons; rm -rf "$work"' EXIT

arm() {  # arm NAME FERRYD ROUND: both daemons up, every size once, both down
  local name=$1 ferryd=$2 round=$3 run pa pb pida pidb s out
  run=$work/$name-$round
  pa=$(ferry_free_port)
  pb=$(ferry_free_port)
  ferry_start_daemon "$ferryd" "$run/a" --transport tcp --listen "127.0.0.1:$pa"
  pida=$ferry_daemon_pid
  ferry_start_daemon "$ferryd" "$run/b" --transport tcp --listen "127.0.0.1:$pb"
  pidb=$ferry_daemon_pid
  for s in $sizes; do
    perf stat -x, -e syscalls:sys_enter_recvfrom,page-faults -p "$pida,$pidb" -o "$run/perf-$s.txt" &
    local perf_pid=$!
    sleep 0.3  # perf attached
    out=$("$bench" remote-rpc --size "$s" --iters "$iters" --concurrency "$concurrency" \
      --socket "$run/a/ferryd.sock" --server-socket "$run/b/ferryd.sock" --target "127.0.0.1:$pb" --json | tail -n 1)
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    echo "$name $s $out" >>"$work/results"
    echo "$name $s perf $(tr '\n' ';' <"$run/perf-$s.txt")" >>"$work/results"
  done
  ferry_stop_daemons
}

for ((r = 1; r <= rounds; ++r)); do
  if ((r % 2)); then
    arm old "$old" "$r"
    arm new "$new" "$r"
  else
    arm new "$new" "$r"
    arm old "$old" "$r"
  fi
done

/usr/bin/python3 - "$work/results" <<'PY'
import json, statistics, sys
rows = {}
lines = open(sys.argv[1]).read().splitlines()
for line in lines:
    name, size, rest = line.split(" ", 2)
    if rest.startswith("perf "):
        counts = {}
        for field in rest[5:].split(";"):
            f = field.split(",")
            if len(f) > 3 and f[0][:1].isdigit():
                counts[f[2]] = float(f[0])
        row = rows[(name, size)][-1]
        row["recvfrom"] = counts.get("syscalls:sys_enter_recvfrom", 0) / row["ops"]
        row["faults"] = counts.get("page-faults", 0) / row["ops"]
    else:
        d = json.loads(rest)
        rows.setdefault((name, size), []).append({"ops": d["ops"], "ops_per_s": d["ops_per_s"], "cpu": d["cpu_us_per_op"]})
print("arm size round calls/s cpu_us/call recvfrom/call faults/call")
for (name, size), runs in rows.items():
    for i, x in enumerate(runs, 1):
        print(f"{name} {size} {i} {x['ops_per_s']:.0f} {x['cpu']:.1f} {x['recvfrom']:.2f} {x['faults']:.2f}")
print("medians: arm size calls/s cpu_us/call recvfrom/call")
for size in dict.fromkeys(size for _, size in rows):
    for name in ("old", "new"):
        runs = rows[(name, size)]
        m = lambda k: statistics.median(x[k] for x in runs)
        print(f"{name} {size} {m('ops_per_s'):.0f} {m('cpu'):.1f} {m('recvfrom'):.2f}")
PY
