// perf/mpi_bridge_program.cc — the MPI program of `ibdt-bench mpi`: the MPI
// bridge (mpi/) against the MPI library's own calls, in one process. Built
// once per MPI library and linked with libibdt_mpi_<mpi>.so before MPI, so
// MPI_Alltoall / MPI_Alltoallv reach ibdt (PMPI interposition, exactly as
// with LD_PRELOAD) while PMPI_Alltoall / PMPI_Alltoallv are the library's
// own; packing compares IBDT_Pack with PMPI_Pack. The two sides alternate
// repetition by repetition, so load on the machine hits both alike.
//
// Every result is checked before it is timed: IBDT_Pack's bytes and
// position against PMPI_Pack's, and every received byte of both
// implementations' alltoalls (also once more after the timed loop); at the
// end the bridge's counters must show that ibdt took every call meant for
// it. Rank 0 prints JSON lines:
//   {"library": "<MPI_Get_library_version>"}
//   {"row": "MPI_Pack", "case": c, "bytes": b, "mpi": [median, min, max], "ibdt": [...]}
//   {"row": "MPI_Alltoall contig"|"MPI_Alltoall vector"|"MPI_Alltoallv"|"MPI_Alltoallv in place"|
//    "MPI_Alltoall self"|"MPI_Alltoall_init"|"MPI_Alltoall_init vector"|"MPI_Ialltoall"|"MPI_Ialltoallv",
//    "bytes": b, "mpi": [...],
//    "ibdt": [...]}
//   (the _init rows also "ibdt blocking": [...], the bridge's MPI_Alltoall timed in turn with them)
// (seconds per pack, or per call of the slowest rank), {"skipped": "<row>, <b> B",
// "why": ...} when the MPI library's own call delivered wrong data, or
// {"error": ...}.
// Usage: ibdt-mpi-bridge-<mpi> --pack [--quick] [--case TEXT] [--reps N] [--warmup N]
//        ibdt-mpi-bridge-<mpi> --alltoall [--bytes 8,4096] [--reps N] [--warmup N]
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ibdt_mpi.h"
#include "perf/alltoall_cases.h"
#include "perf/mpi_baseline_support.h"
#include "perf/mpi_pack_types.h"
#include "perf/report.h"

