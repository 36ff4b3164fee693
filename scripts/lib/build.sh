# shellcheck shell=bash
# Sourced by scripts/test and scripts/demo: configures and builds meson trees.
# FERRY_REPO must be set to the repository root. FERRY_JOBS caps ninja's
# parallelism (default: the machine's cores).

ferry_jobs() { echo "${FERRY_JOBS:-$(nproc 2>/dev/null || echo 2)}"; }

# ferry_configure DIR [MESON_OPTION...]: `meson setup`, or --reconfigure when
# DIR is already a meson build dir (so changed options take effect).
ferry_configure() {
  local dir=$1 log
  shift
  log=$(mktemp)
  local -a mode=()
  # --reconfigure only on a dir meson already set up; anything else is replaced.
  if [[ -f "$dir/meson-private/coredata.dat" ]]; then mode=(--reconfigure); else rm -rf "$dir"; fi
  if ! meson setup "${mode[@]}" "$dir" "$FERRY_REPO" "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# ferry_compile DIR [TARGET...]: ninja with the configured parallelism.
ferry_compile() {
  local dir=$1
  shift
  ninja -C "$dir" -j "$(ferry_jobs)" "$@"
}

# The options of build/, the one tree scripts/demo and scripts/test share:
# with the same options, `scripts/test` after `scripts/demo` compiles
# nothing demo compiled (a changed option would recompile every file). It is
# a test tree: the fault suites run in it, so the test-only fault switches
# are compiled in (-Dfault_injection=true; the project default is off, and
# build-release/ below checks that an install of the default has none).
ferry_main_opts=(-Dwerror=true -Dfault_injection=true)

# ferry_build [--werror]: the main tree, build/ (the tools and tests land
# there), always with ferry_main_opts (--werror is accepted and implied).
ferry_build() {
  ferry_configure "$FERRY_REPO/build" "${ferry_main_opts[@]}" && ferry_compile "$FERRY_REPO/build"
}

# ferry_build_release: build-release/, the project's defaults (what a
# packager's `meson setup` gets: no fault switches) without the tests, for
# the install check (tests/ops/test_install.sh build-release).
ferry_build_release() {
  ferry_configure "$FERRY_REPO/build-release" -Dtests=disabled && ferry_compile "$FERRY_REPO/build-release"
}

# Sanitizer trees are large (UBSan's per-check data and its relocations, at
# -O0): they keep line tables only (-g1; a sanitizer's stack trace still
# names file:line) and pack their relative relocations (DT_RELR, binutils
# 2.38+ with glibc 2.36+, both in Debian 12), together about half the disk.
# A fresh CI machine may have only a few GiB free.
ferry_sanitizer_opts=(-Dcpp_args=-g1 -Dcpp_link_args=-Wl,-z,pack-relative-relocs)

# ferry_build_asan SUITE...: build-asan/ under AddressSanitizer and
# UndefinedBehaviorSanitizer (gcc), only what SUITE...'s tests run: their
# executables and the programs they depend on (ferryd, ferryctl, ...). The
# rest of the tree is built and tested in build/.
ferry_build_asan() {
  local dir=$FERRY_REPO/build-asan
  ferry_configure "$dir" -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debug -Dwerror=true "${ferry_sanitizer_opts[@]}" || return 1
  local -a targets
  local suite
  mapfile -t targets < <(for suite in "$@"; do ferry_test_list "$dir" suite "$suite" target; done | sort -u)
  [[ ${#targets[@]} -eq 0 ]] || ferry_compile "$dir" "${targets[@]}"
}

# ferry_build_fuzz: build-fuzz/, clang with ASan/UBSan for the libFuzzer
# targets (tests/fuzz, suite 'fuzz'). Only those targets are built: the rest
# of the tree is covered by build/ and build-asan/. A tree without fuzzers
# yet builds nothing.
ferry_build_fuzz() {
  command -v clang++ >/dev/null || { echo "build: clang++ missing, no fuzz tree" >&2; return 1; }
  local dir=$FERRY_REPO/build-fuzz
  CXX=clang++ CC=clang ferry_configure "$dir" -Db_sanitize=address,undefined -Db_lundef=false || return 1
  local -a targets
  mapfile -t targets < <(ferry_test_list "$dir" suite fuzz target)
  [[ ${#targets[@]} -eq 0 ]] || ferry_compile "$dir" "${targets[@]}"
}

# ferry_build_tsan_targets REGEX: build-tsan/ under ThreadSanitizer, but only
# the test executables whose meson test name matches REGEX (the lock-free
# rings): building the whole tree a fourth time would not be cheap.
ferry_build_tsan_targets() {
  local dir=$FERRY_REPO/build-tsan
  ferry_configure "$dir" -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debug \
    "${ferry_sanitizer_opts[@]}" || return 1
  local -a targets
  mapfile -t targets < <(ferry_test_list "$dir" name "$1" target)
  [[ ${#targets[@]} -eq 0 ]] || ferry_compile "$dir" "${targets[@]}"
}

# ferry_test_list DIR suite|name PATTERN name|target: meson tests of DIR in
# suite PATTERN (or whose name matches the regex PATTERN), printed as test
# names or as the ninja targets they need: their executables and the targets
# they depend on (a test's `depends:`, e.g. the ferryd it starts), each once.
ferry_test_list() {
  python3 - "$@" <<'PY'
import json, os, re, sys
d, by, pattern, what = sys.argv[1:]
d = os.path.abspath(d)
info = os.path.join(d, 'meson-info')
def load(name):
    p = os.path.join(info, name)
    return json.load(open(p)) if os.path.exists(p) else []
files_of = {t['id']: t['filename'] for t in load('intro-targets.json')}
out = []
for t in load('intro-tests.json'):
    if by == 'suite':
        hit = pattern in [s.split(':', 1)[-1] for s in t['suite']]
    else:
        hit = re.search(pattern, t['name']) is not None
    if not hit:
        continue
    if what == 'name':
        out.append(t['name'])
        continue
    paths = [t['cmd'][0]]
    for dep in t.get('depends', []):
        paths += files_of.get(dep, [])
    out += [os.path.relpath(p, d) for p in paths if p.startswith(d + '/')]
for line in dict.fromkeys(out):
    print(line)
PY
}

# ferry_suites DIR: the test suites DIR defines (without the project prefix).
ferry_suites() {
  python3 - "$1" <<'PY'
import json, os, sys
p = os.path.join(sys.argv[1], 'meson-info', 'intro-tests.json')
suites = set()
if os.path.exists(p):
    for t in json.load(open(p)):
        for s in t['suite']:
            suites.add(s.split(':', 1)[-1])
print('\n'.join(sorted(suites)))
PY
}
