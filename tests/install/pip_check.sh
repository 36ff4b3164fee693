#!/usr/bin/env bash
# pip_check.sh SOURCE_DIR BUILD_DIR CHECK: `pip install .` of the ferry
# package the way a PyTorch user would, then use it from outside the source
# tree against a real ferryd (BUILD_DIR/daemon/ferryd). CHECK is one of:
#   debian  a venv of Debian's /usr/bin/python3 (--system-site-packages: it
#           sees Debian's torch and numpy): pip install --no-build-isolation,
#           `import ferry, ferry.ps`, the README quickstart, and
#           `python -m ferry.ps.bench --json` (its contract after a pip install)
#   pyenv   a venv of pyenv's Python 3.12 (no numpy, no torch): pip install,
#           `import ferry`, a call through ferryd, and `import ferry.ps`
#           failing with an ImportError that names numpy
#   mypy    Debian's mypy on the examples and on the package itself, against
#           the package the debian check installed (its stubs and hints), and
#           mypy.stubtest of the installed stubs against the compiled module
# Prints "PASS|FAIL|SKIP <check> <why>" as its last line; exits 0, 1 or 77.
# Nothing reaches the network: pip runs with --no-index, meson-python and
# setuptools (distutils, which Debian 12's meson needs on Python 3.12) come
# from Debian's packages.
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
check=$3
work=${FERRY_PIP_WORK:-$build/pip-check}
ferryd=$build/daemon/ferryd
# shellcheck source=../../scripts/lib/daemons.sh
source "$src/scripts/lib/daemons.sh"

result() { echo "$1 $check $2"; [[ $1 == PASS ]] && exit 0; [[ $1 == SKIP ]] && exit 77; exit 1; }
trap ferry_stop_daemons EXIT

start_ferryd() {
  local rt=$work/rt-$check
  rm -rf "$rt"
  ferry_start_daemon --log "$work/ferryd-$check.log" "$ferryd" "$rt" --transport tcp ||
    result FAIL "ferryd did not start (log $work/ferryd-$check.log)"
  export FERRY_SOCKET=$rt/ferryd.sock
}

# pip_install VENV_PYTHON [PYTHONPATH]: builds and installs the package from the source tree.
pip_install() {
  local log=$work/pip-$check.log
  echo "pip install --no-build-isolation $src into $("$1" -c 'import sys; print(sys.prefix, sys.version.split()[0])')"
  if ! (cd "$src" && PYTHONPATH=${2:-} "$1" -m pip install --no-build-isolation --no-index -q . >"$log" 2>&1); then
    tail -40 "$log"
    result FAIL "pip install failed (log $log)"
  fi
}

mkdir -p "$work"
[[ -x $ferryd ]] || result FAIL "no ferryd at $ferryd (build it first)"

case $check in
debian)
  venv=$work/venv-debian
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv" || result FAIL "python3 -m venv (Debian: python3-venv)"
  pip_install "$venv/bin/python"
  start_ferryd
  out=$work/outside
  rm -rf "$out" && mkdir -p "$out"
  cp "$src/client/python/examples/quickstart.py" "$out/"
  cd "$out"  # nothing of the source tree on the path
  "$venv/bin/python" -c 'import ferry, ferry.ps, ferry.ps.torch, sys
assert ferry.__file__.startswith(sys.prefix), ferry.__file__
print("imported", ferry.__file__)' || result FAIL "import ferry, ferry.ps from the venv"
  OMP_NUM_THREADS=1 "$venv/bin/python" quickstart.py >"$work/quickstart.log" 2>&1 || {
    cat "$work/quickstart.log"; result FAIL "the quickstart failed"; }
  cat "$work/quickstart.log"
  "$venv/bin/python" - "$work/quickstart.log" <<'PY' || result FAIL "the quickstart did not learn"
import re, sys
losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", open(sys.argv[1]).read())]
assert len(losses) == 5 and losses[-1] < 0.5 * losses[0], losses
PY
  OMP_NUM_THREADS=1 "$venv/bin/python" -m ferry.ps.bench --workers 1 --shards 1 --keys 1000 --batch 64 --dim 8 \
    --iters 50 --warmup 5 --out "$work/bench" --json >"$work/bench.log" 2>&1 || {
    tail -20 "$work/bench.log"; result FAIL "python -m ferry.ps.bench after pip install"; }
  tail -1 "$work/bench.log" | "$venv/bin/python" -c 'import json, sys
r = json.loads(sys.stdin.read())
for k in ("pull_mean_us", "pull_p50_us", "pull_p99_us", "push_mean_us", "push_p50_us", "push_p99_us", "ops_per_s",
          "cpu_us_per_op"):
    assert k in r and r[k] > 0, (k, r.get(k))' || result FAIL "ferry.ps.bench --json lacks its contract keys"
  result PASS "venv of /usr/bin/python3: import, quickstart and ferry.ps.bench from $out"
  ;;