namespace {

using namespace ibdt::perf;

nlohmann::json triple(const Summary& s) { return {s.median, s.min, s.max}; }

// The median after Tukey's filter, as ibdt-bench alltoall and the MPI
// baseline programs report it (perf/report.h: on a loaded machine noise
// only adds time), with the min and max of all samples.
Summary filtered(const std::vector<double>& samples) {
  Summary summary = summarize(samples);
  summary.median = robustSummarize(samples).median;
  return summary;
}

// Times `calls` in turn, repetition by repetition; each repetition's
// seconds per call come from `perCall` (the slowest rank's, for
// collectives). One summary per call, in order.
template <typename Call, typename PerCall>
std::vector<Summary> alternate(int warmup, int reps, const std::vector<Call>& calls, PerCall&& perCall) {
  std::vector<std::vector<double>> seconds(calls.size());
  for (int rep = 0; rep < warmup + reps; ++rep) {
    for (size_t i = 0; i < calls.size(); ++i) {
      const double t = perCall(calls[i]);
      if (rep >= warmup) seconds[i].push_back(t);
    }
  }
  std::vector<Summary> summaries;
  for (const auto& samples : seconds) summaries.push_back(filtered(samples));
  return summaries;
}

// "" when IBDT_Pack wrote PMPI_Pack's bytes and position.
std::string checkPack(const MpiCase& c, const std::vector<char>& typed, int packSize) {
  std::vector<char> byMpi(static_cast<size_t>(packSize), 0), byIbdt(static_cast<size_t>(packSize), 0);
  int mpiPosition = 0, ibdtPosition = 0;
  PMPI_Pack(typed.data(), c.count, c.type, byMpi.data(), packSize, &mpiPosition, MPI_COMM_SELF);
  if (IBDT_Pack(typed.data(), c.count, c.type, byIbdt.data(), packSize, &ibdtPosition, MPI_COMM_SELF) !=
      MPI_SUCCESS) {
    return "IBDT_Pack failed";
  }
  if (mpiPosition != ibdtPosition) return "positions differ";
  return byMpi == byIbdt ? "" : "packed bytes differ";
}

// `only`: the cases whose name contains it (empty: all).
bool runPack(bool quick, const std::string& only, int reps, int warmup) {
  for (const PackCase& pc : packCases(quick)) {
    if (pc.name.find(only) == std::string::npos) continue;
    MpiCase c = buildMpiCase(pc);
    int packSize = 0, typeSize = 0;
    PMPI_Pack_size(c.count, c.type, MPI_COMM_SELF, &packSize);
    MPI_Type_size(c.type, &typeSize);
    const double bytes = static_cast<double>(typeSize) * c.count;
    std::vector<char> typed(static_cast<size_t>(c.typedBytes)), packed(static_cast<size_t>(packSize));
    for (size_t i = 0; i < typed.size(); ++i) typed[i] = static_cast<char>(i * 131 + i / 251);
    if (std::string wrong = checkPack(c, typed, packSize); !wrong.empty()) {
      printLine({{"error", "case " + pc.name + ": " + wrong}});
      return false;
    }
    const int inner = static_cast<int>(std::max(1.0, std::min(4096.0, (4 << 20) / std::max(bytes, 1.0))));
    auto perCall = [&](auto&& pack) { return measure(0, 1, inner, pack).front(); };
    const std::vector<std::function<void()>> packs = {
        [&] {
          int position = 0;
          PMPI_Pack(typed.data(), c.count, c.type, packed.data(), packSize, &position, MPI_COMM_SELF);
        },
        [&] {
          int position = 0;
          IBDT_Pack(typed.data(), c.count, c.type, packed.data(), packSize, &position, MPI_COMM_SELF);
        }};
    const std::vector<Summary> timed = alternate(warmup, reps, packs, perCall);
    printLine({{"row", "MPI_Pack"}, {"case", pc.name}, {"bytes", bytes}, {"mpi", triple(timed[0])},
               {"ibdt", triple(timed[1])}});
    MPI_Type_free(&c.type);
  }
  return true;
}

// One alltoall case: its buffers and the two implementations' calls.
struct AlltoallCase {
  std::string row;
  int64_t bytes = 0;
  bool vector = false;
  int commSize = 0, commRank = 0;  // of the communicator the calls run on
  AlltoallBuffer send, recv;
  std::function<void()> mpi, ibdt;
  // The persistent rows: the bridge's blocking call of the same arguments,
  // timed in turn with the other two, so that their ratio is the target's
  // (docs/mpi.md) within one repetition, whatever the machine's phase.
  std::function<void()> ibdtBlocking;
};

// True when every rank received what its peers meant; else rank(s) print
// why: an error (the run fails), or with `skip` a skipped row.
bool receivedRight(AlltoallCase& c, const char* who, bool skip = false) {
  const std::string wrong = checkAlltoallReceive(c.recv, c.bytes, c.commSize, c.commRank);
  int bad = wrong.empty() ? 0 : 1, anyBad = 0;
  PMPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!wrong.empty()) {
    const std::string why = c.row + " (" + who + ") delivered wrong data: " + wrong;
    printLine(skip ? nlohmann::json{{"skipped", c.row + ", " + std::to_string(c.bytes) + " B"}, {"why", why}}
                   : nlohmann::json{{"error", why}});
  }
  return anyBad == 0;
}

// Checks both implementations, times them alternately, checks ibdt's last
// result; rank 0 prints the row. A case whose MPI call delivers wrong data
// (Open MPI 4.1.4's Bruck with different send and receive types at 16
// ranks, open-mpi/ompi#10488) is skipped with a note; ibdt's must be right.
bool runAlltoallCase(AlltoallCase& c, const World& world, int reps, int warmup) {
  for (auto [call, who] : {std::pair{&c.mpi, "MPI"}, std::pair{&c.ibdt, "ibdt"}, std::pair{&c.ibdtBlocking, "ibdt blocking"}}) {
    if (!*call) continue;
    std::fill(c.recv.begin(), c.recv.end(), 0);
    (*call)();
    const bool mpi = call == &c.mpi;
    if (!receivedRight(c, who, mpi)) return mpi;
  }
  const int calls = alltoallCallsPerRep(c.bytes);
  auto perCall = [&](const std::function<void()>& fn) {
    PMPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls, max = 0;
    PMPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
  };
  std::vector<std::function<void()>> timedCalls = {c.mpi, c.ibdt};
  if (c.ibdtBlocking) timedCalls.push_back(c.ibdtBlocking);
  const std::vector<Summary> timed = alternate(warmup, alltoallRepsFor(c.bytes, reps), timedCalls, perCall);
  if (!receivedRight(c, "ibdt, after the timed calls")) return false;
  if (world.rank == 0) {
    nlohmann::json line = {{"row", c.row}, {"bytes", c.bytes}, {"mpi", triple(timed[0])}, {"ibdt", triple(timed[1])}};
    if (c.ibdtBlocking) line["ibdt blocking"] = triple(timed[2]);
    printLine(line);
  }
  return true;
}

