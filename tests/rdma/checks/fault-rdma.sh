#!/usr/bin/env bash
# fault-rdma.sh CASE — one fault scenario over rdma lanes between two ferryd
# in the VM (tests/fault/test_rdma_faults.cpp): "qp error" (a QP moved to
# IBV_QPS_ERR by FERRY_FAULT_RDMA: the lane is rebuilt), "packet loss" (2 %
# tc netem loss on the rxe link), "link outage" (100 % loss for 8 s),
# "link down" (veth0 down for 8 s, then up) or "memlock too low" (ferryd
# without CAP_IPC_LOCK under a 64 MiB RLIMIT_MEMLOCK: an attach is refused
# NoMemory). The fault tests print "fault-caller ...: ... recovery_ms=N
# max_call_ms=M" (emulated time).
set -euo pipefail
case=${1:?usage: fault-rdma.sh CASE}
exe=$FERRY_BUILD/tests/fault/fault_rdma
if [[ ! -x $exe ]]; then
  echo "SKIP: $exe not built (rdma-core missing at build time?)"
  exit 77
fi
export FERRYD=$FERRY_BUILD/daemon/ferryd FERRYCTL=$FERRY_BUILD/control/ferryctl
exec "$exe" "$case"
