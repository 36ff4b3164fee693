#!/usr/bin/env bash
# rping across the two devices through librdmacm (the connection manager
# ferry's rdma transport uses): server on ADDR0 (rxe0), client bound to ADDR1
# (rxe1), a few verified ping-pongs.
set -euo pipefail
count=${RPING_COUNT:-10}
dir=${FERRY_CHECK_DIR:-$(mktemp -d)}
rping -s -a "$ADDR0" -C "$count" -v >"$dir/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
# rdma_cm listeners are not visible to ss: retry the client until the server
# accepts, within a deadline.
deadline=$((SECONDS + 20))
until rping -c -a "$ADDR0" -I "$ADDR1" -C "$count" -v >"$dir/client.log" 2>&1; do
  kill -0 $server 2>/dev/null || { cat "$dir/server.log"; echo "rping server exited" >&2; exit 1; }
  ((SECONDS < deadline)) || { cat "$dir/client.log"; echo "rping client never connected" >&2; exit 1; }
  sleep 0.2
done
wait $server || { cat "$dir/server.log"; echo "rping server failed" >&2; exit 1; }
trap - EXIT
n=$(grep -c '^ping data' "$dir/client.log" || true)
echo "client verified $n of $count pings"
[[ "$n" -eq "$count" ]]
