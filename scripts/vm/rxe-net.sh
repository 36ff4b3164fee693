#!/usr/bin/env bash
# rxe-net.sh — run INSIDE the Soft-RoCE VM (as root). Builds two "hosts" in
# one guest: veth0 (198.18.0.1, rdma device rxe0) and veth1 (198.18.0.2,
# rxe1). Kernel 6.1 rxe has no netns support and would route traffic between
# two local addresses through lo, so policy routing forces it across the veth
# pair (docs/testing.md, "The Soft-RoCE VM"). Idempotent: does nothing if
# rxe0 and rxe1 already exist.
set -euo pipefail

[[ "${FERRY_IN_VM:-}" == 1 ]] || { echo "rxe-net: refusing to run outside the VM" >&2; exit 2; }
# shellcheck source=scripts/lib/net.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/net.sh"

# A lossless link, as a RoCE fabric with PFC is: rxe sends a whole RDMA READ
# response at once (1 MiB = 1024 packets at MTU 1024), unpaced, and veth
# drops past netdev_max_backlog (1000); rxe then counts each failed
# READ-response send as send_rnr_err (rxe_resp.c read_reply) although no
# receive queue ran dry, and the READ waits for a retry timeout.
echo 1000000 >/proc/sys/net/core/netdev_max_backlog

addr0=198.18.0.1 # benchmarking range (RFC 2544): never routed off the machine
addr1=198.18.0.2

if rdma link show rxe0/1 >/dev/null 2>&1 && rdma link show rxe1/1 >/dev/null 2>&1; then
  exit 0
fi

ip link add veth0 type veth peer name veth1
ip link set veth0 up
ip link set veth1 up
ip addr add $addr0/32 dev veth0
ip addr add $addr1/32 dev veth1

# Written directly: the host root may lack procps' sysctl.
for dev in all veth0 veth1; do echo 0 >/proc/sys/net/ipv4/conf/$dev/rp_filter; done
for dev in veth0 veth1; do echo 1 >/proc/sys/net/ipv4/conf/$dev/accept_local; done

ip rule add pref 90 iif veth0 lookup local
ip rule add pref 91 iif veth1 lookup local
ip rule add pref 100 from $addr0 to $addr1 lookup 101
ip route add $addr1/32 dev veth0 table 101
ip rule add pref 101 from $addr1 to $addr0 lookup 102
ip route add $addr0/32 dev veth1 table 102
ip rule add pref 1000 lookup local
ip rule del pref 0

# Before any traffic: each direction must leave through its own veth.
ferry_check_route veth0 $addr1 from $addr0 || exit 1
ferry_check_route veth1 $addr0 from $addr1 || exit 1

rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1

# The GIDs appear asynchronously once the devices exist: wait with a deadline.
deadline=$((SECONDS + 10))
while [[ ! -e /sys/class/infiniband/rxe1/ports/1/gids/1 || ! -e /sys/class/infiniband/rxe0/ports/1/gids/1 ]]; do
  ((SECONDS < deadline)) || { echo "rxe-net: rxe GIDs did not appear" >&2; exit 1; }
  sleep 0.1
done
echo "rxe-net: rxe0 on veth0 ($addr0), rxe1 on veth1 ($addr1)"
