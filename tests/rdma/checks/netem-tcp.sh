#!/usr/bin/env bash
# netem-tcp.sh — the tcp packet-loss fault test (tests/fault/test_netem_loss.cpp:
# 5 % tc netem loss on both veths between two network namespaces, every call
# Ok) inside the VM, whose kernel has sch_netem (loaded by build-vm.sh) where
# the build machine's may not. Namespaces and addresses are the test's own.
set -euo pipefail
exe=$FERRY_BUILD/tests/fault/fault_netem_loss
if [[ ! -x $exe ]]; then
  echo "SKIP: $exe not built"
  exit 77
fi
export FERRYD=$FERRY_BUILD/daemon/ferryd FERRYCTL=$FERRY_BUILD/control/ferryctl FERRY_MH_NET=netns
exec "$exe"
