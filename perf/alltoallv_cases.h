// perf/alltoallv_cases.h — the experiment of `ibdt-bench alltoallv`, shared
// by the ibdt benchmark and the MPI_Alltoallv baseline programs so both run
// the same count matrices, layouts, repetitions and data check. No ibdt or
// MPI types here: blocks are bytes, laid out back to back in rank order.
//
// Distributions of the bytes rank i sends rank j, with mean `mean` per pair:
//   regular:  mean for every pair;
//   uniform:  uniform in [0, 2 mean], from a seed, symmetric (c[i][j] = c[j][i]);
//   powerlaw: mean * p^1.5 / H scaled by (1 + |i - j|)^-1.5 (near peers get most), symmetric;
//   hot:      every rank sends 4 mean to one hot rank and mean/4 to the others.
// In place, MPI requires symmetric counts: its rows skip "hot".
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ibdt::perf {

inline const std::vector<std::string>& alltoallvDistributions() {
  static const std::vector<std::string> names = {"regular", "uniform", "powerlaw", "hot"};
  return names;
}
inline bool alltoallvSymmetric(const std::string& distribution) { return distribution != "hot"; }

inline std::vector<int64_t> alltoallvMeans(bool quick) {
  if (quick) return {64, 4096};
  return {64, 4096, 65536};
}

// Calls per timed repetition (small ones are too short to time alone).
inline int alltoallvCallsPerRep(int64_t mean) { return mean <= 512 ? 10 : mean <= 4096 ? 3 : 1; }

// Bytes rank `from` sends rank `to`.
inline int64_t alltoallvBytes(const std::string& distribution, int64_t mean, int ranks, int from, int to) {
  const int low = from < to ? from : to, high = from < to ? to : from;
  if (distribution == "uniform") {
    uint64_t x = static_cast<uint64_t>(low) * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(high) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return static_cast<int64_t>(x % static_cast<uint64_t>(2 * mean + 1));
  }
  if (distribution == "powerlaw") {
    double norm = 0;  // mean over peers of (1 + distance)^-1.5
    for (int d = 0; d < ranks; ++d) norm += std::pow(1.0 + d, -1.5);
    norm /= ranks;
    return static_cast<int64_t>(static_cast<double>(mean) * std::pow(1.0 + (high - low), -1.5) / norm);
  }
  if (distribution == "hot") return to == 0 ? 4 * mean : mean / 4;
  return mean;
}

// One rank's counts and displacements (bytes), blocks back to back by rank.
struct AlltoallvLayout {
  std::vector<int64_t> sendcounts, sdispls, recvcounts, rdispls;
  int64_t sendTotal = 0, recvTotal = 0;
};

inline AlltoallvLayout alltoallvLayout(const std::string& distribution, int64_t mean, int ranks, int rank) {
  AlltoallvLayout layout;
  for (int peer = 0; peer < ranks; ++peer) {
    layout.sdispls.push_back(layout.sendTotal);
    layout.sendcounts.push_back(alltoallvBytes(distribution, mean, ranks, rank, peer));
    layout.sendTotal += layout.sendcounts.back();
    layout.rdispls.push_back(layout.recvTotal);
    layout.recvcounts.push_back(alltoallvBytes(distribution, mean, ranks, peer, rank));
    layout.recvTotal += layout.recvcounts.back();
  }
  return layout;
}

inline uint8_t alltoallvPattern(int from, int to, int64_t k) {
  return static_cast<uint8_t>((from + 1) * 29 + (to + 1) * 113 + k * 7 + (k >> 8) * 3);
}

// Writes this rank's outgoing blocks into `buffer` (at least sendTotal bytes).
inline void fillAlltoallvSend(std::vector<uint8_t>& buffer, const AlltoallvLayout& layout, int rank) {
  for (size_t to = 0; to < layout.sendcounts.size(); ++to) {
    for (int64_t k = 0; k < layout.sendcounts[to]; ++k) {
      buffer[static_cast<size_t>(layout.sdispls[to] + k)] = alltoallvPattern(rank, static_cast<int>(to), k);
    }
  }
}

// "" when every incoming block of `buffer` is what its sender meant.
inline std::string checkAlltoallvReceive(const std::vector<uint8_t>& buffer, const AlltoallvLayout& layout, int rank) {
  for (size_t from = 0; from < layout.recvcounts.size(); ++from) {
    for (int64_t k = 0; k < layout.recvcounts[from]; ++k) {
      const uint8_t got = buffer[static_cast<size_t>(layout.rdispls[from] + k)];
      const uint8_t want = alltoallvPattern(static_cast<int>(from), rank, k);
      if (got != want) {
        return "rank " + std::to_string(rank) + ": byte " + std::to_string(k) + " from rank " + std::to_string(from) +
               " is " + std::to_string(got) + ", expected " + std::to_string(want);
      }
    }
  }
  return "";
}

}  // namespace ibdt::perf
