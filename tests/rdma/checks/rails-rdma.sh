#!/usr/bin/env bash
# rails-rdma.sh [CASE] — several NICs per host in the VM: adds the second
# rail of each "host" (scripts/vm/rxe-rails.sh: rxe2 on veth2 = 198.18.1.1,
# rxe3 on veth3 = 198.18.1.2), then runs tests/fault/test_rdma_rails.cpp
# (default case "rail down": a rail's link goes down under traffic and comes
# back; 0 calls lost or duplicated).
set -euo pipefail
case=${1:-rail down}
exe=$FERRY_BUILD/tests/fault/fault_rdma_rails
if [[ ! -x $exe ]]; then
  echo "SKIP: $exe not built (rdma-core missing at build time?)"
  exit 77
fi
scripts/vm/rxe-rails.sh
export RXE2=rxe2 RXE3=rxe3 ADDR2=198.18.1.1 ADDR3=198.18.1.2
export FERRYD=$FERRY_BUILD/daemon/ferryd FERRYCTL=$FERRY_BUILD/control/ferryctl
exec "$exe" "$case"
