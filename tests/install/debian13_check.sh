#!/usr/bin/env bash
# debian13_check.sh SOURCE_DIR BUILD_DIR: the Python package under the
# toolchain a pip user has today rather than Debian 12's: Python 3.13, numpy
# 2, meson-python 0.17 and torch 2.6 from Debian 13, in a chroot that
# debootstrap makes from Debian's mirror, with the extension built against
# Debian 12's pybind11 2.10 (the oldest the package takes; its numpy layer
# reads numpy 1's struct layout, which numpy 2 changed). In that chroot:
#   pip install --no-build-isolation of the working tree into a venv
#   the Python suites (tests/python, with that venv's python; but the two
#     tests of a meson install for Debian 12's python3, the torchrun test,
#     whose launcher Debian 13's torch cannot start, and the GPU test,
#     which needs a GPU: its CPU-only check runs)
#   examples/python/gpu_train.py --device cpu, one trainer, ferry.ps against
#     torch.distributed.rpc: ferry's loss must fall as rpc's does
# The suites and the run failed before the numpy fix, as on the lent GPU
# machine (docs/benchmarks/gpu-training.md); the pip install failed before
# the package stopped splitting itself between purelib and platlib; and
# ferry.ps.store could not reach a store before it took a torch without libuv.
# ferryd and ferryctl are BUILD_DIR's, carried into the chroot with their
# libraries and loader. Root only; every mount lives in a private mount namespace, so
# nothing stays mounted. The chroot is kept in $FERRY_DEBIAN13_ROOT (default
# BUILD_DIR/debian13-root) and reused. Last line "PASS|FAIL|SKIP debian13
# why"; exits 0, 1 or 77.
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
root=${FERRY_DEBIAN13_ROOT:-$build/debian13-root}
mirror=${FERRY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$build/debian13-check
log=$work/log

result() { echo "$1 debian13 $2"; [[ $1 == PASS ]] && exit 0; [[ $1 == SKIP ]] && exit 77; exit 1; }

[[ $(id -u) -eq 0 ]] || result SKIP "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || result SKIP "no debootstrap (Debian: debootstrap)"
for b in daemon/ferryd control/ferryctl; do
  [[ -x $build/$b ]] || result FAIL "no $b in $build (build it first)"
done
mkdir -p "$work"

packages=python3-dev,python3-venv,python3-pip,python3-numpy,python3-torch,python3-mesonpy,python3-pytest
packages+=,g++,meson,ninja-build,pkg-config,libboost-dev,libspdlog-dev
if [[ ! -e $root/.ferry-ready ]]; then
  if [[ -e $root ]]; then  # a debootstrap that did not finish; nothing is mounted there (private namespaces)
    findmnt -rn -o TARGET | grep -q "^$root" && result FAIL "something is mounted under $root"
    rm -rf "$root"
  fi
  free_mib=$(df -Pm "$(dirname "$root")" | awk 'NR == 2 { print $4 }')
  [[ ${free_mib:-0} -ge 2560 ]] || result SKIP "the chroot needs about 2.5 GiB free (${free_mib:-?} MiB under $(dirname "$root"))"
  echo "debootstrap trixie into $root (Debian's mirror, a few minutes)"
  timeout 1200 debootstrap --variant=minbase --include="$packages" trixie "$root" "$mirror" >"$log-debootstrap" 2>&1 ||
    { tail -5 "$log-debootstrap"; result SKIP "debootstrap of Debian 13 failed (no mirror?): $log-debootstrap"; }
  # Debian 12's pybind11 (2.10) in place of Debian 13's: the one the GPU bundle was built with.
  (cd "$work" && rm -f pybind11-dev_*.deb && apt-get download -q pybind11-dev >/dev/null 2>&1) ||
    result SKIP "apt-get download pybind11-dev (Debian 12's) failed"
  cp "$work"/pybind11-dev_*.deb "$root/tmp/"
  chroot "$root" sh -c 'dpkg -i /tmp/pybind11-dev_*.deb && rm /tmp/pybind11-dev_*.deb && apt-get clean' \
    >"$log-pybind11" 2>&1 || result FAIL "dpkg -i pybind11-dev"  # clean: the downloaded packages (0.3 GiB) go
  touch "$root/.ferry-ready"
fi

# The working tree (tracked and untracked files that git does not ignore) at /src in the chroot.
rm -rf "$root/src" && mkdir -p "$root/src"
(cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$root/src"
# ferryd and ferryctl with the libraries and loader they were linked against, in /usr/local/bin.
carried=$root/opt/ferry
rm -rf "$carried" && mkdir -p "$carried"
for b in daemon/ferryd control/ferryctl; do
  cp "$build/$b" "$carried/"
  ldd "$build/$b" | awk '/=>/ && $3 ~ /^\// {print $3} /ld-linux/ {print $1}'
  printf '#!/bin/sh\nexec /opt/ferry/ld-linux-x86-64.so.2 --library-path /opt/ferry /opt/ferry/%s "$@"\n' \
    "${b#*/}" >"$root/usr/local/bin/${b#*/}"
  chmod +x "$root/usr/local/bin/${b#*/}"
done | sort -u | while read -r l; do cp -L "$l" "$carried/"; done

cat >"$root/tmp/check.sh" <<'SH'
set -eu
fail() { echo "FAIL: $*"; exit 1; }
echo "python $(python3 -c 'import sys; print(sys.version.split()[0])'), numpy $(python3 -c 'import numpy; print(numpy.__version__)')," \
  "torch $(python3 -c 'import torch; print(torch.__version__)'), meson-python $(python3 -c 'import mesonpy; print(mesonpy.__version__)')," \
  "pybind11 $(pkg-config --modversion pybind11)"
case $(pkg-config --modversion pybind11) in 2.10.*) ;; *) fail "pybind11 is not Debian 12's 2.10";; esac
rm -rf /venv && python3 -m venv --system-site-packages /venv
cd /src && /venv/bin/pip install --no-build-isolation --no-index -q . >/tmp/pip.log 2>&1 || { tail -30 /tmp/pip.log; fail "pip install"; }
cd /tmp
/venv/bin/python -c 'import ferry, sys; assert ferry.__file__.startswith("/venv/"), ferry.__file__'
export FERRYD=/usr/local/bin/ferryd FERRYCTL=/usr/local/bin/ferryctl OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
# Debian's torch is built without libuv: torch's own launcher and rpc take the other store (USE_LIBUV=0).
export USE_LIBUV=0
cd /src/tests/python
timeout 1200 /venv/bin/python -m pytest -q -p no:cacheprovider -o console_output_style=classic \
  test_binding.py test_ps.py test_arrays.py test_training.py test_examples.py test_hardening.py test_restart.py test_sizes.py \
  test_modules.py test_checkpoint.py test_table_files.py test_shard_saves.py test_gpu_train.py \
  -k 'not test_meson_install_puts_the_package_on_debian_pythons_path and not test_ps_bench_entry_finds_its_examples_after_meson_install' \
  >/tmp/pytest.log 2>&1 ||
  { grep -E '^(FAILED|E  )' /tmp/pytest.log | head -40; fail "the Python suites: $(tail -1 /tmp/pytest.log)"; }
