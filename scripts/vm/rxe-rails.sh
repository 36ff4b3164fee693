#!/usr/bin/env bash
# rxe-rails.sh — run INSIDE the Soft-RoCE VM (as root), after rxe-net.sh.
# Gives each of rxe-net.sh's two "hosts" a second rail: a second veth pair,
# veth2 (198.18.1.1, rxe2: host A's rail 1) and veth3 (198.18.1.2, rxe3:
# host B's rail 1), with the same policy routing, so every packet between
# two rails of the same index crosses its own pair. Host A is then
# rxe0 + rxe2, host B rxe1 + rxe3 (docs/rails.md). rxe-net.sh's devices and
# addresses (RXE0/RXE1/ADDR0/ADDR1) are left as they are. Idempotent.
set -euo pipefail

[[ "${FERRY_IN_VM:-}" == 1 ]] || { echo "rxe-rails: refusing to run outside the VM" >&2; exit 2; }
# shellcheck source=scripts/lib/net.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/net.sh"

addr2=198.18.1.1 # benchmarking range (RFC 2544): never routed off the machine
addr3=198.18.1.2

if rdma link show rxe2/1 >/dev/null 2>&1 && rdma link show rxe3/1 >/dev/null 2>&1; then
  exit 0
fi
rdma link show rxe0/1 >/dev/null 2>&1 || { echo "rxe-rails: run scripts/vm/rxe-net.sh first" >&2; exit 1; }

ip link add veth2 type veth peer name veth3
ip link set veth2 up
ip link set veth3 up
ip addr add $addr2/32 dev veth2
ip addr add $addr3/32 dev veth3

for dev in veth2 veth3; do
  echo 0 >/proc/sys/net/ipv4/conf/$dev/rp_filter
  echo 1 >/proc/sys/net/ipv4/conf/$dev/accept_local
done

ip rule add pref 92 iif veth2 lookup local
ip rule add pref 93 iif veth3 lookup local
ip rule add pref 102 from $addr2 to $addr3 lookup 103
ip route add $addr3/32 dev veth2 table 103
ip rule add pref 103 from $addr3 to $addr2 lookup 104
ip route add $addr2/32 dev veth3 table 104

ferry_check_route veth2 $addr3 from $addr2 || exit 1
ferry_check_route veth3 $addr2 from $addr3 || exit 1
# rxe-net.sh's pair still carries rail 0.
ferry_check_route veth0 198.18.0.2 from 198.18.0.1 || exit 1
ferry_check_route veth1 198.18.0.1 from 198.18.0.2 || exit 1

rdma link add rxe2 type rxe netdev veth2
rdma link add rxe3 type rxe netdev veth3

deadline=$((SECONDS + 10))
while [[ ! -e /sys/class/infiniband/rxe2/ports/1/gids/1 || ! -e /sys/class/infiniband/rxe3/ports/1/gids/1 ]]; do
  ((SECONDS < deadline)) || { echo "rxe-rails: rxe GIDs did not appear" >&2; exit 1; }
  sleep 0.1
done
echo "rxe-rails: rxe2 on veth2 ($addr2), rxe3 on veth3 ($addr3)"
