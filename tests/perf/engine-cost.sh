#!/usr/bin/env bash
# tests/perf/engine-cost.sh [--build DIR] --old DIR [--rounds R] [--runs N] [--concurrency C] [--out DIR]
#
# What one message costs one engine, this build against an older one, in
# one run (interleaved, so both meet the same machine):
#   - instructions per forwarded message: tests/perf/callgrind-engine.sh
#     (64 B ipc-echo through a ferryd under callgrind; the least runs of R
#     rounds in one daemon), for each build, R rounds each;
#   - messages per second one engine forwards at saturation: one busy-
#     polling client with C messages in flight (ferry-bench ipc-echo
#     --busy-poll --concurrency C, 64 B) against a ferryd with one engine
#     on the other core, N runs per build, median.
# --old DIR: a build of the older tree (its ferry-bench must have ipc-echo
# --concurrency). Prints a table; keeps the raw output in --out.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
old=""
rounds=3 runs=5 concurrency=32 iters=400000
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift ;;
    --old) old=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --runs) runs=$2; shift ;;
    --concurrency) concurrency=$2; shift ;;
    --iters) iters=$2; shift ;;
    --out) out=$2; shift ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "engine-cost: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $old ]] || { echo "engine-cost: --old DIR is required" >&2; exit 2; }
# shellcheck source=../../scripts/lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
out=${out:-$(mktemp -d /tmp/ferry-engine-cost.XXXXXX)}
mkdir -p "$out"
run=$(mktemp -d /tmp/ferry-ec-run.XXXXXX)
trap 'ferry_stop_daemons; rm -rf "$run"' EXIT

echo "engine-cost: $(date -u +%F), new $build, old $old"
for label in new old; do
  b=$build
  [[ $label == old ]] && b=$old
  "$repo/tests/perf/callgrind-engine.sh" --build "$b" --rounds "$rounds" --out "$out/callgrind-$label" \
    >"$out/callgrind-$label.txt" 2>&1
  grep '^round\|^instructions/message' "$out/callgrind-$label.txt" | sed "s/^/$label: /"
done

for ((i = 1; i <= runs; i++)); do
  for label in new old; do
    b=$build
    [[ $label == old ]] && b=$old
    ferry_start_daemon "$b/daemon/ferryd" "$run/$label" --transport tcp
    "$b/tests/perf/ferry-bench" ipc-echo --socket "$run/$label/ferryd.sock" --busy-poll \
      --concurrency "$concurrency" --iters "$iters" --json | tail -1 >>"$out/saturation-$label.jsonl"
    ferry_stop_daemons
    rm -rf "${run:?}/$label"
  done
done

python3 - "$out" <<'PY'
import json, re, statistics, sys
out = sys.argv[1]
def ir(label):
    t = open(f"{out}/callgrind-{label}.txt").read()
    m = re.search(r"instructions/message (\d+) \(least runs of \d+ rounds; median (\d+)\)", t)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)
def sat(label):
    rows = [json.loads(l) for l in open(f"{out}/saturation-{label}.jsonl")]
    return [r["ops_per_s"] for r in rows], [r["cpu_us_per_op"] for r in rows]
n_ir, o_ir = ir("new"), ir("old")
n_ops, n_cpu = sat("new")
o_ops, o_cpu = sat("old")
print()
print("| | instructions/message (least runs; median) | msgs/s at saturation (median) | daemon+client CPU us/msg (median) |")
print("|---|---:|---:|---:|")
print(f"| old | {o_ir[0]}; {o_ir[1]} | {statistics.median(o_ops):,.0f} | {statistics.median(o_cpu):.2f} |")
print(f"| new | {n_ir[0]}; {n_ir[1]} | {statistics.median(n_ops):,.0f} | {statistics.median(n_cpu):.2f} |")
if o_ir[0] and n_ir[0]:
    print(f"| new/old | {n_ir[0]/o_ir[0]:.2f} | {statistics.median(n_ops)/statistics.median(o_ops):.2f} | "
          f"{statistics.median(n_cpu)/statistics.median(o_cpu):.2f} |")
print("runs (msgs/s): new", [round(x) for x in n_ops], "old", [round(x) for x in o_ops])
PY
echo "engine-cost: raw output in $out"
