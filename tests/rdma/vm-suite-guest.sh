#!/usr/bin/env bash
# Runs INSIDE the Soft-RoCE VM (started by run-vm-suite.sh): builds the
# two-device rxe network, then runs every check of checks.list and every meson
# test of suite 'rdma', each bounded by its timeout. Writes one line per
# check to $FERRY_VM_RESULTS/results.txt:  PASS|FAIL|SKIP NAME SECONDS
# and each check's output to $FERRY_VM_RESULTS/checks/NAME/output.log.
set -uo pipefail

out=${FERRY_VM_RESULTS:?run me through scripts/vm/run-in-vm.sh}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export FERRY_BUILD=${FERRY_BUILD:-$repo/build}
export RXE0=rxe0 RXE1=rxe1 ADDR0=198.18.0.1 ADDR1=198.18.0.2 GID_INDEX=1
export TMPDIR=/tmp
results=$out/results.txt
: >"$results"
awk '{printf "%.2f\n", $1}' /proc/uptime >"$out/guest-boot-seconds"
suite_start=$SECONDS

record() { # record VERDICT NAME SECONDS
  echo "$1 $2 $3" >>"$results"
  echo "vm-suite: $1 $2 (${3}s)"
}

# run_check NAME TIMEOUT CMD...: runs CMD under a hard timeout, logs it.
run_check() {
  local name=$1 limit=$2
  shift 2
  local dir=$out/checks/$name start=$SECONDS rc=0
  mkdir -p "$dir"
  FERRY_CHECK_DIR=$dir timeout --kill-after=5 "$limit" "$@" >"$dir/output.log" 2>&1 </dev/null || rc=$?
  local took=$((SECONDS - start))
  if [[ $rc -eq 0 ]]; then
    record PASS "$name" $took
  elif [[ $rc -eq 77 ]]; then
    record SKIP "$name" $took
  else
    [[ $rc -eq 124 ]] && echo "(timed out after ${limit}s)" >>"$dir/output.log"
    record FAIL "$name" $took
    echo "---- $name output (last 40 lines, status $rc)"
    tail -n 40 "$dir/output.log"
    echo "----"
  fi
}

net_start=$SECONDS
if ! scripts/vm/rxe-net.sh >"$out/rxe-net.log" 2>&1; then
  record FAIL rxe-net $((SECONDS - net_start))
  cat "$out/rxe-net.log"
  exit 1
fi

checks=${FERRY_VM_CHECKS:-tests/rdma/checks.list}
[[ -r "$checks" ]] || { record FAIL checks-list 0; echo "cannot read $checks"; exit 1; }
# Lines after "@after-meson" run last, after the meson tests: checks that
# may leave Soft-RoCE unable to connect (a device going down and up).
late=()
after=0
meson_tests=1
while read -r name limit cmd; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  if [[ "$name" == "@no-meson" ]]; then # a checks file for one development run
    meson_tests=0
    continue
  fi
  if [[ "$name" == "@after-meson" ]]; then
    after=1
    continue
  fi
  if [[ $after -eq 1 ]]; then
    late+=("$name"$'\t'"$limit"$'\t'"$cmd")
    continue
  fi
  # The rest of the line is shell: redirections, && and builtins work.
  run_check "$name" "$limit" bash -c "$cmd"
done <"$checks"

# meson tests declared with suite 'rdma' (tests/rdma/meson.build). The build
# folder is read-only here, so they run directly, not through `meson test`.
intro=$FERRY_BUILD/meson-info/intro-tests.json
if [[ -f "$intro" && $meson_tests -eq 1 ]]; then
  while IFS=$'\t' read -r name limit workdir cmdline; do
    run_check "meson-$name" "$limit" bash -c "cd $workdir && exec $cmdline"
  done < <(python3 - "$intro" "$FERRY_BUILD" <<'PY'
import json, shlex, sys
tests = json.load(open(sys.argv[1]))
for t in tests:
    if 'rdma' not in t.get('suite', []) and not any(s.endswith(':rdma') for s in t.get('suite', [])):
        continue
    env = ' '.join(shlex.quote(f'{k}={v}') for k, v in (t.get('env') or {}).items())
    cmd = ' '.join(shlex.quote(c) for c in t['cmd'])
    limit = t.get('timeout') or 60
    if limit <= 0:
        limit = 600
    workdir = shlex.quote(t.get('workdir') or sys.argv[2])
    print('\t'.join([t['name'].replace(' ', '_').replace('/', '_'), str(limit), workdir,
                     (f'env {env} ' if env else '') + cmd]))
PY
  )
fi

for line in "${late[@]}"; do
  IFS=$'\t' read -r name limit cmd <<<"$line"
  run_check "$name" "$limit" bash -c "$cmd"
done

echo "$((SECONDS - suite_start))" >"$out/guest-suite-seconds"
! grep -q '^FAIL' "$results"
