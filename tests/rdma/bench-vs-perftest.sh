#!/usr/bin/env bash
# bench-vs-perftest.sh: inside the Soft-RoCE VM (run it as a checks line
# through run-vm-suite.sh --checks, e.g. tests/rdma/bench.list), compares
# ferry's remote-rpc over rdma lanes with perftest on the same rxe devices
# and with kernel TCP between the same two addresses, all in the same run.
# Emulation makes absolute times meaningless (Soft-RoCE under TCG): the summary gives
# ratios (the raw medians are printed too, for the record).
#   ferry-bench remote-rpc: client on daemon A (ADDR0/rxe0) -> echo server on
#   daemon B (ADDR1/rxe1), one call outstanding, SIZE bytes each way; two
#   modes: "default" (ferryd's default engine spin, the client sleeps on its
#   completions) and "busy" (ferryd --engine-spin-us BENCH_SPIN_US, client
#   and server --busy-poll); optional "arena": as default, but ferryd
#   --rdma-windows 0 (one key per client tx arena instead of a memory window
#   per exposed buffer per call: what the windows cost); optional
#   "busy-arena": busy with --rdma-windows 0.
#   ferry-bench tcp-rpc: client (source ADDR0, forced across veth0) ->
#   `ferry-bench tcp-server` on ADDR1, blocking I/O, TCP_NODELAY.
#   ferry-bench local-rpc (each mode, on daemon A alone) and uds-rpc: the
#   process hops of a call without the wire, and the machine's cost of one
#   kernel-mediated round trip between two processes.
#   ib_send_lat / ib_write_lat: rxe1 -> rxe0, SIZE bytes, one-way latency
#   (half a ping-pong), so an RPC round trip is compared with 2x that.
# Every measurement is repeated BENCH_REPEATS times, interleaved (each repeat
# runs every tool once per size), and the median of the repeats is used.
# Environment: BENCH_SIZES (default "64 4096 65536 1048576"; BENCH_SIZE, one
# size, still works), BENCH_ITERS (per size up to 4 KiB; 64 KiB gets 1/4,
# 1 MiB 1/20), BENCH_REPEATS (3), BENCH_MODES ("default busy"),
# BENCH_SPIN_US (2000: at 100000, four spinning processes on the VM's 2 vCPUs
# starved the channel handshake, which timed out again and again).
set -euo pipefail
sizes=${BENCH_SIZES:-${BENCH_SIZE:-64 4096 65536 1048576}}
iters_base=${BENCH_ITERS:-2000} repeats=${BENCH_REPEATS:-3}
modes=${BENCH_MODES:-default busy} spin_us=${BENCH_SPIN_US:-2000}
build=${FERRY_BUILD:?}
dir=${FERRY_CHECK_DIR:-$(mktemp -d)}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-bench-XXXXXX") # sockets: not on the 9p results share
bench=$build/tests/perf/ferry-bench
port=7610 tcp_port=7620
results=$dir/results.tsv # repeat tool size typical_us min_us (ferry/tcp-rpc: p50 and min round trip; perftest: t_typical and t_min one-way)
: >"$results"
pids=() failures=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip rule del pref 99 2>/dev/null || true
}
trap cleanup EXIT

iters_for() { # iters_for SIZE
  if (($1 >= 1048576)); then echo $((iters_base / 20 > 20 ? iters_base / 20 : 20))
  elif (($1 >= 65536)); then echo $((iters_base / 4 > 50 ? iters_base / 4 : 50))
  else echo "$iters_base"; fi
}
p50() { tail -n1 "$1" | python3 -c 'import json,sys; j = json.load(sys.stdin); print(j["p50_us"], j["min_us"], sep="\t")'; }

echo "VM: nproc $(nproc), $(grep -c ^processor /proc/cpuinfo) processors in /proc/cpuinfo"
echo "sizes: $sizes; repeats: $repeats; modes: $modes; busy: ferryd --engine-spin-us $spin_us + --busy-poll"

