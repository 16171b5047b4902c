#!/bin/bash
# PID 1 of the guest, inside the host's filesystem (read-only 9p + tmpfs
# overlay). Creates the Soft-RoCE device rxe0 on a guest-only dummy netdev,
# runs the command written by run-in-rxe-vm.sh, stores its exit status in the
# run directory and powers off. $1 = the run directory.
run=$1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /run
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
. "$run/vmconf"   # BUSYBOX, RXE_IP
finish() {
  echo "$1" > "$run/rc"
  sync
  "$BUSYBOX" poweroff -f
  sleep 5
  echo o > /proc/sysrq-trigger
}
fail() {
  echo "$*" > "$run/setup-error"
  dmesg | tail -30 > "$run/dmesg-tail"
  finish 125
}
"$BUSYBOX" stty -F /dev/ttyS1 raw -echo 2>/dev/null
"$BUSYBOX" stty -F /dev/ttyS2 raw -echo 2>/dev/null
"$BUSYBOX" hostname rxe-vm
# Debian's host may lack kmod: busybox serves modprobe, also for the kernel's
# own module requests (rdma_rxe asks for the crc32 crypto driver).
if ! command -v modprobe > /dev/null; then ln -s "$BUSYBOX" /usr/sbin/modprobe; fi
echo "$(command -v modprobe)" > /proc/sys/kernel/modprobe
for module in crc32_generic rdma_rxe ib_uverbs rdma_ucm; do
  [ -d "/sys/module/$module" ] || modprobe "$module" || fail "modprobe $module"
done
[ -d /sys/module/dummy ] || modprobe dummy numdummies=0 || fail "modprobe dummy"
ip link set lo up
ip link add rxenet0 type dummy || fail "ip link add rxenet0 type dummy"
ip addr add "$RXE_IP/24" dev rxenet0 || fail "ip addr add $RXE_IP"
ip link set rxenet0 up || fail "ip link set rxenet0 up"
rdma link add rxe0 type rxe netdev rxenet0 || fail "rdma link add rxe0"
# Wait for the port and its RoCE v2 IPv4-mapped GID (ibdt picks that one too).
port=/sys/class/infiniband/rxe0/ports/1
gid_index=
for _ in $(seq 100); do
  if grep -q ACTIVE "$port/state" 2>/dev/null; then
    for gid in "$port"/gids/*; do
      index=${gid##*/}
      if [[ $(cat "$gid" 2>/dev/null) == 0000:0000:0000:0000:0000:ffff:* &&
            $(cat "$port/gid_attrs/types/$index" 2>/dev/null) == "RoCE v2" ]]; then
        gid_index=$index
        break
      fi
    done
    [ -n "$gid_index" ] && break
  fi
  sleep 0.1
done
[ -n "$gid_index" ] || fail "rxe0: port not ACTIVE or no RoCE v2 IPv4 GID after 10 s"

. "$run/env"
export RXE_VM=1 RXE_DEV=rxe0 RXE_NETDEV=rxenet0 RXE_IP RXE_GID_INDEX=$gid_index
ulimit -l unlimited
ulimit -c 0
cd "$(cat "$run/cwd")" 2>/dev/null || cd /
/bin/bash "$run/cmd" < /dev/null > /dev/ttyS1 2> /dev/ttyS2
finish $?
