#!/usr/bin/env bash
# scripts/ps-head-to-head.sh [--local|--netns] [--small] [--python|--train] [--rounds R]
#                            [--workers N] [--shards M] [--keys K] [--dim D] [--iters I] [--batch B]
#                            [--epochs E] [--prefetch P] [--build DIR] [--out DIR]
#
# The parameter-server head-to-heads.
#
# Default: `ferry-ps bench` with N worker processes x M shard
# processes, once through ferry and once over per-process kernel TCP, then a
# table (pull/push mean, P50, P99, P999, ops/s, CPU us per op over every
# process incl. daemons, RSS) with the ratio ferry/tcp, and a latency CDF
# plot (PNG, gnuplot) of both, pull and push.
#
# --python: the same workload shape R times (default 3), each
# round running, back to back, `ferry-ps bench` (C++), the Python bench
# through ferry (python3 -m ferry.ps.bench) and the Python bench against the
# torch.distributed.rpc parameter server (--baseline torch-rpc); then the
# medians and the ratios ferry/torch-rpc and Python/C++.
#
# --train: the DLRM-style training (examples/python/train.py
# --compare): through ferry, then through torch.distributed.rpc, then with
# the tables local in the workers (no parameter server: the compute
# ceiling), the same data and model; loss per epoch, held-out AUC,
# samples/s, CPU per sample (split into model compute and communication),
# and the loss-curve PNG. --prefetch P: batches whose pulls are in flight
# while one computes (default 1).
#
#   --local  everything on loopback (default): one ferryd for the default
#            mode; two ferryds (workers on A, shards on B, joined over TCP
#            loopback) for --python and --train
#   --netns  two network namespaces joined by a veth pair (198.18.1.1 and
#            198.18.1.2), a ferryd in each with --listen on its address,
#            workers on A, shards on B (torch-rpc processes run inside the
#            namespaces); needs root. Namespaces are removed on exit.
#   --small  a preset that finishes in well under a minute (scripts/demo).
# Environment: FERRYD_TRANSPORT (default tcp) is the daemons' --transport;
# FERRYD_ARGS, more ferryd flags (split on spaces), e.g. "--engine-spin-inflight-us 0";
# FERRY_RPC_THREADS, torch.distributed.rpc's num_worker_threads (default 8).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=local
job=cpp
workers=4 shards=2 keys=1000000 dim=64 iters=2000 batch=512 warmup=50
rounds=3 epochs=3 prefetch=1
small=0
explicit_workers=0 explicit_keys=0 explicit_iters=0
build="$repo/build"
out=""
python=/usr/bin/python3

while [[ $# -gt 0 ]]; do
  case "$1" in
    --local) mode=local ;;
    --netns) mode=netns ;;
    --small) small=1 ;;
    --python) job=python ;;
    --train) job=train ;;
    --rounds) rounds=$2; shift ;;
    --epochs) epochs=$2; shift ;;
    --prefetch) prefetch=$2; shift ;;
    --workers) workers=$2; explicit_workers=1; shift ;;
    --shards) shards=$2; shift ;;
    --keys) keys=$2; explicit_keys=1; shift ;;
    --dim) dim=$2; shift ;;
    --iters) iters=$2; explicit_iters=1; shift ;;
    --batch) batch=$2; shift ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "ps-head-to-head: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# Presets: --small (the demo's), and for --python, unless given, the shape
# its Python-against-torch.distributed.rpc targets are stated for (2 workers
# x 2 shards, 100,000 keys).
if [[ $small -eq 1 ]]; then
  ((explicit_workers)) || workers=2
  shards=2 dim=64 warmup=20
  ((explicit_keys)) || keys=100000
  ((explicit_iters)) || iters=300
  rounds=1 epochs=2
elif [[ $job == python ]]; then
  ((explicit_workers)) || workers=2
  ((explicit_keys)) || keys=100000
  ((explicit_iters)) || iters=1000
fi

ps="$build/client/examples/ps/ferry-ps"
ferryd="$build/daemon/ferryd"
for bin in "$ps" "$ferryd"; do
  [[ -x "$bin" ]] || { echo "ps-head-to-head: $bin is missing: build first (ninja -C $build)" >&2; exit 1; }
done
if [[ $job != cpp ]]; then
  if ! compgen -G "$build/client/python/ferry/_ferry*.so" >/dev/null; then
    echo "ps-head-to-head: the ferry Python package is not built in $build (pybind11-dev and python3-dev?)" >&2
    exit 1
  fi
  export PYTHONPATH="$build/client/python${PYTHONPATH:+:$PYTHONPATH}"
