#!/usr/bin/env bash
# auth-rdma.sh — peer authentication (auth-secret-file, protocol 2) over
# rdma lanes: two ferryd on rxe0/rxe1 with the same secret bring a channel
# Up whose every lane is rdma (each accepted lane got a Challenge, its
# Hello's proof covers it, the acceptor's credits subtract it) and serve
# ferry-bench remote-rpc at 64 B and 64 KiB (every reply's length and stamp
# checked, sampled payloads compared byte for byte), one call at a time and
# then 384 outstanding each way. A dialed the lanes, so B (the acceptor) sent
# each lane's Challenge and counts A's receives less it: B's 384 calls to a
# server on A (over the same channel) are more than the two lanes' 2 x 128
# receives and run that window dry (B's credit_stalls > 0) again and again;
# a credit counted twice would be a send without a posted receive, an RNR
# NAK (rnr_retry 0: the lane dies). No RNR NAK in ferry's counters or the
# devices'. Then daemon B restarts with another
# secret: the Open from A fails PermissionDenied within a bounded time,
# both logs say "authentication failed", and nothing hangs.
set -euo pipefail
build=${FERRY_BUILD:?}
dir=${FERRY_CHECK_DIR:-${TMPDIR:-/tmp}/auth-rdma}
mkdir -p "$dir"
run=$(mktemp -d "${TMPDIR:-/tmp}/auth-rdma.XXXXXX")
ferryd=$build/daemon/ferryd ctl=$build/control/ferryctl bench=$build/tests/perf/ferry-bench
for exe in "$ferryd" "$ctl" "$bench"; do
  [[ -x $exe ]] || { echo "SKIP: $exe not built"; exit 77; }
done
port=7720 lanes=2
# shellcheck source=../../../scripts/lib/daemons.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/lib/daemons.sh"
stop_daemons() { ferry_stop_daemons 30; }
trap 'stop_daemons; rm -rf "$run"' EXIT
secret() { # secret FILE: a fresh 32-byte secret, mode 0600
  (umask 077 && head -c 32 /dev/urandom | base64 >"$1")
}
start() { # start NAME ADDR SECRET TAG
  rm -rf "${run:?}/$1"
  ferry_start_daemon --wait 20 --log "$dir/$4-$1.log" "$ferryd" "$run/$1" --listen "$2:$port" --transport rdma \
    --auth-secret-file "$3" --rdma-ack-timeout 18 --connect-timeout-ms 20000 --peer-timeout-ms 10000 \
    --channel-conns "$lanes" --endpoint-window-ops 1024 || exit 1
}
rdma_rnr() { # rdma_rnr DEV: rcvd_rnr_err + send_rnr_err of DEV port 1
  local line
  line=$(rdma statistic show link "$1/1")
  echo $(($(grep -o 'rcvd_rnr_err [0-9]*' <<<"$line" | cut -d' ' -f2) + \
    $(grep -o 'send_rnr_err [0-9]*' <<<"$line" | cut -d' ' -f2 || echo 0)))
}
bench_rpc() { # bench_rpc OUT SIZE ITERS CONCURRENCY ab|ba: remote-rpc A -> B (or B -> A), bounded
  local from=a to=b addr=$ADDR1
  [[ $5 == ab ]] || { from=b to=a addr=$ADDR0; }
  timeout 120 "$bench" remote-rpc --size "$2" --iters "$3" --concurrency "$4" --socket "$run/$from/ferryd.sock" \
    --server-socket "$run/$to/ferryd.sock" --target "$addr:$port" --json >"$1" 2>&1
}

secret "$run/s1" && secret "$run/s2"
rnr0_before=$(rdma_rnr "$RXE0") rnr1_before=$(rdma_rnr "$RXE1")

# --- the same secret: an Up channel on rdma lanes, calls answered ---------
start a "$ADDR0" "$run/s1" same
start b "$ADDR1" "$run/s1" same
calls_ab=0 calls_ba=0
# A opens first, so A dials and B accepts; B's Opens to A join that channel.
for run_spec in 64:300:1:ab 65536:300:1:ab 64:1500:384:ab 64:1500:384:ba; do
  IFS=: read -r size iters conc way <<<"$run_spec"
  out=$dir/same-rpc-$way-$size-c$conc.out ok=0
  # The first Open also brings the channel up; rdma_cm under emulation may
  # lose a CM MAD and take seconds, so a failed first try is retried once.
  for attempt in 1 2; do
    if bench_rpc "$out" "$size" "$iters" "$conc" "$way"; then ok=1 && break; fi
    echo "remote-rpc $way size $size concurrency $conc attempt $attempt failed: $(tail -n2 "$out")" >&2
  done
  ((ok)) || { tail -n 30 "$dir"/same-*.log; echo "FAIL: remote-rpc $way $size B x $conc with the same secret" >&2; exit 1; }
  [[ $way == ab ]] && calls_ab=$((calls_ab + iters)) || calls_ba=$((calls_ba + iters))
  tail -n1 "$out"
