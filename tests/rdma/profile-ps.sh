#!/usr/bin/env bash
# profile-ps.sh: inside the Soft-RoCE VM (a checks line through
# run-vm-suite.sh --checks, `@no-meson` first), where the CPU of
# ps-vm-bench.sh's ferry arm goes: `ferry-ps bench` at the small shape
# (16 keys x dim 16) through two ferryd on the two rxe devices, with the
# whole guest sampled by `perf record -a` (cpu-clock: TCG has no PMU) for
# PROFILE_SECONDS of its steady state, in each of PROFILE_MODES
# (ferry-modes.sh). Prints per mode the share of samples by process and
# kernel/user, and the top symbols.
# PROFILE_MODES may name "tcp": ferry-ps's kernel-TCP baseline across the
# same veth (ps-vm-bench.sh's route). PROFILE_CALLGRAPH=1: perf record -g
# and the kernel's callers of the hottest symbols of every process.
# Environment: PROFILE_MODES ("default nospin"), PROFILE_SECONDS (4).
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${FERRY_BUILD:?} dir=${FERRY_CHECK_DIR:-$(mktemp -d)}
run=$(mktemp -d "${TMPDIR:-/tmp}/ferry-prof-XXXXXX")
ps=$build/client/examples/ps/ferry-ps
modes=${PROFILE_MODES:-default nospin} secs=${PROFILE_SECONDS:-4}
port=7680 spin_us=2000
pids=() daemons=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip rule del pref 97 2>/dev/null || true
}
trap cleanup EXIT
# shellcheck source=tests/rdma/ferry-modes.sh
source "$here/ferry-modes.sh"
command -v perf >/dev/null || { echo "no perf in the guest"; exit 77; }

cg=()
[[ ${PROFILE_CALLGRAPH:-0} == 1 ]] && cg=(-g)
shape=(--batch 16 --dim 16 --iters 100000 --workers 2 --shards 2 --keys 100000)
for mode in $modes; do
  if [[ $mode == tcp ]]; then
    ip rule add pref 97 to "$ADDR1" ipproto tcp dport 32768-60999 lookup 101
    [[ $(ip route get "$ADDR1" ipproto tcp dport 40000) == *" dev veth0 "* ]] || { echo "tcp route not via veth0"; exit 1; }
    timeout 300 "$ps" bench --transport tcp "${shape[@]}" --target "$ADDR1" >"$dir/$mode.bench" 2>&1 &
  else
    mode_flags "$mode"
    pair="prof-$mode-" daemons=()
    start_daemons "prof-$mode"
    timeout 300 "$ps" bench --transport ferry "${shape[@]}" \
      --socket "$run/${pair}a/ferryd.sock" --server-socket "$run/${pair}b/ferryd.sock" --target "$ADDR1:$port" \
      >"$dir/$mode.bench" 2>&1 &
  fi
  b=$!
  pids+=($b)
  sleep 6
  perf record -a "${cg[@]}" -F 250 -o "$dir/$mode.data" -- sleep "$secs" >"$dir/$mode.record" 2>&1 || cat "$dir/$mode.record"
  kill $b 2>/dev/null || true
  wait $b 2>/dev/null || true
  [[ $mode == tcp ]] && ip rule del pref 97 || stop_daemons
  echo "== $mode: samples by process"
  perf report -i "$dir/$mode.data" --stdio --sort comm --percent-limit 1 2>/dev/null | grep -v '^#' | grep -v '^$' | head -15
  echo "== $mode: by process and kernel/user ([k] kernel, [.] user)"
  perf report -i "$dir/$mode.data" --stdio --sort comm,dso --percent-limit 1.5 2>/dev/null | grep -v '^#' | grep -v '^$' | head -20
  echo "== $mode: top symbols"
  perf report -i "$dir/$mode.data" --stdio --no-children --sort comm,sym --percent-limit 0.8 -g none 2>/dev/null |
    grep -v '^#' | grep -v '^$' | head -40
  if ((${#cg[@]})); then
    # Inclusive shares (a function and everything it called) of all samples.
    echo "== $mode: inclusive shares (function and its callees), per process"
    perf report -i "$dir/$mode.data" --stdio --children --sort comm,sym --percent-limit 2.5 -g none 2>/dev/null |
      grep -v '^#' | grep -v '^$' | head -70
  fi
  port=$((port + 1))
done
