#!/bin/sh
# /init of the guest's initramfs (busybox). Mounts the host's / read-only over
# 9p under a tmpfs overlay, the per-run directory (and RXE_VM_RW directories)
# read-write, loads the RDMA modules, binds the Debian kernel's modules at
# /lib/modules and hands over to guest-run.sh inside the host's filesystem.
# Arguments come from the kernel command line: ibdt.run=DIR ibdt.stage2=SCRIPT
# ibdt.modules=DIR.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
run= ; stage2= ; modules=
for arg in $(cat /proc/cmdline); do
  case $arg in
    ibdt.run=*) run=${arg#ibdt.run=} ;;
    ibdt.stage2=*) stage2=${arg#ibdt.stage2=} ;;
    ibdt.modules=*) modules=${arg#ibdt.modules=} ;;
  esac
done
die() {
  echo "rxe-vm guest init: $*" > /dev/ttyS0
  poweroff -f
  sleep 5
  echo o > /proc/sysrq-trigger
}
for module in $(cat /early-modules); do modprobe "$module" || die "modprobe $module failed"; done
options=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$options,ro,cache=loose" hostroot /lower || die "cannot mount the host root"
mount -t tmpfs -o mode=755 tmpfs /overlay || die "tmpfs"
mkdir -p /overlay/upper /overlay/work
mount -t overlay -o lowerdir=/lower,upperdir=/overlay/upper,workdir=/overlay/work overlay /newroot || die "overlay"
[ -n "$run" ] && [ -n "$stage2" ] && [ -n "$modules" ] || die "missing ibdt.run/ibdt.stage2/ibdt.modules"
mkdir -p "/newroot$run"
mount -t 9p -o "$options,rw,cache=none" run "/newroot$run" || die "cannot mount the run directory"
index=0
while read -r dir; do
  [ -n "$dir" ] || continue
  mkdir -p "/newroot$dir"
  mount -t 9p -o "$options,rw,cache=none" "rw$index" "/newroot$dir" || die "cannot mount $dir"
  index=$((index + 1))
done < "/newroot$run/rw-dirs"
# Loading from the initramfs is much faster than through 9p; guest-run.sh checks the result.
for module in $(cat /rdma-modules); do
  if [ "$module" = dummy ]; then modprobe dummy numdummies=0; else modprobe "$module"; fi
done
kver=$(uname -r)
mkdir -p "/newroot/lib/modules/$kver"
mount -o bind "/newroot$modules" "/newroot/lib/modules/$kver" || die "cannot bind the kernel modules"
umount /proc /sys /dev
exec switch_root /newroot /bin/bash "$stage2" "$run"
