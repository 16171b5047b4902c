#!/usr/bin/env bash
# Runs every libFuzzer target of a clang build with IBDT_BUILD_FUZZERS
# (cmake --preset asan, which CI uses, or --preset fuzz at -O2) for a
# short time each, starting from the checked-in corpus (tests/fuzz/corpus/,
# read only: new inputs go to a scratch directory), and prints each target's
# executions per second. Fails on the first crash, leak or broken invariant;
# libFuzzer leaves the input as crash-*/leak-* in the scratch directory.
#   scripts/run-fuzzers.sh [build dir, default build/asan] [seconds each, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/asan}
seconds=${2:-20}
scratch=$(mktemp -d /tmp/ibdt-fuzz-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
status=0
for fuzzer in "$build"/bin/*_fuzzer "$build"/tests/*/*_fuzzer "$build"/tests/*/*/*_fuzzer; do
  [ -x "$fuzzer" ] || continue
  name=$(basename "$fuzzer" _fuzzer)
  mkdir -p "$scratch/$name"
  seeds=()
  [ -d "tests/fuzz/corpus/$name" ] && seeds=("tests/fuzz/corpus/$name")
  log="$scratch/$name.log"
  if (cd "$scratch/$name" && "$OLDPWD/$fuzzer" -max_total_time="$seconds" -rss_limit_mb=1024 -max_len=4096 \
        -timeout=30 -print_final_stats=1 "$scratch/$name" "${seeds[@]/#/$OLDPWD/}") >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz $name: ok, $runs inputs in ${seconds} s ($((runs / seconds)) per second)"
  else
    echo "fuzz $name: FAILED (input kept in $scratch/$name); last lines:"
    tail -n 30 "$log"
    trap - EXIT
    status=1
  fi
done
exit $status
