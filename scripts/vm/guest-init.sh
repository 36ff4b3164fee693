#!/bin/sh
# /init of the Soft-RoCE test VM (busybox sh, packed by build-vm.sh).
# Loads the modules, mounts the host root read-only (9p "hostroot"), the
# repository read-only (9p "repo") and the writable results share (9p
# "results"), each at the host's own path of that folder,
# runs RESULTS/cmd.sh chrooted into the host root, writes its exit status to
# RESULTS/exit-status and powers off. Any failure before the command runs
# writes a status of 125 ("the VM, not the test, failed").
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

results= repo=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    ferry.results=*) results=${arg#ferry.results=} ;;
    ferry.repo=*) repo=${arg#ferry.repo=} ;;
  esac
done

halt_now() {
  sync
  poweroff -f
  reboot -f # with qemu -no-reboot this exits too, should poweroff lack ACPI
}

for m in $(cat /modules.list); do
  insmod "/lib/modules/$m" || echo "ferry-vm: insmod $m failed" >&2
done

opts=trans=virtio,version=9p2000.L,msize=262144
# The host root is read-only to us and nothing we run depends on seeing host
# writes made during the run, so the guest may cache it: uncached 9p costs a
# round trip through the emulator per lookup and read, which made every
# command start take seconds.
if ! mount -t 9p -o "$opts,ro,cache=loose" hostroot /host; then
  echo "ferry-vm: cannot mount the host root over 9p" >&2
  halt_now
fi
if ! mount -t 9p -o "$opts" results /results; then
  echo "ferry-vm: cannot mount the results share" >&2
  halt_now
fi
if [ -z "$results" ]; then
  echo "ferry-vm: no ferry.results= on the kernel command line" >&2
  echo 125 >/results/exit-status
  halt_now
fi

h=/host
mount -t proc proc $h/proc
mount -t sysfs sysfs $h/sys
mount -t devtmpfs devtmpfs $h/dev
mkdir -p $h/dev/shm $h/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $h/dev/shm
mount -t devpts devpts $h/dev/pts 2>/dev/null
# devtmpfs lacks these; bash process substitution needs /dev/fd.
ln -sf /proc/self/fd $h/dev/fd
ln -sf /proc/self/fd/0 $h/dev/stdin
ln -sf /proc/self/fd/1 $h/dev/stdout
ln -sf /proc/self/fd/2 $h/dev/stderr
mount -t tmpfs -o mode=1777 tmpfs $h/tmp
mount -t tmpfs -o mode=0755 tmpfs $h/run
# The repository the command runs from, at its host path: under /tmp or /run
# the host root's copy is hidden by the tmpfs mounts above. Before
# the results share, which may live inside the repository (build/...).
if [ -n "$repo" ]; then
  mkdir -p "$h$repo" 2>/dev/null
  if ! mount -t 9p -o "$opts,ro,cache=loose" repo "$h$repo"; then
    echo "ferry-vm: cannot mount the repository share at $repo" >&2
    echo 125 >/results/exit-status
    halt_now
  fi
fi
# The results folder appears at its host path; under /tmp or /run (now tmpfs)
# its mount point has to be made first.
mkdir -p "$h$results" 2>/dev/null
if ! mount --bind /results "$h$results"; then
  echo "ferry-vm: cannot mount the results share at $results" >&2
  echo 125 >/results/exit-status
  halt_now
fi
mount -t configfs configfs $h/sys/kernel/config 2>/dev/null
ip link set lo up

chroot $h /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/tmp TERM=dumb LANG=C.UTF-8 FERRY_IN_VM=1 FERRY_VM_RESULTS="$results" \
  /bin/sh "$results/cmd.sh"
echo $? >/results/exit-status
halt_now
