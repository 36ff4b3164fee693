#!/usr/bin/env bash
# systemd_vm.sh FERRYD UNIT HELLO FERRYCTL
# Runs ferryd.service under a real systemd: inside the test VM
# (scripts/vm/run-in-vm.sh; its own kernel, so nothing on the host is
# touched) systemd starts as PID 1 of a new PID namespace with the unit in
# /run/systemd/system, and a check service drives it with systemctl:
# start (waits for READY=1), StatusText, reload, crash -> restart, stop.
# Outside the VM it re-launches itself there. Exit 0 pass, 1 fail, 77 skip.
set -uo pipefail
ferryd=$(readlink -f "$1") unit=$(readlink -f "$2") hello=$(readlink -f "$3") ferryctl=$(readlink -f "$4")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ -z "${FERRY_IN_VM:-}" ]]; then
  command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: no qemu"; exit 77; }
  [[ -x /lib/systemd/systemd ]] || { echo "SKIP: systemd not installed"; exit 77; }
  cd "$repo" || exit 1
  scripts/vm/run-in-vm.sh --timeout 400 bash "$here/systemd_vm.sh" "$ferryd" "$unit" "$hello" "$ferryctl"
  rc=$?
  [[ $rc -eq 2 || $rc -eq 125 ]] && { echo "SKIP: the VM is not available (status $rc)"; exit 77; }
  exit $rc
fi

if [[ "${1:-}" != --check && "${FERRY_OPS_CHECK:-}" != 1 ]]; then
  # In the VM, chrooted into the host root; /run and /tmp are tmpfs.
  mkdir -p /run/systemd/system
  sed "s#^ExecStart=[^ ]*#ExecStart=$ferryd#" "$unit" >/run/systemd/system/ferryd.service
  case "$ferryd" in
    /tmp/* | /var/tmp/*)
      # A checkout under /tmp (CI clones where it likes): the unit's
      # PrivateTmp= would hide the binary from the service. An installed
      # ferryd lives in /usr/sbin, so only this test run relaxes it.
      echo "note: $ferryd is under a tmp folder; PrivateTmp=no for this run"
      mkdir -p /run/systemd/system/ferryd.service.d
      printf '[Service]\nPrivateTmp=no\n' >/run/systemd/system/ferryd.service.d/build-tree-in-tmp.conf
      ;;
  esac
  out=$FERRY_VM_RESULTS
  cat >/run/systemd/system/ferry-ops.target <<T
[Unit]
DefaultDependencies=no
Wants=ferry-ops-check.service
T
  cat >/run/systemd/system/ferry-ops-check.service <<T
[Unit]
DefaultDependencies=no
[Service]
Type=oneshot
Environment=FERRY_OPS_CHECK=1 FERRY_IN_VM=1
ExecStart=/bin/bash -c '/bin/bash $here/systemd_vm.sh $ferryd $unit $hello $ferryctl >$out/check.log 2>&1; systemctl exit \$?'
T
  start=$(date +%s)
  # systemd must be PID 1: give it a PID namespace of its own.
  unshare --pid --fork --mount-proc /lib/systemd/systemd --system --unit=ferry-ops.target \
    --log-target=console --log-level=warning --show-status=no </dev/null >"$out/systemd.log" 2>&1
  rc=$?
  echo "systemd ran $(($(date +%s) - start))s, exit $rc"
  cat "$out/check.log" 2>/dev/null || { echo "no check log"; tail -30 "$out/systemd.log"; }
  exit $rc
fi

# ---- the check, run by systemd as ferry-ops-check.service ----
fail() { echo "FAIL: $*"; systemctl status --no-pager ferryd 2>&1 | tail -15; exit 1; }
prop() { systemctl show -P "$1" ferryd; }
wait_prop() { # KEY PATTERN SECONDS
  local i
  for ((i = 0; i < $3 * 10; i++)); do [[ "$(prop "$1")" == $2 ]] && return 0; sleep 0.1; done
  return 1
}
echo "systemd $(systemctl --version | head -1)"
systemctl start ferryd || fail "systemctl start ferryd"
[[ $(prop ActiveState) == active ]] || fail "not active after start (Type=notify READY=1)"
echo "started: $(prop StatusText)"
[[ $(prop StatusText) == "serving 0 clients, 0 peers" ]] || fail "StatusText '$(prop StatusText)'"
[[ -S /run/ferry/ferryd.sock && -S /run/ferry/control.sock ]] || fail "sockets not in RuntimeDirectory"
"$ferryctl" --control /run/ferry/control.sock status --json | grep '"draining":false' >/dev/null || fail "ferryctl status"
[[ $(prop LimitMEMLOCK) == infinity ]] || fail "LimitMEMLOCK $(prop LimitMEMLOCK)"

"$hello" --socket /run/ferry/ferryd.sock --go-file /tmp/go >/tmp/hello.log 2>&1 &
hp=$!
wait_prop StatusText "serving 1 client, 0 peers" 5 || fail "StatusText after attach: '$(prop StatusText)'"
echo "attached: $(prop StatusText)"
touch /tmp/go
wait $hp || fail "hello: $(cat /tmp/hello.log)"

# The client's detach changes STATUS within a second; let that land first so
# it cannot overwrite the reload's STATUS line under the check below.
wait_prop StatusText "serving 0 clients, 0 peers" 5 || fail "StatusText after detach: '$(prop StatusText)'"
systemctl reload ferryd || fail "systemctl reload"
[[ $(prop ActiveState) == active ]] || fail "not active after reload"
wait_prop StatusText "*reloaded*" 5 || fail "StatusText after reload '$(prop StatusText)'"
echo "reloaded: $(prop StatusText)"

pid=$(prop MainPID)
kill -SEGV "$pid"
wait_prop NRestarts 1 10 || fail "no restart after SIGSEGV (NRestarts $(prop NRestarts))"
wait_prop ActiveState active 10 || fail "not active again after restart"
[[ $(prop MainPID) != "$pid" ]] || fail "same MainPID after restart"
echo "crash restarted: pid $pid -> $(prop MainPID), NRestarts $(prop NRestarts)"

systemctl stop ferryd || fail "systemctl stop"
[[ $(prop ActiveState) == inactive ]] || fail "state after stop $(prop ActiveState)"
[[ $(prop Result) == success ]] || fail "stop result $(prop Result)"
[[ ! -e /run/ferry ]] || fail "RuntimeDirectory not removed"
echo "PASS systemd: start/READY, STATUS, reload, crash restart, stop"
exit 0
