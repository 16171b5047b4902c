#!/usr/bin/env bash
# Prepares the Soft-RoCE guest in the cache directory (idempotent):
#   - Debian's kernel and busybox-static, fetched with `apt-get download`
#     (nothing is installed) or taken from RXE_VM_DEB_DIR when it holds them;
#   - the kernel unpacked with dpkg -x, modules.dep from busybox depmod, and an
#     uncompressed vmlinux (QEMU boots it directly via PVH, saving the guest
#     seconds of xz under TCG);
#   - a busybox initramfs with the modules needed to mount the host root
#     (virtio, 9p, overlay) plus rdma_rxe and friends, and guest-init.sh as /init.
# Usage: setup.sh CACHE_DIR
set -euo pipefail
cache=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache/debs"
cd "$cache"

kernel_pkg=${RXE_VM_KERNEL_PACKAGE:-}
if [[ -z $kernel_pkg ]]; then
  # linux-image-amd64 is a metapackage that depends on the current linux-image-X.Y.Z-N-amd64.
  kernel_pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
fi
[[ -n $kernel_pkg ]] || { echo "rxe-vm setup: cannot find the kernel package (apt-cache depends linux-image-amd64)" >&2; exit 1; }

fetch() {  # fetch PACKAGE: into debs/, from RXE_VM_DEB_DIR or apt-get download (retried while apt is locked)
  local pkg=$1 attempt
  ls debs/"$pkg"_*.deb >/dev/null 2>&1 && return 0
  if [[ -n ${RXE_VM_DEB_DIR:-} ]] && ls "$RXE_VM_DEB_DIR"/"$pkg"_*.deb >/dev/null 2>&1; then
    cp "$RXE_VM_DEB_DIR"/"$pkg"_*.deb debs/ && return 0
  fi
  for attempt in 1 2 3 4 5 6; do
    (cd debs && apt-get -q -o APT::Sandbox::User=root download "$pkg") && return 0
    echo "rxe-vm setup: apt-get download $pkg failed (attempt $attempt), retrying in 10 s" >&2
    sleep 10
  done
  return 1
}
fetch "$kernel_pkg"
fetch busybox-static

if [[ ! -x busybox/bin/busybox ]]; then
  rm -rf busybox && mkdir busybox && dpkg -x debs/busybox-static_*.deb busybox
fi
bb=$cache/busybox/bin/busybox
if [[ ! -d kernel/boot ]]; then
  rm -rf kernel && mkdir kernel && dpkg -x debs/"$kernel_pkg"_*.deb kernel
fi
kver=$(ls kernel/lib/modules | head -1)
moddir=kernel/lib/modules/$kver
[[ -s $moddir/modules.dep ]] || "$bb" depmod -b "$cache/kernel" "$kver"
echo "$kver" > kernel-version

# The bzImage carries an xz-compressed ELF; unpack it once for PVH boot.
if [[ ! -s vmlinux ]]; then
  image=kernel/boot/vmlinuz-$kver
  offset=$(LC_ALL=C grep -m1 -obUaP '\xfd7zXZ\x00' "$image" | cut -d: -f1 | head -1 || true)
  if [[ -n $offset ]] && tail -c +$((offset + 1)) "$image" > vmlinux.xz \
     && xz -dc --single-stream vmlinux.xz > vmlinux.tmp 2>/dev/null \
     && [[ $(head -c4 vmlinux.tmp | od -An -tx1 | tr -d ' ') == 7f454c46 ]]; then
    mv vmlinux.tmp vmlinux
  else
    echo "rxe-vm setup: no ELF vmlinux inside the bzImage; the guest will boot the bzImage" >&2
    rm -f vmlinux.tmp
  fi
  rm -f vmlinux.xz
fi

# ---- initramfs ---------------------------------------------------------------
early="virtio_pci 9pnet_virtio 9p overlay"
rdma="crc32_generic rdma_rxe ib_uverbs rdma_ucm dummy"
stamp="$kver|$early|$rdma|$(cksum < "$here/guest-init.sh")"
if [[ ! -s initramfs.cpio.gz || $(cat initramfs.stamp 2>/dev/null) != "$stamp" ]]; then
  rm -rf initramfs && mkdir -p initramfs/{bin,dev,proc,sys,lower,overlay,newroot}
  cp "$bb" initramfs/bin/busybox
  for tool in sh mount umount mkdir modprobe switch_root cat echo poweroff sleep dmesg; do
    ln -s busybox "initramfs/bin/$tool"
  done
  : > deps.txt
  for module in $early $rdma; do
    line=$(grep -E "/$module\.ko(\.xz|\.zst|\.gz)?:" "$moddir/modules.dep") \
      || { echo "rxe-vm setup: module $module not in $kver" >&2; exit 1; }
    for file in ${line/:/ }; do
      grep -E "^$file:" "$moddir/modules.dep" >> deps.txt
      mkdir -p "initramfs/lib/modules/$kver/$(dirname "$file")"
      case $file in  # busybox modprobe wants plain .ko files
        *.xz) xz -dc "$moddir/$file" > "initramfs/lib/modules/$kver/${file%.xz}" ;;
        *.zst) zstd -dcq "$moddir/$file" > "initramfs/lib/modules/$kver/${file%.zst}" ;;
        *.gz) gzip -dc "$moddir/$file" > "initramfs/lib/modules/$kver/${file%.gz}" ;;
        *) cp "$moddir/$file" "initramfs/lib/modules/$kver/$file" ;;
      esac
    done
  done
  sort -u deps.txt | sed -E 's/\.ko\.(xz|zst|gz)/.ko/g' > "initramfs/lib/modules/$kver/modules.dep"
  rm deps.txt
  echo "$early" > initramfs/early-modules
  echo "$rdma" > initramfs/rdma-modules
  cp "$here/guest-init.sh" initramfs/init && chmod 755 initramfs/init
  (cd initramfs && find . | "$bb" cpio -o -H newc 2>/dev/null) | gzip -1 > initramfs.cpio.gz.tmp
  mv initramfs.cpio.gz.tmp initramfs.cpio.gz
  rm -rf initramfs
  echo "$stamp" > initramfs.stamp
fi
echo "rxe-vm setup: ready in $cache (kernel $kver)" >&2
