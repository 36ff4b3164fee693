#!/usr/bin/env bash
# gid-ipv4.sh DEV ADDR NETDEV: GID index $GID_INDEX of DEV's port 1 is the
# IPv4-mapped RoCE v2 GID of ADDR, bound to NETDEV. ferry's rdma transport
# addresses peers through that index.
set -euo pipefail
dev=$1 addr=$2 netdev=$3
port=/sys/class/infiniband/$dev/ports/1
IFS=. read -r a b c d <<<"$addr"
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
gid=$(cat "$port/gids/$GID_INDEX")
type=$(cat "$port/gid_attrs/types/$GID_INDEX")
ndev=$(cat "$port/gid_attrs/ndevs/$GID_INDEX")
echo "$dev gid[$GID_INDEX]=$gid type=$type ndev=$ndev"
[[ "$gid" == "$want" ]] || { echo "expected GID $want" >&2; exit 1; }
[[ "$type" == "RoCE v2" ]] || { echo "expected RoCE v2" >&2; exit 1; }
[[ "$ndev" == "$netdev" ]] || { echo "expected netdev $netdev" >&2; exit 1; }