fi
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
# shellcheck source=lib/daemons.sh
source "$repo/scripts/lib/daemons.sh"
# shellcheck source=lib/net.sh
source "$repo/scripts/lib/net.sh"

cleanup() {
  ferry_stop_daemons
  if [[ $mode == netns ]]; then
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
    rm -rf "/etc/netns/$ns_a" "/etc/netns/$ns_b"
  fi
}
trap cleanup EXIT

# ps_ferryd DIR [NETNS LISTEN]: a ferryd of this run in DIR, up when this returns.
ps_ferryd() {
  local dir=$1 ns=${2:-} listen=${3:-}
  # shellcheck disable=SC2086 # FERRYD_ARGS is words on purpose
  ferry_start_daemon ${ns:+--netns "$ns"} "$ferryd" "$dir" --transport "${FERRYD_TRANSPORT:-tcp}" ${FERRYD_ARGS:-} \
    ${listen:+--listen "$listen"} || exit 1
}

common=(--workers "$workers" --shards "$shards" --keys "$keys" --dim "$dim" --iters "$iters"
        --batch "$batch" --warmup "$warmup" --json)

if [[ $mode == local && $job == cpp ]]; then
  ps_ferryd "$out/ferryd"
  ferry_args=(--socket "$out/ferryd/ferryd.sock")
  tcp_args=(--target 127.0.0.1)
  where="one ferryd, loopback"
elif [[ $mode == local ]]; then
  port_a=$(ferry_free_port) port_b=$(ferry_free_port)
  ps_ferryd "$out/ferryd-a" "" "127.0.0.1:$port_a"
  ps_ferryd "$out/ferryd-b" "" "127.0.0.1:$port_b"
  ferry_args=(--socket "$out/ferryd-a/ferryd.sock" --server-socket "$out/ferryd-b/ferryd.sock"
              --target "127.0.0.1:$port_b")
  rpc_args=(--target 127.0.0.1)
  netns_args=()
  where="two ferryds on loopback (workers on A, shards on B)"
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
  # `ip netns exec` mounts /etc/netns/NS/hosts over /etc/hosts: this host's
  # name resolves to the namespace's own address there (torch.distributed's
  # gloo rendezvous binds to what the host name resolves to).
  for pair in "$ns_a 198.18.1.1" "$ns_b 198.18.1.2"; do
    set -- $pair
    mkdir -p "/etc/netns/$1"
    printf '127.0.0.1 localhost\n%s %s\n' "$2" "$(hostname)" >"/etc/netns/$1/hosts"
  done
  # Nothing is sent before the route from A to B is proven to be the veth.
  ferry_check_route --netns "$ns_a" "$veth_a" 198.18.1.2 || exit 1
  echo "route check: $(ip -n "$ns_a" route get 198.18.1.2)"
  ps_ferryd "$out/ferryd-a" "$ns_a" 198.18.1.1:7470
  ps_ferryd "$out/ferryd-b" "$ns_b" 198.18.1.2:7470
  ferry_args=(--socket "$out/ferryd-a/ferryd.sock" --server-socket "$out/ferryd-b/ferryd.sock"
              --target 198.18.1.2:7470)
  tcp_args=(--target 198.18.1.2 --worker-netns "$ns_a" --shard-netns "$ns_b")
  rpc_args=(--target 198.18.1.2 --worker-netns "$ns_a" --shard-netns "$ns_b")
  netns_args=(--worker-netns "$ns_a" --shard-netns "$ns_b")
  where="two namespaces over veth 198.18.1.1 -> 198.18.1.2"
fi

if [[ $job == train ]]; then
  echo "== DLRM-style training ($where): ferry.ps vs torch.distributed.rpc vs local tables, same data, model and run"
  "$python" "$build/examples/python/train.py" --compare --workers "$workers" --shards "$shards" --epochs "$epochs" --prefetch "$prefetch" \
    "${ferry_args[@]}" "${netns_args[@]}" \
    --out "$out/train" --plot "$out/loss-curve.png" --json >"$out/train.out" 2>"$out/train.err" || {
      cat "$out/train.out" "$out/train.err" >&2; exit 1; }
  grep -v '^{' "$out/train.out"
  tail -n 1 "$out/train.out" >"$out/train.json"
  echo "results: $out (train.json, per-process logs under train/)"
  exit 0
