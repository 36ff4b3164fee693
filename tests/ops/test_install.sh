#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR: `meson install --destdir` from the
# build dir, check the layout a Debian admin expects, build the hello
# example against the *installed* libferry with pkg-config, and run it
# against the *installed* ferryd.
#
# Fault injection: the project's default leaves the test-only fault
# switches out (checked here on the source's options), and the installed
# ferryd must say exactly what its tree was configured with. build/ is a
# test tree (fault_injection on); scripts/test also runs this script on
# build-release/, a tree of the project defaults, where the installed
# ferryd must have no fault switches.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
# shellcheck source=../../scripts/lib/daemons.sh
source "$src/scripts/lib/daemons.sh"
tmp=$(mktemp -d /tmp/ferry-ops-install.XXXXXX)
dest=$tmp/dest
ferryd_pid=
cleanup() {
  if [[ -n "$ferryd_pid" ]] && kill -0 "$ferryd_pid" 2>/dev/null; then kill "$ferryd_pid"; wait "$ferryd_pid" || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --no-rebuild: meson test already built everything; never run ninja from a test.
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "meson install"; }

option() { # option DIR_OR_MESON_BUILD NAME: a build option's value (true/false for booleans)
  meson introspect "$1" --buildoptions | python3 -c 'import json,sys; v={o["name"]: o["value"] for o in json.load(sys.stdin)}[sys.argv[1]]; print(str(v).lower())' "$2"
}
prefix=$(option "$build" prefix)
[[ $(cd "$src" && option meson.build fault_injection) == false ]] || fail "the project default of fault_injection is not false"
tree_faults=$(option "$build" fault_injection)
root=$dest$prefix
[[ -x $root/sbin/ferryd ]] || fail "ferryd not in sbin"
[[ -x $root/bin/ferryctl ]] || fail "ferryctl not in bin"
for h in client.h ferry.h result.h status.h visibility.h; do [[ -f $root/include/ferry/$h ]] || fail "header include/ferry/$h"; done
lib=$(find "$dest" -name 'libferry.so.*.*' -type f | head -1)
[[ -n "$lib" ]] || fail "libferry.so.X.Y not installed"
libdir=$(dirname "$lib")
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[[ "$soname" == libferry.so.0 ]] || fail "soname '$soname', expected libferry.so.0"
[[ -L $libdir/libferry.so.0 && -L $libdir/libferry.so ]] || fail "libferry.so / libferry.so.0 symlinks"
pc=$(find "$dest" -name ferry.pc | head -1)
[[ -n "$pc" ]] || fail "ferry.pc not installed"
unit=$(find "$dest" -path '*systemd/system/ferryd.service' | head -1)
[[ -n "$unit" ]] || fail "ferryd.service not installed into a systemd/system dir"
grep -q "^ExecStart=$prefix/sbin/ferryd" "$unit" || fail "unit ExecStart does not name the installed ferryd"
if [[ -f $build/client/python/ferry-ps-shard@.service ]]; then  # a tree with the Python package
  shard_unit=$(find "$dest" -path '*systemd/system/ferry-ps-shard@.service' | head -1)
  [[ -n "$shard_unit" ]] || fail "ferry-ps-shard@.service not installed into a systemd/system dir"
  grep -q '^ExecStart=/[^ ]*python[^ ]* -m ferry.ps.server ' "$shard_unit" || fail "shard unit ExecStart"
fi
[[ -f $root/share/man/man8/ferryd.8 ]] || fail "man8/ferryd.8"
[[ -f $root/share/man/man1/ferryctl.1 ]] || fail "man1/ferryctl.1"
find "$dest" -path '*/ferry/ferryd.conf.example' | grep . >/dev/null || fail "sysconfdir/ferry/ferryd.conf.example"
[[ -f $root/share/doc/ferry/examples/ferryd.conf ]] || fail "share/doc/ferry/examples/ferryd.conf"
echo "layout ok: $(cd "$dest" && find . -type f | wc -l) files"

version=$("$root/sbin/ferryd" --version) || fail "installed ferryd --version"
echo "$version"
if [[ $tree_faults == true ]]; then
  [[ $version == *"fault injection: compiled in"* ]] || fail "tree has fault_injection on, installed ferryd says otherwise"
else
  [[ $version == *"fault injection: not compiled in"* ]] || fail "installed ferryd of a default tree has fault injection"
fi

# Build hello against the installed tree only: pkg-config with the sysroot
# rewriting the .pc's absolute paths into the destdir.
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$dest
flags=$(pkg-config --cflags --libs ferry) || fail "pkg-config ferry"
echo "pkg-config ferry: $flags"
[[ "$flags" == *"-I$dest"* && "$flags" == *"-L$dest"* && "$flags" == *-lferry* ]] || fail "flags do not point into destdir"
# shellcheck disable=SC2086 # flags are words
c++ -std=c++20 -Wall -Wextra -Werror -o "$tmp/hello" "$src/tests/ops/example/hello.cpp" $flags ||
  fail "hello does not build against the installed library"

rt=$tmp/rt
# Without fault injection an armed switch must do nothing (and ferryd says so).
fault_env=()
[[ $tree_faults == true ]] || fault_env=(FERRY_FAULT_TCP=drop-after=1)
ferry_start_daemon --prefix "env ${fault_env[*]}" --log "$tmp/ferryd.log" "$root/sbin/ferryd" "$rt" --transport tcp ||
  fail "installed ferryd did not start"
ferryd_pid=$ferry_daemon_pid
LD_LIBRARY_PATH=$libdir ldd "$tmp/hello" | grep "$libdir/libferry.so.0" >/dev/null || fail "hello does not load the installed libferry"
out=$(LD_LIBRARY_PATH=$libdir timeout 20 "$tmp/hello" --socket "$rt/ferryd.sock") || fail "hello: $out"
echo "$out"
[[ "$out" == *"reply to 'hello, ferry'"* ]] || fail "unexpected hello output"
LD_LIBRARY_PATH=$libdir "$root/bin/ferryctl" --control "$rt/control.sock" status --json | grep '"transport":"tcp"' >/dev/null ||
  fail "installed ferryctl status"
if [[ $tree_faults == false ]]; then
  grep -q "FERRY_FAULT_TCP=drop-after=1 is ignored" "$tmp/ferryd.log" || fail "ferryd did not say the fault switch is ignored"
fi
kill "$ferryd_pid"
wait "$ferryd_pid" || fail "installed ferryd exit status $?"
ferryd_pid=
echo "PASS install"
