// ibdt-launch-check — does this launcher start a working ibdt job?
//
//   <launcher> -n N ibdt-launch-check [--expect-size N] [--expect-nodes K]
//                                     [--blob-bytes B] [--launched-at NS]
//
// Every rank joins the job, checks its placement against the others', then
// exchanges a distinct endpoint-like blob with every other rank through the
// Store (put, commit, fence, get from each peer) and verifies every byte.
// Rank 0 prints one summary line; the exit status is non-zero on any rank
// that saw a mismatch. --launched-at (CLOCK_REALTIME nanoseconds, e.g.
// `date +%s%N` just before starting the launcher) adds the time from launch
// to "all blobs exchanged" on the slowest rank.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ibdt/store.h"

namespace {

using ibdt::bootstrap::Bytes;
using ibdt::bootstrap::Store;

int64_t nanosOf(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

Bytes blobFor(int from, int to, size_t size) {
  Bytes blob(size);
  for (size_t i = 0; i < size; ++i) blob[i] = static_cast<uint8_t>(from * 31 + to * 7 + i * 13);
  return blob;
}

struct Options {
  int expectSize = -1;
  int expectNodes = -1;
  size_t blobBytes = 64;
  int64_t launchedAt = -1;
};

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (i + 1 >= argc) return false;
    long long value = std::atoll(argv[++i]);
    if (word == "--expect-size") options.expectSize = static_cast<int>(value);
    else if (word == "--expect-nodes") options.expectNodes = static_cast<int>(value);
    else if (word == "--blob-bytes") options.blobBytes = static_cast<size_t>(value);
    else if (word == "--launched-at") options.launchedAt = value;
    else return false;
  }
  return true;
}

// The placement checks and the exchange; returns the problems seen.
std::string check(Store& store, const Options& options, ibdt::Deadline deadline) {
  std::string problems;
  auto note = [&](const std::string& problem) { problems += (problems.empty() ? "" : "; ") + problem; };
  if (options.expectSize >= 0 && store.size() != options.expectSize) {
    note(ibdt::strCat("size ", store.size(), " but the launcher started ", options.expectSize));
  }
  if (options.expectNodes >= 0 && store.numNodes() != options.expectNodes) {
    note(ibdt::strCat("", store.numNodes(), " nodes, expected ", options.expectNodes));
  }
  for (int peer = 0; peer < store.size(); ++peer) {
    if (auto s = store.put("ep." + std::to_string(peer), blobFor(store.rank(), peer, options.blobBytes)); !s.isOk()) {
      note(s.toString());
    }
  }
  if (auto s = store.commit(); !s.isOk()) note(s.toString());
  if (auto s = store.fence(deadline); !s.isOk()) return problems + s.toString();
  for (int peer = 0; peer < store.size(); ++peer) {
    auto value = store.get(peer, "ep." + std::to_string(store.rank()), deadline);
    if (!value.isOk()) {
      note(value.status().toString());
    } else if (*value != blobFor(peer, store.rank(), options.blobBytes)) {
      note(ibdt::strCat("wrong blob from rank ", peer));
    }
  }
  return problems;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t started = nanosOf(CLOCK_MONOTONIC);
  Options options;
  if (!parse(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: <launcher> ibdt-launch-check [--expect-size N] [--expect-nodes K] [--blob-bytes B] "
                 "[--launched-at NS]\n");
    return 2;
  }
  auto deadline = ibdt::Deadline::after(std::chrono::seconds(60));
  auto connected = ibdt::bootstrap::connectStore();
  if (!connected.isOk()) {
    std::fprintf(stderr, "ibdt-launch-check: cannot join the job: %s\n", connected.status().toString().c_str());
    return 1;
  }
  Store& store = **connected;
  std::string problems = check(store, options, deadline);
  int64_t exchanged = nanosOf(CLOCK_MONOTONIC);
  int64_t exchangedWallClock = nanosOf(CLOCK_REALTIME);
  if (!problems.empty()) std::fprintf(stderr, "ibdt-launch-check: rank %d: %s\n", store.rank(), problems.c_str());

  // Rank 0 reports for everyone: placement, failures and the slowest times.
  struct Report {
    int32_t ok, node, localRank, localSize;
    int64_t sinceStart, sinceLaunch;
  } mine{problems.empty() ? 1 : 0, store.nodeId(), store.localRank(), store.localSize(), exchanged - started,
         options.launchedAt >= 0 ? exchangedWallClock - options.launchedAt : -1};
  auto all = store.allgather(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&mine), sizeof(mine)), deadline);
  if (!all.isOk()) {
    std::fprintf(stderr, "ibdt-launch-check: rank %d: gathering results: %s\n", store.rank(),
                 all.status().toString().c_str());
    return 1;
  }
  if (store.rank() != 0) return problems.empty() ? 0 : 1;
  std::string failed;
  int64_t slowestStart = 0;
  int64_t slowestLaunch = -1;
  for (int rank = 0; rank < store.size(); ++rank) {
    Report theirs{};
    if ((*all)[static_cast<size_t>(rank)].size() != sizeof(theirs)) {
      failed += ibdt::strCat(" ", rank);
      continue;
    }
    std::memcpy(&theirs, (*all)[static_cast<size_t>(rank)].data(), sizeof(theirs));
    if (!theirs.ok) failed += ibdt::strCat(" ", rank);
    slowestStart = std::max(slowestStart, theirs.sinceStart);
    slowestLaunch = std::max(slowestLaunch, theirs.sinceLaunch);
  }
  std::printf("ibdt-launch-check: backend=%s ranks=%d nodes=%d blob=%zu B: %s; join_to_exchanged_ms=%.3f",
              std::string(store.backend()).c_str(), store.size(), store.numNodes(), options.blobBytes,
              failed.empty() ? "all-to-all exchange verified" : ("FAILED on ranks" + failed).c_str(),
              static_cast<double>(slowestStart) / 1e6);
  if (slowestLaunch >= 0) std::printf(" launch_to_exchanged_ms=%.3f", static_cast<double>(slowestLaunch) / 1e6);
  std::printf("\n");
  return failed.empty() && problems.empty() ? 0 : 1;
}
