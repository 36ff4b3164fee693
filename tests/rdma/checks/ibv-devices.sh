#!/usr/bin/env bash
# ibv_devices (libibverbs' own view, not sysfs) lists both rxe devices.
set -euo pipefail
out=$(ibv_devices)
echo "$out"
for dev in "$RXE0" "$RXE1"; do
  grep -qw "$dev" <<<"$out" || { echo "ibv_devices does not list $dev" >&2; exit 1; }
done