#if MPI_VERSION >= 4
#define BRIDGE_ALLTOALL_INIT MPI_Alltoall_init
#else
#define BRIDGE_ALLTOALL_INIT MPIX_Alltoall_init
#endif

// The `ibdt-bench alltoall` rows (perf/alltoall_cases.h), MPI_Alltoallv
// with the contiguous row's counts (also in place: each call first copies
// the send buffer into the receive buffer, on both sides, so that every
// call exchanges the same data), and the contiguous MPI_Alltoall on
// MPI_COMM_SELF ("self": one block copied, no peer to wait for, so mostly
// the bridge's own per-call cost against MPI's), and "MPI_Alltoall_init"
// (and "... vector"): the contiguous (strided) call's persistent form
// through the bridge (MPI_Start + MPI_Wait: ibdt's persistent plan, what
// `ibdt-bench alltoall` times natively) against the library's own blocking
// call, and the bridge's blocking call of the same arguments in turn with
// both, so the preloaded blocking call and the native plan compare
// repetition by repetition (ibdt-bench mpi's "preloaded / persistent" note);
// and "MPI_Ialltoall" ("MPI_Ialltoallv", equal counts): the contiguous call
// started and at once waited for.
bool runAlltoall(const World& world, const BaselineOptions& options) {
  const int p = world.size;
  for (int64_t bytes : options.sizes) {
    MPI_Datatype pieces, strided;
    MPI_Type_vector(static_cast<int>(bytes / kAlltoallPiece), static_cast<int>(kAlltoallPiece / 4),
                    static_cast<int>(kAlltoallGap / 4), MPI_INT, &pieces);
    MPI_Type_create_resized(pieces, 0, alltoallSendExtent(true, bytes), &strided);
    MPI_Type_free(&pieces);
    MPI_Type_commit(&strided);
    const int n = static_cast<int>(bytes), ints = static_cast<int>(bytes / 4);
    std::vector<int> counts(static_cast<size_t>(p), n), displs(static_cast<size_t>(p));
    for (int i = 0; i < p; ++i) displs[static_cast<size_t>(i)] = i * n;
    std::vector<AlltoallCase> cases(9);
    MPI_Request persistent[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // contiguous, vector
    for (int k = 0; k < 9; ++k) {
      AlltoallCase& c = cases[static_cast<size_t>(k)];
      c.row = k == 0   ? "MPI_Alltoall contig"
              : k == 1 ? "MPI_Alltoall vector"
              : k == 2 ? "MPI_Alltoallv"
              : k == 3 ? "MPI_Alltoall self"
              : k == 4 ? "MPI_Alltoallv in place"
              : k == 5 ? "MPI_Alltoall_init"
              : k == 6 ? "MPI_Alltoall_init vector"
              : k == 7 ? "MPI_Ialltoall"
                       : "MPI_Ialltoallv";
      c.bytes = bytes;
      c.vector = k == 1 || k == 6;
      c.commSize = k == 3 ? 1 : p;
      c.commRank = k == 3 ? 0 : world.rank;
      c.recv.assign(static_cast<size_t>(bytes * c.commSize), 0);
      fillAlltoallSend(c.send, c.vector, bytes, c.commSize, c.commRank);
      const void* s = c.send.data();
      void* r = c.recv.data();
      if (k == 0) {
        c.mpi = [=] { PMPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD); };
        c.ibdt = [=] { MPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD); };
      } else if (k == 1) {
        c.mpi = [=] { PMPI_Alltoall(s, 1, strided, r, ints, MPI_INT, MPI_COMM_WORLD); };
        c.ibdt = [=] { MPI_Alltoall(s, 1, strided, r, ints, MPI_INT, MPI_COMM_WORLD); };
      } else if (k == 3) {
        c.mpi = [=] { PMPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_SELF); };
        c.ibdt = [=] { MPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_SELF); };
      } else if (k == 5 || k == 6) {
        MPI_Request* request = &persistent[k - 5];
        if (k == 5) {
          BRIDGE_ALLTOALL_INIT(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD, MPI_INFO_NULL, request);
          c.mpi = [=] { PMPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD); };
          c.ibdtBlocking = [=] { MPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD); };
        } else {
          BRIDGE_ALLTOALL_INIT(s, 1, strided, r, ints, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, request);
          c.mpi = [=] { PMPI_Alltoall(s, 1, strided, r, ints, MPI_INT, MPI_COMM_WORLD); };
          c.ibdtBlocking = [=] { MPI_Alltoall(s, 1, strided, r, ints, MPI_INT, MPI_COMM_WORLD); };
        }
        c.ibdt = [=] {
          MPI_Start(request);
          MPI_Wait(request, MPI_STATUS_IGNORE);
        };
      } else if (k == 7) {
        c.mpi = [=] {
          MPI_Request request;
          PMPI_Ialltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD, &request);
          PMPI_Wait(&request, MPI_STATUS_IGNORE);
        };
        c.ibdt = [=] {
          MPI_Request request;
          MPI_Ialltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD, &request);
          MPI_Wait(&request, MPI_STATUS_IGNORE);
        };
      } else if (k == 8) {
        const int *cn = counts.data(), *dp = displs.data();
        c.mpi = [=] {
          MPI_Request request;
          PMPI_Ialltoallv(s, cn, dp, MPI_BYTE, r, cn, dp, MPI_BYTE, MPI_COMM_WORLD, &request);
          PMPI_Wait(&request, MPI_STATUS_IGNORE);
        };
        c.ibdt = [=] {
          MPI_Request request;
          MPI_Ialltoallv(s, cn, dp, MPI_BYTE, r, cn, dp, MPI_BYTE, MPI_COMM_WORLD, &request);
          MPI_Wait(&request, MPI_STATUS_IGNORE);
        };
      } else if (k == 4) {
        const int *cn = counts.data(), *dp = displs.data();
        const size_t total = c.recv.size();
        c.mpi = [=] {
          std::memcpy(r, s, total);
          PMPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, r, cn, dp, MPI_BYTE, MPI_COMM_WORLD);
        };
        c.ibdt = [=] {
          std::memcpy(r, s, total);
          MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, r, cn, dp, MPI_BYTE, MPI_COMM_WORLD);
        };
      } else {
        const int *cn = counts.data(), *dp = displs.data();
        c.mpi = [=] { PMPI_Alltoallv(s, cn, dp, MPI_BYTE, r, cn, dp, MPI_BYTE, MPI_COMM_WORLD); };
        c.ibdt = [=] { MPI_Alltoallv(s, cn, dp, MPI_BYTE, r, cn, dp, MPI_BYTE, MPI_COMM_WORLD); };
      }
    }
    bool ok = true;
    for (AlltoallCase& c : cases) ok = ok && runAlltoallCase(c, world, options.reps, options.warmup);
    for (MPI_Request& request : persistent) MPI_Request_free(&request);
    MPI_Type_free(&strided);
    if (!ok) return false;
  }
  return true;
}