# --- ferry remote-rpc over rdma ---------------------------------------------
start_daemons() { # start_daemons TAG SPIN_US (empty: ferryd's default) [FLAG...]
  local name addr spin=() tag=$1
  [[ -n "$2" ]] && spin=(--engine-spin-us "$2")
  shift 2
  spin+=("$@")
  for name in a b; do
    [[ $name == a ]] && addr=$ADDR0 || addr=$ADDR1
    rm -rf "${run:?}/$name" && mkdir -p "$run/$name"
    "$build/daemon/ferryd" --runtime-dir "$run/$name" --listen "$addr:$port" --transport rdma --rdma-ack-timeout 18 \
      --connect-timeout-ms 20000 --peer-timeout-ms 10000 --channel-conns 1 "${spin[@]}" >"$dir/$tag-$name.log" 2>&1 &
    daemons+=($!)
    pids+=($!)
  done
  local deadline=$((SECONDS + 20))
  until [[ -S $run/a/ferryd.sock && -S $run/b/ferryd.sock ]]; do
    ((SECONDS < deadline)) || { cat "$dir/$tag"-*.log; echo "daemons did not come up" >&2; return 1; }
    sleep 0.1
  done
}
stop_daemons() {
  local p
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${daemons[@]}"; do wait "$p" 2>/dev/null || true; done
  daemons=()
}

ferry_round() { # ferry_round REPEAT MODE
  local flags=() spin= size out ok attempt extra=()
  [[ $2 == busy || $2 == busy-arena ]] && { flags=(--busy-poll); spin=$spin_us; }
  [[ $2 == arena || $2 == busy-arena ]] && extra=(--rdma-windows 0)
  daemons=()
  start_daemons "r$1-$2" "$spin" "${extra[@]}" || { failures=$((failures + 1)); stop_daemons; return 0; }
  for size in $sizes; do
    out=$dir/r$1-ferry-$2-$size.out ok=0
    # The first open also brings the channel up (rdma_cm under emulation may
    # take seconds when a CM MAD is lost): a failed first try is retried.
    for attempt in 1 2 3; do
      if "$bench" remote-rpc --size "$size" --iters "$(iters_for "$size")" "${flags[@]}" --socket "$run/a/ferryd.sock" \
        --server-socket "$run/b/ferryd.sock" --target "$ADDR1:$port" --json >"$out" 2>&1; then
        ok=1 && break
      fi
      echo "ferry $2 size $size repeat $1: attempt $attempt failed: $(tail -n1 "$out")" >&2
    done
    if ((ok)); then
      printf '%s\tferry-%s\t%s\t%s\n' "$1" "$2" "$size" "$(p50 "$out")" >>"$results"
    else
      failures=$((failures + 1))
    fi
    # The same call through daemon A alone (client -> daemon -> server ->
    # daemon -> client): the process hops of a remote call without the wire.
    out=$dir/r$1-local-$2-$size.out
    if "$bench" local-rpc --size "$size" --iters "$(iters_for "$size")" "${flags[@]}" --socket "$run/a/ferryd.sock" \
      --json >"$out" 2>&1; then
      printf '%s\tlocal-%s\t%s\t%s\n' "$1" "$2" "$size" "$(p50 "$out")" >>"$results"
    else
      echo "local-rpc $2 size $size repeat $1 failed: $(tail -n1 "$out")" >&2
      failures=$((failures + 1))
    fi
  done
  grep -q "data lanes on $RXE0" "$dir/r$1-$2-a.log" || { echo "daemon A is not on rdma" >&2; failures=$((failures + 1)); }
  stop_daemons
}