fi

if [[ $job == python ]]; then
  shape=(--workers "$workers" --shards "$shards" --keys "$keys" --dim "$dim" --iters "$iters" --batch "$batch")
  echo "== parameter-server bench ($where): $workers workers x $shards shards, $keys keys, batch $batch, dim $dim, $iters iters, $rounds rounds"
  for ((r = 1; r <= rounds; r++)); do
    echo "-- round $r: ferry-ps bench (C++)"
    "$ps" bench --transport ferry "${shape[@]}" --warmup "$warmup" "${ferry_args[@]}" --json \
      >"$out/cpp-$r.out" 2>"$out/cpp-$r.err" || { cat "$out/cpp-$r.out" "$out/cpp-$r.err" >&2; exit 1; }
    tail -n 1 "$out/cpp-$r.out" >"$out/cpp-$r.json"
    echo "-- round $r: python3 -m ferry.ps.bench (ferry)"
    "$python" -m ferry.ps.bench "${shape[@]}" --warmup "$warmup" "${ferry_args[@]}" --out "$out/py-$r" --json \
      >"$out/py-$r.out" 2>"$out/py-$r.err" || { cat "$out/py-$r.out" "$out/py-$r.err" >&2; exit 1; }
    tail -n 1 "$out/py-$r.out" >"$out/py-$r.json"
    echo "-- round $r: python3 -m ferry.ps.bench --baseline torch-rpc"
    "$python" -m ferry.ps.bench "${shape[@]}" --warmup "$warmup" --baseline torch-rpc "${rpc_args[@]}" \
      --out "$out/rpc-$r" --json >"$out/rpc-$r.out" 2>"$out/rpc-$r.err" || {
        cat "$out/rpc-$r.out" "$out/rpc-$r.err" >&2; exit 1; }
    tail -n 1 "$out/rpc-$r.out" >"$out/rpc-$r.json"
  done
  "$python" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {k: [json.load(open("%s/%s-%d.json" % (out, k, r))) for r in range(1, rounds + 1)] for k in ("cpp", "py", "rpc")}
def med(k, key):
    return statistics.median(float(x[key]) for x in runs[k])
for x in runs["cpp"]:  # ferry-ps bench reports per op; a sample is one key of a batch
    x["samples_per_s"] = x["pulls"] * x["batch"] / x["wall_s"]
    x["cpu_us_per_sample"] = x["cpu_total_us"] / (x["pulls"] * x["batch"])
rows = [("pull mean us", "pull_mean_us"), ("pull p50 us", "pull_p50_us"), ("pull p99 us", "pull_p99_us"),
        ("push mean us", "push_mean_us"), ("push p50 us", "push_p50_us"), ("push p99 us", "push_p99_us"),
        ("ops/s", "ops_per_s"), ("samples/s", "samples_per_s"), ("cpu us/op", "cpu_us_per_op"),
        ("cpu us/sample", "cpu_us_per_sample")]
print()
print("medians of %d rounds" % rounds)
print("%-14s %12s %12s %12s %12s %12s" % ("metric", "ferry-ps C++", "ferry.ps py", "torch-rpc", "py/rpc", "py/C++"))
summary = {}
for name, key in rows:
    c, p, r = med("cpp", key), med("py", key), med("rpc", key)
    summary[key] = {"cpp": c, "python": p, "torch_rpc": r}
    print("%-14s %12.1f %12.1f %12.1f %12.3f %12.3f" % (name, c, p, r, p / r if r else float("nan"),
                                                        p / c if c else float("nan")))
json.dump({"rounds": rounds, "medians": summary, "runs": runs}, open(out + "/python-head-to-head.json", "w"))
print()
print("targets: pull p99 py/rpc <= 0.2: %.3f; samples/s py/rpc >= 4: %.2f; cpu/sample py/rpc <= 0.3: %.3f;"
      " python within 1.5x of C++ (pull mean py/C++): %.2f" % (
          summary["pull_p99_us"]["python"] / summary["pull_p99_us"]["torch_rpc"],
          summary["samples_per_s"]["python"] / summary["samples_per_s"]["torch_rpc"],
          summary["cpu_us_per_sample"]["python"] / summary["cpu_us_per_sample"]["torch_rpc"],
          summary["pull_mean_us"]["python"] / summary["pull_mean_us"]["cpp"]))
PY
  echo "results: $out (python-head-to-head.json, per-run JSON and logs)"
  exit 0
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
