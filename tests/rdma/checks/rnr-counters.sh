#!/usr/bin/env bash
# After the traffic of the earlier checks, neither device saw an RNR NAK:
# ferry keeps receives posted (credits), perftest does too. Transport
# retries are the emulator's and are not checked here.
set -euo pipefail
for dev in "$RXE0" "$RXE1"; do
  line=$(rdma statistic show link "$dev/1")
  echo "$line"
  n=$(grep -o 'rcvd_rnr_err [0-9]*' <<<"$line" | cut -d' ' -f2)
  [[ -n "$n" ]] || { echo "$dev: no rcvd_rnr_err counter" >&2; exit 1; }
  [[ "$n" -eq 0 ]] || { echo "$dev: rcvd_rnr_err = $n" >&2; exit 1; }
done