echo "suites: $(tail -1 /tmp/pytest.log)"
# test_torchrun.py stays out: Debian 13's torchrun cannot start (its static rendezvous asks for libuv,
# whatever USE_LIBUV says). What ferry does there, a store client on a torch without libuv, is checked here.
timeout 60 /venv/bin/python - <<'PY' || fail "ferry.ps.store on a torch without libuv"
import socket
from ferry.ps import store
s = socket.socket()
s.bind(("127.0.0.1", 0))
address = "127.0.0.1:%d" % s.getsockname()[1]
s.close()
master = store.connect(address, 10, is_master=True, world_size=1)
store.connect(address, 10).set("ferry", "ok")
assert master.get("ferry") == b"ok"
print("ferry.ps.store: a store and a client of it on a torch without libuv")
PY
timeout 180 /venv/bin/python test_gpu.py test_a_cpu_only_torch_imports_the_gpu_path_and_refuses_cuda_clearly ||
  fail "test_gpu.py's CPU-only check"
cd /tmp
timeout 600 /venv/bin/python /src/examples/python/gpu_train.py --device cpu \
  --systems ferry torch-rpc --trainers 1 --steps 300 --ferryd /usr/local/bin/ferryd --out /tmp/gpu_train --json \
  >/tmp/gpu_train.log 2>&1 || { tail -30 /tmp/gpu_train.log; fail "gpu_train.py"; }
grep -E '^(ferry|torch-rpc) ' /tmp/gpu_train.log
tail -1 /tmp/gpu_train.log | /venv/bin/python -c '
import json, sys
by = {r["system"]: r for r in json.loads(sys.stdin.read())["results"]}
f, t = by["ferry"], by["torch-rpc"]
assert f["loss"] < 0.5 * f["first_loss"], "ferry did not learn: loss %.4f, first fifth %.4f" % (f["loss"], f["first_loss"])
assert f["loss"] < 1.5 * t["loss"], "ferry loss %.4f against torch-rpc %.4f" % (f["loss"], t["loss"])
print("ferry loss %.4f (first fifth %.4f), torch-rpc %.4f" % (f["loss"], f["first_loss"], t["loss"]))'
SH

echo "in the Debian 13 chroot $root: pip install, the Python suites, gpu_train.py --device cpu"
# shellcheck disable=SC2016  # expanded by the inner sh
if ! unshare --mount --propagation private sh -c '
    root=$1
    mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" && mount --rbind /sys "$root/sys" &&
    exec chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 sh /tmp/check.sh' sh "$root" \
    >"$log" 2>&1; then
  tail -40 "$log"
  result FAIL "$(grep '^FAIL' "$log" | tail -1 | cut -c7-) (log $log)"
fi
cat "$log"
result PASS "$(grep '^python ' "$log" | cut -d, -f1-2): pip install, $(grep '^suites: ' "$log" | cut -c9-), $(tail -1 "$log")"