# --- tcp-rpc between the same two addresses ---------------------------------
# The guest owns both addresses, so without a rule the kernel would route
# ADDR0 -> ADDR1 through lo; like rxe-net.sh's rules for rxe, this one sends
# the benchmark's TCP connection out of veth0 (source ADDR0) into veth1.
ip rule add pref 99 to "$ADDR1" ipproto tcp dport "$tcp_port" lookup 101
route=$(ip route get "$ADDR1" ipproto tcp dport "$tcp_port")
[[ "$route" == *" dev veth0 "* ]] || { echo "tcp-rpc route does not use veth0: $route" >&2; exit 1; }
"$bench" tcp-server --listen "$ADDR1:$tcp_port" >"$dir/tcp-server.log" 2>&1 &
pids+=($!)
deadline=$((SECONDS + 20))
until ss -ltn "sport = :$tcp_port" | grep -q LISTEN; do
  ((SECONDS < deadline)) || { echo "tcp-server did not listen" >&2; exit 1; }
  sleep 0.1
done

tcp_round() { # tcp_round REPEAT
  local size out tx0 tx1
  for size in $sizes; do
    out=$dir/r$1-tcp-$size.out
    tx0=$(cat /sys/class/net/veth0/statistics/tx_packets)
    if "$bench" tcp-rpc --size "$size" --iters "$(iters_for "$size")" --target "$ADDR1:$tcp_port" --json >"$out" 2>&1; then
      tx1=$(cat /sys/class/net/veth0/statistics/tx_packets)
      # Proof that the calls crossed the veth pair, not lo.
      if ((tx1 - tx0 < $(iters_for "$size"))); then
        echo "tcp-rpc size $size: only $((tx1 - tx0)) packets left veth0" >&2
        failures=$((failures + 1))
      else
        printf '%s\ttcp-rpc\t%s\t%s\n' "$1" "$size" "$(p50 "$out")" >>"$results"
      fi
    else
      echo "tcp-rpc size $size repeat $1 failed: $(tail -n1 "$out")" >&2
      failures=$((failures + 1))
    fi
  done
}

# --- uds-rpc: the machine's floor for one process-to-process round trip ---
uds_round() { # uds_round REPEAT
  local size out
  for size in $sizes; do
    out=$dir/r$1-uds-$size.out
    if "$bench" uds-rpc --size "$size" --iters "$(iters_for "$size")" --json >"$out" 2>&1; then
      printf '%s\tuds-rpc\t%s\t%s\n' "$1" "$size" "$(p50 "$out")" >>"$results"
    else
      echo "uds-rpc size $size repeat $1 failed: $(tail -n1 "$out")" >&2
      failures=$((failures + 1))
    fi
  done
}

# --- perftest ---------------------------------------------------------------
lat() { # lat TOOL PORT SIZE OUT -> typical one-way usec
  local iters server deadline
  iters=$(iters_for "$3")
  "$1" -d "$RXE0" -x "$GID_INDEX" -s "$3" -n "$iters" -F -p "$2" >"$4.server" 2>&1 &
  server=$!
  deadline=$((SECONDS + 20))
  until ss -ltn "sport = :$2" | grep -q LISTEN; do
    ((SECONDS < deadline)) || { echo "$1 server did not listen" >&2; kill $server; return 1; }
    sleep 0.1
  done
  "$1" -d "$RXE1" -x "$GID_INDEX" -s "$3" -n "$iters" -F -p "$2" "$ADDR0" >"$4" 2>&1 || { kill $server; return 1; }
  wait $server
  # Row: bytes iterations t_min t_max t_typical ...; perftest prints inf when
  # its cycle count went wrong (seen once at 4 KiB): no number, a failure.
  awk -v s="$3" '$1 == s && NF >= 5 && $5 ~ /^[0-9.]+$/ && $3 ~ /^[0-9.]+$/ { print $5 "\t" $3 }' "$4" | tail -n1
}
perftest_round() { # perftest_round REPEAT
  local size tool port v
  for size in $sizes; do
    for tool in ib_send_lat ib_write_lat; do
      [[ $tool == ib_send_lat ]] && port=18525 || port=18526
      if v=$(lat "$tool" "$port" "$size" "$dir/r$1-$tool-$size.out") && [[ -n "$v" ]]; then
        printf '%s\t%s\t%s\t%s\n' "$1" "$tool" "$size" "$v" >>"$results"
      else
        echo "$tool size $size repeat $1 failed" >&2
        failures=$((failures + 1))
      fi
    done
  done
}

