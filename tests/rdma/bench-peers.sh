# shellcheck shell=bash
# Sourced by bench-vs-perftest.sh inside the Soft-RoCE VM: the software RDMA
# peers on the same two rxe devices as ferry, each client on rxe1 (ADDR1) and
# each server on rxe0 (ADDR0), one round trip outstanding, SIZE bytes each
# way:
#   rstream (librdmacm's rsockets, rdmacm-utils): `rstream -S SIZE -C 1 -I N`,
#     its default non-blocking calls, so both processes spin on the CQ; it
#     prints usec/xfer = half the mean round trip.
#   rstream-wait: the same with `-T b` (blocking calls): rsockets polls the
#     CQ for its polling_time (10 us by default) and then sleeps on the
#     completion channel, as an engine that waits instead of spinning would.
#   fi_pingpong (libfabric-bin, verbs provider, RC "msg" endpoints):
#     `fi_pingpong -p verbs -e msg -S SIZE -I N`; it busy-polls its CQs and
#     prints usec/xfer = half the mean round trip. It has no option for the
#     client's source address: libfabric resolves the server's address with
#     no source, which the guest routes through lo onto rxe0 itself (the
#     client's -d rxe1 then finds no match, and without -d both ends sit on
#     rxe0, never crossing the veth pair). A policy rule for the run sends
#     traffic to ADDR0 with any source out of veth1, so the client resolves
#     to rxe1 with source ADDR1.
# Every run must show its packets on both devices (hw_counters sent_pkts and
# rcvd_pkts of rxe0 and rxe1, at least one per message each way), or it
# counts as failed. CPU: /proc/PID/task/*/schedstat of both tools and every
# process below them, sampled every 20 ms; the rate over the last "time" seconds the tool reports (its
# measured phase) times its mean round trip is its CPU per round trip.
# Results: rows of $results (see bench-vs-perftest.sh).

# shellcheck source=tests/rdma/procs.sh
source "$(dirname "${BASH_SOURCE[0]}")/procs.sh" # tree_pids

# dev_pkts: "rxe0_sent rxe0_rcvd rxe1_sent rxe1_rcvd"
dev_pkts() {
  local d f out=()
  for d in "$RXE0" "$RXE1"; do
    for f in sent_pkts rcvd_pkts; do out+=("$(cat "/sys/class/infiniband/$d/ports/1/hw_counters/$f")"); done
  done
  echo "${out[*]}"
}

# crossed_both BEFORE AFTER MESSAGES: every counter moved by MESSAGES at least.
crossed_both() {
  local -a b=($1) a=($2)
  local i
  for i in 0 1 2 3; do ((a[i] - b[i] >= $3)) || return 1; done
}