done
for name in a b; do
  timeout 10 "$ctl" --control "$run/$name/control.sock" status --json >"$dir/same-$name-status.json"
done
/usr/bin/python3 - "$dir/same-a-status.json" "$dir/same-b-status.json" "$lanes" "$calls_ab" "$calls_ba" <<'PY'
import json, sys
lanes, calls_ab, calls_ba = (int(x) for x in sys.argv[3:6])
bad = []
for side, path in zip("ab", sys.argv[1:3]):
    s = json.load(open(path))
    c = s["counters"]
    if s.get("transport") != "rdma":
        bad.append(f"{side}: transport {s.get('transport')}")
    peers = s["peers"]
    if len(peers) != 1 or peers[0]["state"] != "Up":
        bad.append(f"{side}: peers {[(p['address'], p['state']) for p in peers]}")
    else:
        ch = peers[0]["channels"]
        if len(ch) != lanes or any(x["transport"] != "rdma" for x in ch):
            bad.append(f"{side}: lanes {[(x['id'], x['transport'], x['state']) for x in ch]}")
    for key in ("rnr_naks", "peer_auth_failures"):
        if c.get(key) != 0:
            bad.append(f"{side}: {key} = {c.get(key)}")
    out_calls, in_calls = (calls_ab, calls_ba) if side == "a" else (calls_ba, calls_ab)
    for key, n in (("remote_calls", out_calls), ("remote_delivered", in_calls)):
        if c.get(key, 0) < n:
            bad.append(f"{side}: {key} = {c.get(key)} (< {n} calls)")
    # B accepted the lanes: its window toward A is A's receives less B's
    # Challenge and HelloAck, and its 384 outstanding calls must run it dry.
    if side == "b" and c.get("credit_stalls", 0) == 0:
        bad.append("b: credit_stalls = 0 (the acceptor's credit window never ran dry)")
    print(f"{side}: transport {s.get('transport')}, peers {len(peers)}, "
          f"lanes {len(peers[0]['channels']) if peers else 0}, remote_calls {c.get('remote_calls')}, "
          f"remote_delivered {c.get('remote_delivered')}, credit_stalls {c.get('credit_stalls')}, "
          f"rnr_naks {c.get('rnr_naks')}, peer_auth_failures {c.get('peer_auth_failures')}")
if bad:
    print("FAIL: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
stop_daemons

# --- another secret on B: the Open fails PermissionDenied, nothing hangs --
start a "$ADDR0" "$run/s1" wrong
start b "$ADDR1" "$run/s2" wrong
out=$dir/wrong-rpc.out
t0=$SECONDS
if timeout 90 "$bench" remote-rpc --size 64 --iters 10 --socket "$run/a/ferryd.sock" \
  --server-socket "$run/b/ferryd.sock" --target "$ADDR1:$port" --json >"$out" 2>&1; then
  echo "FAIL: remote-rpc succeeded across different secrets" >&2
  exit 1
else
  rc=$?
fi
echo "wrong secret: ferry-bench exit $rc after $((SECONDS - t0)) s: $(grep -m1 'open ' "$out" || tail -n1 "$out")"
((rc != 124)) || { echo "FAIL: remote-rpc hung (timeout 90 s) across different secrets" >&2; exit 1; }
grep -q "PermissionDenied" "$out" || { cat "$out"; echo "FAIL: the Open did not fail PermissionDenied" >&2; exit 1; }
for name in a b; do
  deadline=$((SECONDS + 10))
  until grep -q "authentication failed" "$dir/wrong-$name.log"; do
    ((SECONDS < deadline)) || { tail -n 20 "$dir/wrong-$name.log"; echo "FAIL: $name logged no authentication failure" >&2; exit 1; }
    sleep 0.2
  done
  if grep -qF -e "$(cat "$run/s1")" -e "$(cat "$run/s2")" "$dir/wrong-$name.log"; then
    echo "FAIL: $name logged the secret" >&2
    exit 1
  fi
done
# Both daemons still answer their control sockets (no wedged engine).
for name in a b; do
  timeout 10 "$ctl" --control "$run/$name/control.sock" status --json >"$dir/wrong-$name-status.json"
done
stop_daemons

rnr0=$(($(rdma_rnr "$RXE0") - rnr0_before)) rnr1=$(($(rdma_rnr "$RXE1") - rnr1_before))
echo "device RNR errors during the check: $RXE0 $rnr0, $RXE1 $rnr1"
((rnr0 == 0 && rnr1 == 0)) || { echo "FAIL: RNR errors on the devices" >&2; exit 1; }
echo "PASS: same secret: rdma lanes Up, $((calls_ab + calls_ba)) remote calls (64 B, 64 KiB, 384 outstanding each way); other secret: PermissionDenied"