for ((r = 1; r <= repeats; r++)); do
  for mode in $modes; do ferry_round "$r" "$mode"; done
  tcp_round "$r"
  uds_round "$r"
  perftest_round "$r"
  echo "repeat $r done at ${SECONDS}s"
done

python3 - "$results" "$sizes" "$modes" <<'PY'
import statistics, sys
rows = [l.split('\t') for l in open(sys.argv[1]).read().splitlines() if l]
sizes, modes = sys.argv[2].split(), sys.argv[3].split()
tools = sorted({r[1] for r in rows})
med = {}  # (tool, size, column) -> (median over repeats, repeats); column 3 typical, 4 min
for tool in tools:
    for s in sizes:
        for col in (3, 4):
            v = [float(r[col]) for r in rows if r[1] == tool and r[2] == s]
            if v:
                med[tool, s, col] = (statistics.median(v), len(v))
def fmt(s):
    n = int(s)
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"
for col, what in ((3, "typical (ferry/tcp-rpc p50 round trip; perftest t_typical one-way)"), (4, "minimum (ferry/tcp-rpc min round trip; perftest t_min one-way)")):
    print(f"medians over repeats of the {what}, emulated us [repeats]:")
    for s in sizes:
        print(f"  {fmt(s)}: " + ", ".join(f"{t} {med[t, s, col][0]:.1f} [{med[t, s, col][1]}]" for t in tools if (t, s, col) in med))
def ratio(a, b, k=1):
    return f"{a[0] / (k * b[0]):.2f}x" if a and b else "n/a"
for col, what in ((3, "typical: p50 / t_typical"), (4, "minimum: min / t_min")):
    print(f"\nratios of the medians, {what}")
    print("| size | mode | ferry / 2x ib_send_lat | ferry / 2x ib_write_lat | ferry / tcp-rpc | tcp-rpc / 2x ib_send_lat |")
    print("|---:|---|---:|---:|---:|---:|")
    for s in sizes:
        send, write, tcp = (med.get((t, s, col)) for t in ("ib_send_lat", "ib_write_lat", "tcp-rpc"))
        for m in modes:
            f = med.get((f"ferry-{m}", s, col))
            print(f"| {fmt(s)} | {m} | {ratio(f, send, 2)} | {ratio(f, write, 2)} | {ratio(f, tcp)} | {ratio(tcp, send, 2)} |")
for col, what in ((3, "typical"), (4, "minimum")):
    print(f"\nprocess hops against the wire, {what}: uds-rpc is one kernel-mediated round trip between two")
    print("processes (blocking Unix socket); local-rpc is ferry's call through daemon A alone, the same four")
    print("ring hops as a remote call without the wire (so remote-rpc cannot beat it); the last column is what")
    print("remote-rpc adds to local-rpc, against perftest's round trip")
    print("| size | mode | uds-rpc / 2x ib_send_lat | local-rpc / 2x ib_send_lat | local-rpc / uds-rpc | (remote-rpc - local-rpc) / 2x ib_send_lat |")
    print("|---:|---|---:|---:|---:|---:|")
    for s in sizes:
        send, uds = med.get(("ib_send_lat", s, col)), med.get(("uds-rpc", s, col))
        for m in modes:
            f, l = med.get((f"ferry-{m}", s, col)), med.get((f"local-{m}", s, col))
            wire = f"{(f[0] - l[0]) / (2 * send[0]):.2f}x" if f and l and send else "n/a"
            print(f"| {fmt(s)} | {m} | {ratio(uds, send, 2)} | {ratio(l, send, 2)} | {ratio(l, uds)} | {wire} |")
PY
echo "failures: $failures"
((failures == 0))