// "" when the bridge took every call meant for it (a bridge that silently
// handed them to MPI would make the comparison meaningless).
std::string bridgeTookAll(bool pack) {
  IBDT_Mpi_counters n{};
  IBDT_Mpi_get_counters(&n);
  if (pack) return n.pack_ibdt > 0 && n.pack_mpi == 0 ? "" : "IBDT_Pack handed packs to MPI (or packed none)";
  if (n.alltoall_ibdt == 0 || n.alltoallv_ibdt == 0) return "the bridge took no MPI_Alltoall(v) (IBDT_MPI=off?)";
  return n.alltoall_mpi == 0 && n.alltoallv_mpi == 0 ? "" : "the bridge handed calls to MPI (IBDT_LOG=debug says why)";
}

}  // namespace

int main(int argc, char** argv) {
  const World world = initWorld(&argc, &argv);
  bool pack = false, alltoall = false, quick = false;
  std::string only;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--pack")) pack = true;
    else if (!std::strcmp(argv[i], "--case") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--alltoall")) alltoall = true;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else rest.push_back(argv[i]);
  }
  BaselineOptions options;
  auto valid = [](long long bytes) { return bytes >= kAlltoallPiece && bytes % kAlltoallPiece == 0 && bytes <= (1 << 24); };
  if (pack == alltoall ||
      !parseBaselineOptions(static_cast<int>(rest.size()), rest.data(), "--bytes", valid, alltoallBytes(quick), options)) {
    return usageError(world, std::string("usage: ") + argv[0] +
                                 " --pack [--quick] [--case TEXT] | --alltoall [--bytes 8,4096 (multiples of 8)] [--reps N] [--warmup N]");
  }
  if (world.rank == 0) printLibraryLine();
  bool ok = pack ? runPack(quick, only, options.reps, options.warmup) : runAlltoall(world, options);
  if (ok && world.rank == 0) {
    if (std::string wrong = bridgeTookAll(pack); !wrong.empty()) {
      printLine({{"error", wrong}});
      ok = false;
    }
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
