#!/usr/bin/env bash
# run-in-vm.sh [--timeout SECONDS] [--results DIR] [--mem MiB] CMD [ARG...]
#
# Boots the Soft-RoCE VM (scripts/vm/build-vm.sh builds it on first use) and
# runs CMD with ARGs in it, chrooted into this machine's root (read-only) from
# the current folder. The guest sees the very binaries built here. CMD's
# output goes to this terminal; files it writes under $FERRY_VM_RESULTS (the
# results folder, same path inside and outside) survive the VM.
#
# FERRY_VM_SMP sets the guest's vCPU count (default 2, the host's core
# count; more only for experiments: spinning vCPUs then share host cores).
#
# Exit status: CMD's own; 124 when the hard timeout (default 900 s) killed
# the VM; 125 when the VM failed before or around the command; 2 when the VM
# cannot be built (reason on stderr).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout_s=900
results=
mem=2048
while [[ $# -gt 0 ]]; do
  case "$1" in
    --timeout) timeout_s=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "run-in-vm: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { echo "usage: run-in-vm.sh [--timeout S] [--results DIR] CMD [ARG...]" >&2; exit 2; }

command -v qemu-system-x86_64 >/dev/null || { echo "run-in-vm: qemu-system-x86_64 missing" >&2; exit 2; }
cache=$("$here/build-vm.sh") || exit 2

own_results=0
if [[ -z "$results" ]]; then
  results=$(mktemp -d /tmp/ferry-vm.XXXXXX)
  own_results=1
fi
mkdir -p "$results"
results=$(cd "$results" && pwd)
# The kernel command line splits on spaces: keep the path simple.
[[ "$results" =~ ^[A-Za-z0-9/._+-]+$ ]] || { echo "run-in-vm: results path must be plain: $results" >&2; exit 2; }
rm -f "$results/exit-status"

# The current folder (the repository) gets a share of its own, mounted at
# the same path in the guest: the guest mounts tmpfs over /tmp and /run, which
# would hide a checkout that lives there (CI clones wherever it likes).
repo=$PWD
[[ "$repo" =~ ^[A-Za-z0-9/._+-]+$ ]] || { echo "run-in-vm: current folder path must be plain: $repo" >&2; exit 2; }

# The command travels as a script in the results share: no quoting through
# the kernel command line.
{
  echo "cd $(printf '%q' "$PWD") || exit 125"
  printf 'exec'
  printf ' %q' "$@"
  echo
} >"$results/cmd.sh"

accel=(-accel tcg,thread=multi -cpu max) # KVM does not work on these machines (docs/testing.md)
start=$(date +%s.%N)
set +e
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 "${accel[@]}" \
  -m "$mem" -smp "${FERRY_VM_SMP:-2}" -nographic -no-reboot -nic none \
  -kernel "$cache/vmlinuz" -initrd "$cache/initramfs.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 ferry.results=$results ferry.repo=$repo" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$repo,mount_tag=repo,security_model=none,readonly=on,multidevs=remap" \
  -virtfs "local,path=$results,mount_tag=results,security_model=none,multidevs=remap" \
  </dev/null | sed -u -e 's/\x1bc//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g'
# The firmware and the console send terminal resets; sed drops them so logs stay plain text.
qemu_rc=${PIPESTATUS[0]}
set -e
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
echo # the guest console ends without a newline

if [[ $qemu_rc -eq 124 || $qemu_rc -eq 137 ]]; then
  echo "run-in-vm: VM killed after ${timeout_s}s timeout" >&2
  rc=124
elif [[ -s "$results/exit-status" ]]; then
  rc=$(cat "$results/exit-status")
else
  echo "run-in-vm: VM ended (qemu status $qemu_rc) without an exit status" >&2
  rc=125
fi
echo "run-in-vm: VM ran ${elapsed}s, command status $rc" >&2
[[ $own_results -eq 1 ]] && rm -rf "$results"
exit "$rc"
