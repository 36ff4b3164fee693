#!/usr/bin/env bash
# run-vm-suite.sh [--build DIR] [--summary FILE] [--timeout SECONDS] [--checks FILE]
#
# The rdma suite: boots ONE Soft-RoCE VM (scripts/vm/) for all of it, since a
# boot under TCG costs seconds, and runs tests/rdma/vm-suite-guest.sh there
# (checks.list, then meson tests of suite 'rdma'). Prints one line per check
# and a total, and appends "PASS|FAIL|SKIP NAME" lines to the summary file
# that scripts/test counts.
#
# Exit status: 0 all passed; 1 something failed (the VM failing to boot or
# timing out counts as a failure); 77 skipped because the VM cannot be built
# here (reason printed: no kernel package mirror, no qemu, ...).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$repo/build
summary=
checks=tests/rdma/checks.list # relative to the repository root
timeout_s=${FERRY_VM_SUITE_TIMEOUT:-1200}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --summary) summary=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --checks) checks=$(realpath "$2"); shift 2 ;;
    *) echo "run-vm-suite: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run-vm-suite: no build dir $build" >&2; exit 2; }
[[ -n "$summary" ]] && : >"$summary"

note() { [[ -z "$summary" ]] || echo "$*" >>"$summary"; }

t0=$SECONDS
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
  echo "vm-suite: SKIPPED: qemu-system-x86_64 not installed"
  note "SKIP vm-suite qemu-system-x86_64 not installed"
  exit 77
fi
if ! reason=$("$repo/scripts/vm/build-vm.sh" 2>&1 >/dev/null); then
  echo "vm-suite: SKIPPED: cannot build the VM: $(tail -n1 <<<"$reason")"
  note "SKIP vm-suite cannot build the VM: $(tail -n1 <<<"$reason")"
  exit 77
fi
vm_build_s=$((SECONDS - t0))

results=$build/vm-suite-results
rm -rf "$results"
mkdir -p "$results"
# The guest sees the results folder, not /tmp or /run of this machine.
(cd "$repo" && cp "$checks" "$results/checks.list") || { echo "run-vm-suite: no checks file $checks" >&2; exit 2; }
t1=$SECONDS
vm_rc=0
FERRY_BUILD=$build "$repo/scripts/vm/run-in-vm.sh" --timeout "$timeout_s" --results "$results" \
  env FERRY_BUILD="$build" FERRY_VM_CHECKS="$results/checks.list" tests/rdma/vm-suite-guest.sh || vm_rc=$?
wall_s=$((SECONDS - t1))

pass=0 fail=0 skip=0
if [[ -f $results/results.txt ]]; then
  while read -r verdict name _; do
    case "$verdict" in
      PASS) pass=$((pass + 1)) ;;
      FAIL) fail=$((fail + 1)) ;;
      SKIP) skip=$((skip + 1)) ;;
      *) continue ;;
    esac
    note "$verdict $name"
  done <"$results/results.txt"
fi
# The VM itself failing is a failure of the suite, never a silent pass.
if [[ $vm_rc -eq 124 ]]; then
  fail=$((fail + 1)); note "FAIL vm-timeout"; echo "vm-suite: FAIL: VM timed out after ${timeout_s}s"
elif [[ $vm_rc -eq 125 || ! -f $results/results.txt ]]; then
  fail=$((fail + 1)); note "FAIL vm-boot"; echo "vm-suite: FAIL: VM did not run the suite (status $vm_rc)"
elif [[ $((pass + fail + skip)) -eq 0 ]]; then
  fail=$((fail + 1)); note "FAIL vm-suite-empty"; echo "vm-suite: FAIL: the VM ran no check at all"
elif [[ $vm_rc -ne 0 && $fail -eq 0 ]]; then
  fail=$((fail + 1)); note "FAIL vm-suite-status"; echo "vm-suite: FAIL: suite exited $vm_rc with no failed check"
fi

boot=$(cat "$results/guest-boot-seconds" 2>/dev/null || echo '?')
in_guest=$(cat "$results/guest-suite-seconds" 2>/dev/null || echo '?')
echo "vm-suite: VM build/reuse ${vm_build_s}s, boot ${boot}s (guest uptime at start), checks ${in_guest}s, VM wall ${wall_s}s"
echo "vm-suite: $pass passed, $fail failed, $skip skipped (logs: $results)"
[[ $fail -eq 0 ]] || exit 1
[[ $pass -gt 0 || $skip -eq 0 ]] || exit 77
exit 0