# cpu_sampler OUT PID...: "epoch_us cpu_ns" every 20 ms while all PIDs live:
# the CPU of every thread of the PIDs and the processes below them (a sample
# that misses a thread ends it).
cpu_sampler() {
  local out=$1 fd p t c v ok
  shift
  exec {fd}<> <(:)
  : >"$out"
  while :; do
    c=0 ok=1
    for p in $(for r in "$@"; do tree_pids "$r"; done); do
      for t in /proc/"$p"/task/*/schedstat; do
        if read -r v _ 2>/dev/null <"$t"; then c=$((c + v)); else ok=0; fi
      done
    done
    ((ok)) && kill -0 "$@" 2>/dev/null || break
    echo "${EPOCHREALTIME/./} $c" >>"$out"
    read -r -t 0.02 -u "$fd" _ || true
  done
  exec {fd}>&-
}

# cpu_rate SAMPLES SECONDS: CPU seconds per second over the last SECONDS
# before the last sample (empty when the samples do not cover that long).
cpu_rate() {
  awk -v span="$2" '{ t[NR] = $1; c[NR] = $2 } END {
    if (NR < 2) exit
    for (i = NR - 1; i >= 1; i--) if (t[NR] - t[i] >= span * 1e6) break
    if (i < 1 || t[NR] == t[i]) exit
    printf "%.3f", (c[NR] - c[i]) / ((t[NR] - t[i]) * 1000)
  }' "$1"
}

# peer_pair NAME SIZE OUT SERVER_CMD... -- CLIENT_CMD...: runs the server,
# then the client (retried while the server is not yet listening), with the
# CPU sampler on both; prints "mean_rtt_us cpu_per_rtt_us" from the
# client's "usec/xfer" row, or fails.
peer_pair() {
  local name=$1 size=$2 out=$3 srv cli smp= attempt before after us secs rate
  shift 3
  local -a scmd=() ccmd=()
  while [[ $1 != -- ]]; do scmd+=("$1"); shift; done
  shift
  ccmd=("$@")
  before=$(dev_pkts)
  timeout 300 "${scmd[@]}" >"$out.server" 2>&1 &
  srv=$!
  pids+=($srv)
  sleep 0.5
  for attempt in 1 2 3 4 5 6; do
    timeout 300 "${ccmd[@]}" >"$out" 2>&1 &
    cli=$!
    cpu_sampler "$out.cpu" "$srv" "$cli" &
    smp=$!
    wait $cli && break
    kill -0 $srv 2>/dev/null || break
    echo "$name size $size: client attempt $attempt failed: $(tail -n1 "$out")" >&2
    sleep 1
  done
  # fi_pingpong's server now and then hangs after printing its results
  # (in its shutdown): 30 s after the client it is stopped, and the round
  # trips the client measured still count.
  local deadline=$((SECONDS + 30))
  while kill -0 $srv 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 $srv 2>/dev/null; then
    echo "$name size $size: server still running 30 s after its client; stopped" >&2
    kill $srv 2>/dev/null || true
  fi
  wait $srv || echo "$name size $size: server ended with status $?: $(tail -n1 "$out.server")" >&2
  wait "$smp" 2>/dev/null || true
  after=$(dev_pkts)
  # Rows: rstream "custom SIZE 1 ITERS TOTAL TIMEs Gb/sec usec/xfer";
  # fi_pingpong "SIZE SENT =ACK TOTAL TIMEs MB/sec usec/xfer Mxfers/sec".
  read -r secs us < <(awk '/usec\/xfer/ { hdr = 1; next } hdr && NF >= 7 {
      for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+s$/) { sub(/s$/, "", $i); t = $i; u = $(i + 2) }
    } END { if (t != "") print t, u }' "$out")
  [[ -n "$us" ]] || { echo "$name size $size: no result row: $(tail -n2 "$out")" >&2; return 1; }
  if ! crossed_both "$before" "$after" "$(peer_iters "$size")"; then
    echo "$name size $size: packets did not cross both devices (rxe0 sent/rcvd, rxe1 sent/rcvd: $before -> $after)" >&2
    return 1
  fi
  rate=$(cpu_rate "$out.cpu" "$secs")
  awk -v u="$us" -v r="$rate" 'BEGIN { if (r == "") printf "%.1f\t\n", 2 * u; else printf "%.1f\t%.1f\n", 2 * u, 2 * u * r }'
}

# Up to 4 KiB the peers take twice ferry's calls, so that their measured
# phase (a fraction of ferry's) is long enough for the CPU samples.
peer_iters() { (($1 > 4096)) && iters_for "$1" || echo $((2 * $(iters_for "$1"))); }

rstream_run() { # rstream_run REPEAT SIZE VARIANT(spin|wait) PORT
  local tool=rstream flags=() v
  [[ $3 == wait ]] && { tool=rstream-wait; flags=(-T b); }
  local n out=$dir/r$1-$tool-$2.out
  n=$(peer_iters "$2")
  if v=$(peer_pair "$tool" "$2" "$out" rstream -b "$ADDR0" -p "$4" -S "$2" -C 1 -I "$n" "${flags[@]}" -- \
    rstream -s "$ADDR0" -b "$ADDR1" -p "$4" -S "$2" -C 1 -I "$n" "${flags[@]}"); then
    IFS=$'\t' read -r mean cpu <<<"$v"
    # repeat tool size p50 min mean cpu daemon_cpu: rstream reports a mean only.
    printf '%s\t%s\t%s\t\t\t%s\t%s\t\n' "$1" "$tool" "$2" "$mean" "$cpu" >>"$results"
  else
    failures=$((failures + 1))
  fi
}

fipp_run() { # fipp_run REPEAT SIZE PORT
  local n v out=$dir/r$1-fi_pingpong-$2.out
  n=$(peer_iters "$2")
  ip rule add pref 98 to "$ADDR0" lookup 102 # table 102 (rxe-net.sh): ADDR0 via veth1
  local route
  route=$(ip route get "$ADDR0")
  if [[ "$route" != *" dev veth1 "*"src $ADDR1"* ]]; then
    echo "fi_pingpong: route to $ADDR0 does not leave veth1 from $ADDR1: $route" >&2
    ip rule del pref 98
    failures=$((failures + 1))
    return 0
  fi
  if v=$(peer_pair fi_pingpong "$2" "$out" fi_pingpong -p verbs -e msg -d "$RXE0" -B "$3" -S "$2" -I "$n" -- \
    fi_pingpong -p verbs -e msg -d "$RXE1" -P "$3" -S "$2" -I "$n" "$ADDR0"); then
    IFS=$'\t' read -r mean cpu <<<"$v"
    printf '%s\tfi_pingpong\t%s\t\t\t%s\t%s\t\n' "$1" "$2" "$mean" "$cpu" >>"$results"
  else
    failures=$((failures + 1))
  fi
  ip rule del pref 98
}

peer_port=7480
peers_one() { # peers_one REPEAT SIZE
  local peer
  for peer in $peers; do
    peer_port=$((peer_port + 1)) # a fresh port each run: rdma_cm may hold the last one a while
    case $peer in
      rstream) rstream_run "$1" "$2" spin "$peer_port" ;;
      rstream-wait) rstream_run "$1" "$2" wait "$peer_port" ;;
      fi_pingpong) fipp_run "$1" "$2" $((47600 + peer_port - 7480)) ;;
      *) echo "unknown peer $peer" >&2; failures=$((failures + 1)) ;;
    esac
  done
}