pyenv)
  # pyenv's 3.12 as this machine has it: FERRY_PYENV_PYTHON, else `pyenv prefix`, else PYENV_ROOT's versions.
  py=${FERRY_PYENV_PYTHON:-}
  if [[ -z $py ]] && command -v pyenv >/dev/null 2>&1; then
    p=$(pyenv prefix 3.12 2>/dev/null || true)
    [[ -n $p && -x $p/bin/python3 ]] && py=$p/bin/python3
  fi
  if [[ -z $py ]]; then
    for d in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12* /root/.pyenv/versions/3.12*; do
      [[ -x $d/bin/python3 ]] && { py=$d/bin/python3; break; }
    done
  fi
  [[ -n $py ]] || result SKIP "no pyenv Python 3.12 on this machine"
  "$py" -c 'import sys; assert sys.version_info[:2] == (3, 12)' || result FAIL "$py is not Python 3.12"
  venv=$work/venv-pyenv312
  rm -rf "$venv"
  "$py" -m venv "$venv" || result FAIL "$py -m venv"
  # Debian 12's meson introspects a Python through distutils, gone from 3.12: setuptools supplies it.
  "$venv/bin/python" -m pip install -q --no-index --find-links /usr/share/python-wheels setuptools ||
    result FAIL "setuptools from /usr/share/python-wheels (Debian: python3-setuptools-whl)"
  shim=$work/mesonpy-path  # Debian's pure-Python build backend, and nothing else of dist-packages
  rm -rf "$shim" && mkdir -p "$shim"
  for m in mesonpy pyproject_metadata packaging; do
    [[ -d /usr/lib/python3/dist-packages/$m ]] && ln -s "/usr/lib/python3/dist-packages/$m" "$shim/$m"
  done
  [[ -e $shim/mesonpy ]] || result FAIL "no meson-python (Debian: python3-mesonpy)"
  pip_install "$venv/bin/python" "$shim"
  start_ferryd
  cd "$work"
  "$venv/bin/python" - <<'PY' || result FAIL "import ferry / a call through ferryd from Python 3.12"
import os, sys
import ferry
assert ferry.__file__.startswith(sys.prefix), ferry.__file__
with ferry.attach(name="pip check server") as server, ferry.attach(name="pip check caller") as caller:
    server.serve("pip-check-echo")
    ep = caller.open("pip-check-echo")
    req, resp = caller.alloc(5), caller.alloc(64)
    memoryview(req)[:] = b"ferry"
    h = caller.call(ep, req, resp)
    d = server.recv(timeout=10)
    assert d is not None and bytes(memoryview(d)) == b"ferry"
    answer = server.alloc(len(d))
    memoryview(answer)[:] = bytes(memoryview(d))[::-1]
    server.reply(d, answer).wait(10)
    server.release(d)
    n = h.wait(10)
    assert bytes(memoryview(resp)[:n]) == b"yrref", bytes(memoryview(resp)[:n])
print("a call through ferryd from Python", sys.version.split()[0])
try:
    import ferry.ps  # noqa: F401
except ImportError as e:
    assert "numpy" in str(e), e
    print("import ferry.ps:", e)
else:
    raise SystemExit("import ferry.ps worked without numpy?")
PY
  result PASS "venv of $py: import ferry, a call through ferryd, ferry.ps names what it lacks"
  ;;
mypy)
  venv=$work/venv-debian
  [[ -x $venv/bin/python ]] || result FAIL "run the debian check first (it installs the package mypy checks against)"
  command -v mypy >/dev/null 2>&1 || result FAIL "no mypy (Debian: mypy)"
  cd "$src"
  files=(client/python/examples/quickstart.py examples/python/*.py)
  # pyproject.toml's [tool.mypy]: bodies of unannotated functions checked too.
  mypy --python-executable "$venv/bin/python" --cache-dir "$work/mypy-cache" "${files[@]}" >"$work/mypy.log" 2>&1 || {
    cat "$work/mypy.log"; result FAIL "mypy found errors in the examples"; }
  # The package's own code, against its stubs and hints.
  mypy --python-executable "$venv/bin/python" --cache-dir "$work/mypy-cache" client/python/ferry \
    >"$work/mypy-package.log" 2>&1 || { cat "$work/mypy-package.log"; result FAIL "mypy found errors in the package"; }
  # The stubs against the installed compiled module: a name in one and not the other, a wrong kind of
  # thing (tests/install/stubtest-allowlist.txt: pybind11's own ways, nothing else).
  printf '[mypy]\n' >"$work/stubtest.ini"
  (cd "$work" && "$venv/bin/python" -m mypy.stubtest --mypy-config-file "$work/stubtest.ini" \
    --allowlist "$src/tests/install/stubtest-allowlist.txt" ferry._ferry) >"$work/stubtest.log" 2>&1 || {
    cat "$work/stubtest.log"; result FAIL "the stubs of ferry._ferry differ from the module (stubtest)"; }
  result PASS "mypy on ${#files[@]} example files and the package; stubtest of ferry._ferry"
  ;;
*)
  echo "usage: pip_check.sh SOURCE_DIR BUILD_DIR debian|pyenv|mypy" >&2
  exit 2
  ;;
esac
