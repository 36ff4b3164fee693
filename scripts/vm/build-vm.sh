#!/usr/bin/env bash
# Builds the Soft-RoCE test VM: a Debian 6.1 kernel (downloaded, never
# installed on the host) plus a busybox-static initramfs that loads rdma_rxe
# and its dependencies, mounts the host root read-only over 9p and runs one
# command in it. See docs/testing.md ("The Soft-RoCE VM") for why it is
# shaped this way.
#
# Output (reused when present): .vm-cache/vmlinuz, .vm-cache/initramfs.gz,
# .vm-cache/kernel-version. Prints the cache folder on success. The kernel
# package (.deb, ~70 MB) stays in the cache; its unpacked tree (~400 MB) is
# removed once the initramfs is built and unpacked again only when the init
# script changes. Packages of other kernels are removed.
# Exit status: 0 built or reused; 2 cannot build (no kernel package
# reachable, missing tool), with the reason on stderr.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${FERRY_VM_CACHE:-$repo/.vm-cache}
init_src=$repo/scripts/vm/guest-init.sh

# Load order: `modprobe --show-depends` against the unpacked tree.
# crc32_generic is not a hard dependency of rdma_rxe, but without it rxe
# fails with "failed to init crc32 algorithm".
modules=(crc32_generic virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
  virtio_pci 9pnet 9pnet_virtio netfs fscache 9p udp_tunnel ip6_udp_tunnel
  ib_core ib_uverbs rdma_rxe configfs ib_cm iw_cm rdma_cm rdma_ucm veth sch_netem bridge)

die() { echo "build-vm: $*" >&2; exit 2; }

for tool in apt-get apt-cache dpkg-deb depmod modprobe cpio gzip busybox; do
  command -v "$tool" >/dev/null 2>&1 || [[ -x /sbin/$tool || -x /usr/sbin/$tool ]] ||
    die "missing tool '$tool' (scripts/lib/deps.sh installs it)"
done
# busybox-static's binary: the initramfs has no libc to link against.
busybox_bin=/bin/busybox
[[ -x $busybox_bin ]] || busybox_bin=$(command -v busybox || true)
[[ -x "$busybox_bin" ]] || die "busybox-static not installed"

mkdir -p "$cache"

# Which kernel: the one linux-image-amd64 currently depends on.
resolve_kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/{print $2; exit}'
}
pkg=$(resolve_kernel_pkg || true)
if [[ -z "$pkg" ]]; then
  # A fresh machine may have empty package lists.
  apt-get update -q >/dev/null 2>&1 || true
  pkg=$(resolve_kernel_pkg || true)
fi
if [[ -z "$pkg" ]]; then
  # Offline but cached: keep using what we have.
  if [[ -s $cache/vmlinuz && -s $cache/initramfs.gz ]]; then
    echo "$cache"; exit 0
  fi
  die "cannot resolve linux-image-amd64's kernel package (no apt lists / no mirror)"
fi
kver=${pkg#linux-image-}

# The stamp covers the kernel and the init script, so editing the init rebuilds.
stamp="$kver $(cat "$init_src" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)"
if [[ -s $cache/vmlinuz && -s $cache/initramfs.gz && "$(cat "$cache/stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "$cache"; exit 0
fi

deb=$(ls "$cache"/"${pkg}"_*.deb 2>/dev/null | head -n1 || true)
if [[ -z "$deb" ]]; then
  echo "build-vm: downloading $pkg" >&2
  # apt-get download writes into the current folder; _apt cannot always write
  # there, which only costs a warning.
  (cd "$cache" && apt-get download -q "$pkg" >&2) || die "apt-get download $pkg failed (no mirror?)"
  deb=$(ls "$cache"/"${pkg}"_*.deb 2>/dev/null | head -n1 || true)
  [[ -n "$deb" ]] || die "apt-get download $pkg produced no .deb"
fi

tree=$cache/kernel-$kver
if [[ ! -f $tree/lib/modules/$kver/modules.dep ]]; then
  rm -rf "$tree"
  mkdir -p "$tree"
  dpkg-deb -x "$deb" "$tree" || die "dpkg-deb -x $deb failed"
  PATH=$PATH:/sbin:/usr/sbin depmod -b "$tree" "$kver" || die "depmod failed"
fi
cp "$tree/boot/vmlinuz-$kver" "$cache/vmlinuz.tmp" && mv "$cache/vmlinuz.tmp" "$cache/vmlinuz"

# Resolve each module (and anything it depends on) to a file, in load order.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,dev,proc,sys,host,results,lib/modules,tmp}
declare -A seen=()
: >"$root/modules.list"
for m in "${modules[@]}"; do
  out=$(PATH=$PATH:/sbin:/usr/sbin modprobe -d "$tree" -S "$kver" --show-depends "$m" 2>&1) ||
    die "module $m not found in $kver: $out"
  while read -r kind path _; do
    [[ "$kind" == insmod ]] || continue # "builtin X" lines need nothing
    name=$(basename "$path")
    name=${name%.xz}; name=${name%.zst}; name=${name%.gz}
    [[ -n "${seen[$name]:-}" ]] && continue
    seen[$name]=1
    # busybox insmod cannot load compressed modules: unpack on the host.
    case "$path" in
      *.ko.xz) xz -dc "$path" >"$root/lib/modules/$name" ;;
      *.ko.zst) zstd -dc "$path" >"$root/lib/modules/$name" ;;
      *.ko.gz) gzip -dc "$path" >"$root/lib/modules/$name" ;;
      *) cp "$path" "$root/lib/modules/$name" ;;
    esac
    echo "$name" >>"$root/modules.list"
  done <<<"$out"
done

cp "$busybox_bin" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
install -m 0755 "$init_src" "$root/init"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -9 >"$cache/initramfs.gz.tmp"
mv "$cache/initramfs.gz.tmp" "$cache/initramfs.gz"
echo "$kver" >"$cache/kernel-version"
echo "$stamp" >"$cache/stamp"
rm -rf "$tree"
for stale in "$cache"/linux-image-*.deb "$cache"/kernel-[0-9]*; do
  [[ -e $stale && $stale != "$deb" ]] && rm -rf "$stale"
done
echo "build-vm: kernel $kver, $(wc -l <"$root/modules.list") modules in initramfs" >&2
echo "$cache"
