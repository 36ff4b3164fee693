# shellcheck shell=bash
# Sourced by the Soft-RoCE VM benchmarks (bench-vs-perftest.sh,
# trace-roundtrip.sh, count-calls.sh): ferry's two daemons on the two rxe
# devices and the modes they run in. The caller sets build, bench (the
# ferry-bench binary), run (a writable folder for sockets), dir (logs), port,
# spin_us, arrays pids and daemons, and optionally pair (a prefix for the
# daemons' folders: $run/${pair}a and $run/${pair}b, so that several pairs
# can run at once); ADDR0/ADDR1 come from the VM suite.
# shellcheck source=../../scripts/lib/daemons.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/daemons.sh"
# mode_flags MODE: sets ferryd_flags, bench_flags and the pinning (cpu lists
# for taskset; empty: unpinned) of daemon A, daemon B, ferry-bench (the
# client) and its forked echo server.
mode_flags() {
  ferryd_flags=() bench_flags=() pin_a= pin_b= pin_client= pin_server=
  case $1 in
    default) ;;
    # The defaults before the spin hold and eager responses (phase 1's datapath).
    before) ferryd_flags=(--engine-spin-hold off --rdma-eager-response-bytes 0 --engine-clock-stride 1) ;;
    # Phase 2's defaults (held spin, eager responses), before the clock
    # stride and the sleep during large transfers.
    phase2) ferryd_flags=(--engine-clock-stride 1 --engine-spin-bulk-bytes 0) ;;
    busy) ferryd_flags=(--engine-spin-us "$spin_us"); bench_flags=(--busy-poll) ;;
    # The sleep during large transfers from 64 KiB up (the default: 256 KiB).
    bulk64k) ferryd_flags=(--engine-spin-bulk-bytes 65536) ;;
    arena) ferryd_flags=(--rdma-windows 0) ;;
    busy-arena) ferryd_flags=(--engine-spin-us "$spin_us" --rdma-windows 0); bench_flags=(--busy-poll) ;;
    # The engines sleep as soon as a turn finds nothing: they wait on the
    # completion channel and the doorbells instead of spinning.
    nospin) ferryd_flags=(--engine-spin-us 0 --engine-spin-inflight-us 0) ;;
    nospin-arena) ferryd_flags=(--engine-spin-us 0 --engine-spin-inflight-us 0 --rdma-windows 0) ;;
    # The in-flight spin off: 50 us like an idle stretch.
    shortspin) ferryd_flags=(--engine-spin-inflight-us 50) ;;
    # The engines sleep after the idle spin, never spinning for answers.
    noinflight) ferryd_flags=(--engine-spin-inflight-us 0 --engine-spin-hold off) ;;
    busy-nospin) ferryd_flags=(--engine-spin-us 0 --engine-spin-inflight-us 0); bench_flags=(--busy-poll) ;;
    # One vCPU per "host": daemon A and the client on 0, daemon B and the server on 1.
    pin-hosts) pin_a=0 pin_client=0 pin_b=1 pin_server=1 ;;
    # Both daemons on vCPU 0, client and server on vCPU 1.
    pin-daemons) pin_a=0 pin_b=0 pin_client=1 pin_server=1 ;;
    *) echo "unknown mode $1" >&2; return 1 ;;
  esac
}
pin_prefix() { # pin_prefix CPUS: sets pfx to "taskset -c CPUS", or nothing when CPUS is empty
  pfx=()
  [[ -z $1 ]] || pfx=(taskset -c "$1")
}
start_daemons() { # start_daemons TAG: daemon A on ADDR0, B on ADDR1, logs $dir/TAG-a.log, -b.log
  local name addr tag=$1 pfx
  for name in a b; do
    [[ $name == a ]] && { addr=$ADDR0; pin_prefix "$pin_a"; } || { addr=$ADDR1; pin_prefix "$pin_b"; }
    rm -rf "${run:?}/${pair:-}$name"
    ferry_start_daemon --wait 20 --log "$dir/$tag-$name.log" --prefix "${pfx[*]}" "$build/daemon/ferryd" \
      "$run/${pair:-}$name" --listen "$addr:$port" --transport rdma --rdma-ack-timeout 18 \
      --connect-timeout-ms 20000 --peer-timeout-ms 10000 --channel-conns 1 "${ferryd_flags[@]}" || return 1
    daemons+=("$ferry_daemon_pid")
    pids+=("$ferry_daemon_pid")
  done
}
stop_daemons() {
  local p
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${daemons[@]}"; do wait "$p" 2>/dev/null || true; done
  daemons=()
}
# run_bench OUT ARGS...: ferry-bench (pinned to pin_client) with ARGS; its
# forked server moves to pin_server as soon as it exists (during warm-up).
run_bench() {
  local out=$1 b c deadline pfx
  shift
  pin_prefix "$pin_client"
  "${pfx[@]}" "$bench" "$@" >"$out" 2>&1 &
  b=$!
  if [[ -n $pin_server && $pin_server != "$pin_client" ]]; then
    # The forked echo server: the child that stays (it lives as long as the run).
    deadline=$((SECONDS + 10))
    while ((SECONDS < deadline)) && kill -0 $b 2>/dev/null; do
      c=$(pgrep -P $b | head -n1) && [[ -n $c ]] && taskset -pc "$pin_server" "$c" >/dev/null 2>&1 &&
        sleep 0.2 && kill -0 "$c" 2>/dev/null && break
      sleep 0.01
    done
  fi
  wait $b
}
