// tools/tune_alltoall.h — the alltoall timings ibdt-tune fits for kAuto's
// selection (docs/alltoall-selection.md): every modelled algorithm
// (direct-write included) at 2..N forked ranks and a few block sizes, each
// sample the slowest rank's median time per call, and per plan creation,
// with the messages and bytes one rank sends.
#pragma once

#include <string>
#include <vector>

#include "ibdt/status.h"
#include "transport/messaging/tuning.h"

namespace ibdt::tune {

struct AlltoallSamples {
  std::string fitName;      // "alltoall/<algorithm>"
  std::string initFitName;  // "alltoall-init/<algorithm>"
  // bytes: what one rank sends per call, blocks: its messages, ns: per call
  // (samples) or per plan creation, init + destroy (initSamples).
  std::vector<messaging::TuningSample> samples;
  std::vector<messaging::TuningSample> initSamples;
  // The same timings by ranks and block size, kept in the file (format_version 3).
  std::vector<messaging::CollectiveSample> points;
  std::vector<messaging::CollectiveSample> initPoints;
};

struct AlltoallMeasured {
  std::vector<AlltoallSamples> algorithms;
  int minRanks = 2, maxRanks = 8;
  std::vector<int64_t> blockBytes;
};

struct AlltoallMeasureOptions {
  std::string provider = "shm";
  int maxRanks = 16;
  int reps = 15;
  // The tuning file the timed ranks' Contexts load: the point-to-point fits
  // just written, so that the alltoalls are timed under the message paths
  // programs will take with the finished file, never an earlier file's.
  std::string tuneFile = "off";
};

// The rank counts timed for `maxRanks`: every count up to 8 (where the
// per-message and fixed terms separate), then 16, 32, 64 and maxRanks itself:
// beyond 8 a rank count costs seconds, and the model anchors its fits to the
// largest count timed (AlltoallCostModel::anchoredNs).
std::vector<int> alltoallRankCounts(int maxRanks);
// Forks each of alltoallRankCounts(maxRanks) ranks in turn (every rank count a job of its own).
Result<AlltoallMeasured> measureAlltoalls(const AlltoallMeasureOptions& options);

// The fits (fixed, per message, per byte) of the runs and of the inits into
// `tuning`'s collectives.
Status fitAlltoalls(const AlltoallMeasured& measured, messaging::Tuning& tuning);

}  // namespace ibdt::tune
