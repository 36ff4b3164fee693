#!/usr/bin/env bash
# perftest.sh TOOL PORT: runs perftest TOOL (ib_send_lat, ib_write_lat, ...)
# with 64-byte messages from rxe1 (client, 198.18.0.2) to rxe0 (server,
# 198.18.0.1). Proves real verbs traffic crosses the veth pair between the two
# devices before ferry's own rdma tests are blamed for anything.
set -euo pipefail
tool=$1 port=$2
iters=${PERFTEST_ITERS:-200}
common=(-x "$GID_INDEX" -s 64 -n "$iters" -F -p "$port")
dir=${FERRY_CHECK_DIR:-$(mktemp -d)}

before=$(rdma statistic show link "$RXE0/1" | grep -o 'rcvd_pkts [0-9]*' | cut -d' ' -f2)

"$tool" -d "$RXE0" "${common[@]}" >"$dir/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT

# The server must listen before the client connects: poll its TCP port.
deadline=$((SECONDS + 20))
until ss -ltn "sport = :$port" | grep -q LISTEN; do
  kill -0 $server 2>/dev/null || { cat "$dir/server.log"; echo "server exited early" >&2; exit 1; }
  ((SECONDS < deadline)) || { echo "server did not listen on $port" >&2; exit 1; }
  sleep 0.1
done

client_rc=0
"$tool" -d "$RXE1" "${common[@]}" "$ADDR0" >"$dir/client.log" 2>&1 || client_rc=$?
server_rc=0
wait $server || server_rc=$?
trap - EXIT
cat "$dir/client.log"
[[ $client_rc -eq 0 && $server_rc -eq 0 ]] || {
  echo "--- server" >&2; cat "$dir/server.log" >&2
  echo "client status $client_rc, server status $server_rc" >&2; exit 1
}
# A result row starts with the message size and iteration count.
grep -Eq "^[[:space:]]*64[[:space:]]+$iters[[:space:]]" "$dir/client.log" ||
  { echo "no 64-byte result row in the client output" >&2; exit 1; }
after=$(rdma statistic show link "$RXE0/1" | grep -o 'rcvd_pkts [0-9]*' | cut -d' ' -f2)
((after > before)) || { echo "$RXE0 counted no received packets: traffic did not cross it" >&2; exit 1; }
echo "$RXE0 rcvd_pkts $before -> $after"
