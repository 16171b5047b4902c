#!/usr/bin/env bash
# ci-verbs.sh [BUILD_DIR] — CI step: runs the verbs test suites on Soft-RoCE
# inside the QEMU guest (tests/verbs/run-in-rxe-vm.sh). Builds nothing: it
# uses the test binaries already in BUILD_DIR (default build/release).
# Bounded in time (RXE_VM_TIMEOUT, default 600 s for the whole guest run; about 320 s here).
# Exit status: 0 passed or skipped (the reason is printed on a line starting
# with "ci-verbs: SKIPPED"), 1 a suite failed or the guest broke.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build/release}
skip() { echo "ci-verbs: SKIPPED: $*"; exit 0; }

command -v qemu-system-x86_64 > /dev/null || skip "qemu-system-x86_64 is not installed (Debian package qemu-system-x86)"
qemu-system-x86_64 -version > /dev/null 2>&1 || skip "qemu-system-x86_64 cannot run here"
[[ -x $build/bin/verbs_test ]] || skip "$build/bin/verbs_test is missing (rdma-core not found at configure time, or not built)"
# Fetching Debian's kernel needs apt and the network (or RXE_VM_DEB_DIR): without them, skip.
"$root/tests/verbs/run-in-rxe-vm.sh" --setup \
  || skip "the guest kernel could not be fetched or prepared (offline? see the messages above)"

# The suites: the provider's own tests, and the shared provider suite on verbs.
# rxe answers a too-small receive with other statuses than HCAs do (README,
# "Where rxe differs from real HCAs"); the provider's own test covers that case.
rxe_differs='-*ReceiveTooSmallFailsBothSides/verbs'
names=(verbs_test)
suites=("$build/bin/verbs_test")
if [[ -x $build/bin/fabric_test ]]; then
  names+=(fabric_test)
  suites+=("IBDT_PROVIDER=verbs $build/bin/fabric_test '--gtest_filter=$rxe_differs'")
fi
# Messaging connecting on demand: RC endpoints set up through the UD listener.
if [[ -x $build/bin/messaging_mp_test && -x $build/bin/ibdt-run ]]; then
  names+=(messaging_mp_test_lazy)
  suites+=("IBDT_PROVIDER=verbs IBDT_MSG_CONNECT=lazy $build/bin/ibdt-run -n 4 --timeout 200 -- $build/bin/messaging_mp_test")
fi
# Collectives over RC queue pairs: pairwise with 3 ranks (odd p, paired and
# unpaired rounds), every Bruck variant with 4, the hierarchical and multiple
# all-to-alls on 2 simulated nodes. Every received byte is checked.
for spec in "collectives_mp_test:-n 3" "collectives_bruck_mp_test:-n 4" \
            "collectives_nodes_mp_test:-n 4 --nodes 2"; do
  test=${spec%%:*}
  if [[ -x $build/bin/$test && -x $build/bin/ibdt-run ]]; then
    names+=("$test (${spec#*:})")
    suites+=("IBDT_PROVIDER=verbs $build/bin/ibdt-run ${spec#*:} --timeout 200 -- $build/bin/$test")
  fi
done
# The same messaging and collectives suites with every Context's eager
# buffers in one pool under a shared receive queue (IBDT_MSG_SRQ_RANKS=0:
# at every job size; docs/many-ranks.md), and the flood of the many-ranks
# test (rank 1 sends 96 messages to a rank 0 that first serves the others)
# with the default credits and at the floor of two. rxe counts the RNR NAKs
# it sends (hw_counters/send_rnr_err): flow control must keep it at 0.
srq="IBDT_PROVIDER=verbs IBDT_MSG_SRQ_RANKS=0"
if [[ -x $build/bin/messaging_mp_test && -x $build/bin/ibdt-run ]]; then
  names+=("messaging_mp_test_lazy (SRQ)")
  suites+=("$srq IBDT_MSG_CONNECT=lazy $build/bin/ibdt-run -n 4 --timeout 200 -- $build/bin/messaging_mp_test")
fi
for spec in "collectives_mp_test:-n 3" "collectives_bruck_mp_test:-n 4" \
            "collectives_nodes_mp_test:-n 4 --nodes 2" "collectives_many_ranks_mp_test:-n 4"; do
  test=${spec%%:*}
  if [[ -x $build/bin/$test && -x $build/bin/ibdt-run ]]; then
    names+=("$test (${spec#*:}, SRQ)")
    suites+=("$srq $build/bin/ibdt-run ${spec#*:} --timeout 200 -- $build/bin/$test")
  fi
done
if [[ -x $build/bin/collectives_many_ranks_mp_test && -x $build/bin/ibdt-run ]]; then
  names+=("collectives_many_ranks_mp_test (-n 4, SRQ, 2 credits)")
  suites+=("$srq IBDT_MSG_EAGER_MEMORY=1 $build/bin/ibdt-run -n 4 --timeout 200 -- $build/bin/collectives_many_ranks_mp_test")
fi
if [[ -x $build/bin/messaging_dead_peer_test ]]; then
  names+=(messaging_dead_peer_test "messaging_dead_peer_test (SRQ)")
  suites+=("IBDT_PROVIDER=verbs $build/bin/messaging_dead_peer_test" "$srq $build/bin/messaging_dead_peer_test")
fi
rnr=/sys/class/infiniband/rxe0/ports/1/hw_counters/send_rnr_err
script="rnr() { cat $rnr 2> /dev/null || echo 0; }; "
for i in "${!suites[@]}"; do
  script+="before=\$(rnr); echo '=== rxe0: ${names[i]}'; ${suites[i]} --gtest_brief=1 || failed=\"\$failed ${names[i]}\"; "
  # The provider's own tests provoke RNR on purpose; messaging must not.
  [[ ${names[i]} == *SRQ* ]] || continue
  script+="[ \$(rnr) = \$before ] || { echo \"receiver-not-ready NAKs: \$before -> \$(rnr)\"; failed=\"\$failed ${names[i]}(RNR)\"; }; "
done
script+='[ -z "$failed" ] || { echo "ci-verbs: failed suites:$failed"; exit 1; }'

export RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-600}
start=$SECONDS
"$root/tests/verbs/run-in-rxe-vm.sh" "$script"
rc=$?
case $rc in
  0) echo "ci-verbs: passed on Soft-RoCE in $((SECONDS - start)) s" ;;
  124) echo "ci-verbs: FAILED: the guest run exceeded ${RXE_VM_TIMEOUT} s" ;;
  125) echo "ci-verbs: FAILED: the guest could not create rxe0 (see above)" ;;
  126) echo "ci-verbs: FAILED: the guest did not run to the end (see the console tail above)" ;;
  *) echo "ci-verbs: FAILED (exit $rc)" ;;
esac
[[ $rc == 0 ]] && exit 0 || exit 1
