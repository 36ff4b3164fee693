#!/usr/bin/env bash
# debian13_check.sh SOURCE_DIR BUILD_DIR: the Python package under the
# toolchain a pip user has today rather than Debian 12's: Python 3.13, numpy
# 2, meson-python 0.17 and torch 2.6 from Debian 13, in a chroot that
# debootstrap makes from Debian's mirror, with the extension built against
# Debian 12's pybind11 2.10 (the oldest the package takes; its numpy layer
# reads numpy 1's struct layout, which numpy 2 changed). In that chroot:
#   pip install --no-build-isolation of the working tree into a venv
#   tests/python/test_arrays.py: every array the extension makes, element by
#     element, under numpy 2
#   examples/python/gpu_train.py --device cpu, one trainer, ferry.ps against
#     torch.distributed.rpc: ferry's loss must fall as rpc's does
# Both failed before the numpy fix, in the same way as on the lent GPU
# machine (docs/benchmarks/gpu-training.md); the pip install failed before
# the package stopped splitting itself between purelib and platlib.
# ferryd is BUILD_DIR's, carried into the chroot with its own libraries and
# loader. Root only; every mount lives in a private mount namespace, so
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
[[ -x $build/daemon/ferryd ]] || result FAIL "no ferryd at $build/daemon/ferryd (build it first)"
mkdir -p "$work"

packages=python3-dev,python3-venv,python3-pip,python3-numpy,python3-torch,python3-mesonpy
packages+=,g++,meson,ninja-build,pkg-config,libboost-dev,libspdlog-dev
if [[ ! -e $root/.ferry-ready ]]; then
  if [[ -e $root ]]; then  # a debootstrap that did not finish; nothing is mounted there (private namespaces)
    findmnt -rn -o TARGET | grep -q "^$root" && result FAIL "something is mounted under $root"
    rm -rf "$root"
  fi
  echo "debootstrap trixie into $root (Debian's mirror, a few minutes)"
  timeout 1200 debootstrap --variant=minbase --include="$packages" trixie "$root" "$mirror" >"$log-debootstrap" 2>&1 ||
    { tail -5 "$log-debootstrap"; result SKIP "debootstrap of Debian 13 failed (no mirror?): $log-debootstrap"; }
  # Debian 12's pybind11 (2.10) in place of Debian 13's: the one the GPU bundle was built with.
  (cd "$work" && rm -f pybind11-dev_*.deb && apt-get download -q pybind11-dev >/dev/null 2>&1) ||
    result SKIP "apt-get download pybind11-dev (Debian 12's) failed"
  cp "$work"/pybind11-dev_*.deb "$root/tmp/"
  chroot "$root" sh -c 'dpkg -i /tmp/pybind11-dev_*.deb' >"$log-pybind11" 2>&1 || result FAIL "dpkg -i pybind11-dev"
  touch "$root/.ferry-ready"
fi

# The working tree (tracked and untracked files that git does not ignore) at /src in the chroot.
rm -rf "$root/src" && mkdir -p "$root/src"
(cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$root/src"
# ferryd with the libraries and loader it was linked against, as /usr/local/bin/ferryd.
carried=$root/opt/ferryd
rm -rf "$carried" && mkdir -p "$carried"
cp "$build/daemon/ferryd" "$carried/"
ldd "$build/daemon/ferryd" | awk '/=>/ && $3 ~ /^\// {print $3} /ld-linux/ {print $1}' | sort -u |
  while read -r l; do cp -L "$l" "$carried/"; done
cat >"$root/usr/local/bin/ferryd" <<'SH'
#!/bin/sh
exec /opt/ferryd/ld-linux-x86-64.so.2 --library-path /opt/ferryd /opt/ferryd/ferryd "$@"
SH
chmod +x "$root/usr/local/bin/ferryd"

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
FERRYD=/usr/local/bin/ferryd timeout 300 /venv/bin/python /src/tests/python/test_arrays.py || fail "test_arrays"
# Debian's torch is built without libuv: torch.distributed's store takes the other implementation.
USE_LIBUV=0 OMP_NUM_THREADS=1 timeout 600 /venv/bin/python /src/examples/python/gpu_train.py --device cpu \
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

echo "in the Debian 13 chroot $root: pip install, test_arrays.py, gpu_train.py --device cpu"
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
result PASS "$(grep '^python ' "$log" | cut -d, -f1-2): pip install, test_arrays, $(tail -1 "$log")"
