#!/usr/bin/env bash
# run-in-rxe-vm.sh — runs a command on a real kernel RDMA stack (Soft-RoCE,
# rdma_rxe) inside a throw-away QEMU guest, so the verbs provider can be
# tested on any Linux machine without RDMA hardware.
#
#   tests/verbs/run-in-rxe-vm.sh 'build/release/bin/verbs_test --gtest_brief=1'
#   tests/verbs/run-in-rxe-vm.sh build/release/bin/verbs_test --gtest_filter='VerbsTransfer.*'
#   tests/verbs/run-in-rxe-vm.sh --setup     # only fetch and prepare the guest
#
# One argument is a bash command line; several are an argv. The guest runs
# Debian's own kernel (fetched once with `apt-get download`, nothing is
# installed) with the host's / as its root filesystem: read-only over 9p under
# a tmpfs overlay, so host-built binaries and the host's rdma-core run
# unchanged and writes are discarded (except in RXE_VM_RW directories). The
# command runs in the caller's directory with the caller's exported
# environment plus RXE_VM=1 RXE_DEV=rxe0 RXE_NETDEV RXE_IP RXE_GID_INDEX;
# rxe0 sits on a guest-only dummy netdev (no packet leaves the guest).
# Its stdout and stderr are ours; stdin is /dev/null.
#
# Exit status: the command's; 124 timeout, 125 guest setup failed, 126 the
# VM could not run, 2 usage.
#
# Environment:
#   RXE_VM_CACHE    kernel, busybox, initramfs, run directories
#                   (default ${XDG_CACHE_HOME:-$HOME/.cache}/ibdt-rxe-vm; ~520 MB)
#   RXE_VM_DEB_DIR  optional directory already holding the two .deb files
#   RXE_VM_TIMEOUT  seconds before the guest is killed (default 600)
#   RXE_VM_ACCEL    auto | kvm | tcg (auto: kvm only with VMX/SVM and a writable /dev/kvm)
#   RXE_VM_MEM (default 2G)  RXE_VM_CPUS (default 2)  RXE_VM_IP (default 10.11.12.1)
#   RXE_VM_RW       colon-separated host directories the guest may write to
#   RXE_VM_DEBUG=1  print the guest console and keep the run directory
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [[ $# -lt 1 ]]; then
  sed -n '2,/^set -u/p' "$0" | sed -e 's/^# \{0,1\}//' -e '$d' >&2
  exit 2
fi
command -v qemu-system-x86_64 > /dev/null || { echo "run-in-rxe-vm: qemu-system-x86_64 not found (Debian package qemu-system-x86)" >&2; exit 126; }
cache=${RXE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ibdt-rxe-vm}
mkdir -p "$cache/runs" || exit 126
cache=$(cd "$cache" && pwd -P)
case $cache in *,* | *' '*) echo "run-in-rxe-vm: RXE_VM_CACHE must not contain commas or spaces" >&2; exit 126 ;; esac

# One-time preparation; concurrent callers wait for each other.
flock "$cache/.setup.lock" "$here/rxe-vm/setup.sh" "$cache" >&2 || { echo "run-in-rxe-vm: setup failed" >&2; exit 126; }
[[ $1 == --setup && $# -eq 1 ]] && exit 0
kver=$(cat "$cache/kernel-version")
kernel=$cache/vmlinux
[[ -s $kernel ]] || kernel=$cache/kernel/boot/vmlinuz-$kver

accel=${RXE_VM_ACCEL:-auto}
if [[ $accel == auto ]]; then
  # A /dev/kvm without VMX/SVM (e.g. a PVM-only kvm) cannot boot a stock kernel.
  if [[ -w /dev/kvm ]] && grep -qw -e vmx -e svm /proc/cpuinfo; then accel=kvm; else accel=tcg; fi
fi
if [[ $accel == kvm ]]; then accel_args=(-accel kvm -cpu host); else accel_args=(-accel tcg,thread=multi -cpu max); fi
debug=${RXE_VM_DEBUG:-0}

run=$(mktemp -d "$cache/runs/run.XXXXXX") || exit 126
cleanup() { [[ $debug == 1 ]] || rm -rf "$run"; }
trap cleanup EXIT
if [[ $# -eq 1 ]]; then printf '%s\n' "$1" > "$run/cmd"; else printf '%q ' "$@" > "$run/cmd"; echo >> "$run/cmd"; fi
pwd -P > "$run/cwd"
export -p | grep -v -E '^declare -x (PWD|OLDPWD|SHLVL|_|HOSTNAME|TMUX|TMUX_PANE|DISPLAY)(=|$)' > "$run/env"
printf 'BUSYBOX=%q\nRXE_IP=%q\n' "$cache/busybox/bin/busybox" "${RXE_VM_IP:-10.11.12.1}" > "$run/vmconf"

shares=(-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
        -device "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot"
        -fsdev "local,id=run,path=$run,security_model=none"
        -device "virtio-9p-pci,fsdev=run,mount_tag=run")
: > "$run/rw-dirs"
index=0
IFS=: read -r -a rw_dirs <<< "${RXE_VM_RW:-}"
for dir in "${rw_dirs[@]}"; do
  [[ -n $dir ]] || continue
  mkdir -p "$dir" && dir=$(cd "$dir" && pwd -P)
  case $dir in *,* | *' '*) echo "run-in-rxe-vm: RXE_VM_RW entry '$dir' contains a comma or space" >&2; exit 126 ;; esac
  echo "$dir" >> "$run/rw-dirs"
  shares+=(-fsdev "local,id=rw$index,path=$dir,security_model=none,multidevs=remap"
           -device "virtio-9p-pci,fsdev=rw$index,mount_tag=rw$index")
  index=$((index + 1))
done

# no_timer_check: under TCG on a busy host the kernel's IO-APIC timer check can
# fail and panic the boot ("IO-APIC + timer doesn't work").
append="console=ttyS0 quiet loglevel=3 panic=-1 oops=panic nokaslr mitigations=off tsc=reliable no_timer_check"
append+=" ibdt.run=$run ibdt.stage2=$here/rxe-vm/guest-run.sh ibdt.modules=$cache/kernel/lib/modules/$kver"
# Guest ttyS1 is our stdout; ttyS2 reaches our stderr through a FIFO; ttyS0 (console) goes to a file.
mkfifo "$run/stderr.in" "$run/stderr.out" || exit 126
cat "$run/stderr.out" >&2 &
stderr_pid=$!
timeout -k 10 "${RXE_VM_TIMEOUT:-600}" qemu-system-x86_64 \
  -machine q35 "${accel_args[@]}" -smp "${RXE_VM_CPUS:-2}" -m "${RXE_VM_MEM:-2G}" \
  -nodefaults -no-user-config -display none -no-reboot \
  -kernel "$kernel" -initrd "$cache/initramfs.cpio.gz" -append "$append" \
  -serial "file:$run/console.log" \
  -chardev stdio,id=out,signal=off -serial chardev:out \
  -chardev pipe,id=err,path="$run/stderr" -serial chardev:err \
  "${shares[@]}" < /dev/null 2> "$run/qemu.log" &
qemu_pid=$!
trap 'kill -TERM $qemu_pid 2>/dev/null; wait $qemu_pid; kill $stderr_pid 2>/dev/null; cleanup; exit 130' INT TERM
wait $qemu_pid
qemu_rc=$?
for _ in $(seq 50); do kill -0 $stderr_pid 2>/dev/null || break; sleep 0.1; done
kill $stderr_pid 2>/dev/null
wait $stderr_pid 2>/dev/null

[[ $debug == 1 ]] && { echo "---- guest console ($run) ----" >&2; cat "$run/console.log" >&2; }
grep -v -E 'warning: host does not support' "$run/qemu.log" >&2
if [[ -s $run/setup-error ]]; then
  echo "run-in-rxe-vm: guest setup failed: $(cat "$run/setup-error")" >&2
  cat "$run/dmesg-tail" >&2 2>/dev/null
  exit 125
fi
if [[ -s $run/rc ]]; then
  exit "$(cat "$run/rc")"
fi
if [[ $qemu_rc == 124 || $qemu_rc == 137 ]]; then
  echo "run-in-rxe-vm: timed out after ${RXE_VM_TIMEOUT:-600} s" >&2
  exit 124
fi
echo "run-in-rxe-vm: the VM stopped without a result (qemu exit $qemu_rc); console tail:" >&2
tail -30 "$run/console.log" >&2
exit 126
