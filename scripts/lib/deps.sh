# shellcheck shell=bash
# Sourced by scripts/test and scripts/demo: installs the Debian 12 packages
# ferry needs, touching apt only when something is actually missing (so a
# developer machine with everything present never waits on the network).

# Build, test, VM and plotting tools. The VM kernel (linux-image-*) is NOT here:
# scripts/vm/build-vm.sh downloads and unpacks it into .vm-cache/ instead of
# installing it on the host.
FERRY_DEB_PACKAGES=(
  g++ meson ninja-build pkg-config git ca-certificates
  libboost-dev libboost-program-options-dev libspdlog-dev catch2
  libibverbs-dev librdmacm-dev rdma-core ibverbs-utils ibverbs-providers
  perftest rdmacm-utils iproute2
  clang clang-format libclang-rt-14-dev
  python3
  qemu-system-x86 seabios busybox-static kmod cpio xz-utils gzip
  gnuplot-nox systemd
  python3-torch python3-numpy pybind11-dev python3-dev python3-pytest python3-matplotlib
  libfabric-bin
)

# ferry_missing_packages PKG... : prints the names whose dpkg status is not
# "install ok installed".
ferry_missing_packages() {
  local pkg status
  for pkg in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != "install ok installed" ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

# ferry_install_deps [PKG...] : installs the missing ones of PKG... (default:
# FERRY_DEB_PACKAGES). Runs apt-get update once, only when needed.
ferry_install_deps() {
  local -a want=("$@")
  if [[ ${#want[@]} -eq 0 ]]; then want=("${FERRY_DEB_PACKAGES[@]}"); fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: not a Debian system (no dpkg-query); install ${want[*]} by hand" >&2
    return 1
  fi
  local -a missing
  mapfile -t missing < <(ferry_missing_packages "${want[@]}")
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "deps: all ${#want[@]} packages present"
    return 0
  fi
  echo "deps: installing ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
      echo "deps: need root (or sudo) to install: ${missing[*]}" >&2
      return 1
    fi
  fi
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# libcrypto (OpenSSL 3): SHA-256 and HMAC for peer authentication (transport/wire/hmac_sha256.cpp).
FERRY_DEB_PACKAGES+=(libssl-dev)
# pip install of the Python package into venvs (tests/install/pip_check.sh): meson-python, venv,
# setuptools' wheel (distutils for meson on pyenv's 3.12) and mypy for the examples.
FERRY_DEB_PACKAGES+=(python3-mesonpy python3-venv python3-setuptools-whl python3-pip-whl mypy)
# The package under Debian 13's numpy 2 and meson-python, in a chroot (tests/install/debian13_check.sh).
FERRY_DEB_PACKAGES+=(debootstrap)
