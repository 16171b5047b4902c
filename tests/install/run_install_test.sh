#!/usr/bin/env bash
# run_install_test.sh BUILD_DIR CONSUMER_SRC WORK_DIR
set -euo pipefail
build=$1 consumer=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix"
cmake --build "$work/consumer"
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/consumer/consumer"
# The same program through pkg-config.
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
c++ -std=c++20 "$consumer/main.cc" $(pkg-config --cflags --libs ibdt) -o "$work/consumer_pc"
LD_LIBRARY_PATH="$work/prefix/lib" "$work/consumer_pc"
