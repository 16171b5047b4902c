// transport/messaging/tuning.h — the measured cost model of the message
// paths (docs/tuning.md). `ibdt-tune` times each path end to end between two
// processes of this machine, fits every path's cost as
//     perMessageNs + perByteNs * bytes + perBlockNs * blocks
// (blocks: the non-contiguous side's block count) and writes the fits to a
// per-host file. A Context that loads the file lets these fits decide what
// is a constant or a micro-calibrated guess without it: pipelined eager
// against rendezvous, and the Table 1 scheme (BC-SPUP, RWG-UP, Multi-W,
// P-RRS). Fits made on another CPU, core count, provider or ibdt version are
// not used: the file is keyed by all four.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibdt/messaging.h"
#include "ibdt/status.h"

namespace ibdt::messaging {

// The paths the model prices. Contiguous messages take their own two paths:
// their cost has no per-block term to fit.
enum class TunedPath : uint8_t {
  kPipelined,        // pipelined eager, non-contiguous
  kPipelinedContig,  // pipelined eager, contiguous
  kContig,           // rendezvous, both sides contiguous (one write)
  kBcSpup,
  kRwgUp,
  kMultiW,
  kPRrs,
  // The whole message packed, written once into a staging buffer, unpacked:
  // the fewest hand-offs between the ranks, which wins when the cores are
  // shared with other work (docs/tuning.md, "Generic").
  kGeneric,
};
inline constexpr int kTunedPathCount = 8;
std::string_view tunedPathName(TunedPath path);

struct PathCost {
  bool measured = false;
  double perMessageNs = 0;
  double perByteNs = 0;
  double perBlockNs = 0;
  double ns(double bytes, double blocks) const { return perMessageNs + perByteNs * bytes + perBlockNs * blocks; }
};

// What a tuning file is valid for.
struct HostKey {
  std::string cpuModel;  // /proc/cpuinfo "model name"
  // The CPU's generation: "family 26 model 2 stepping 0" (x86) or
  // "implementer 0x41 part 0xd0c variant 0x3 revision 1" (arm64). Virtual
  // machines often show a bare "AMD EPYC" as the model name, the same for
  // a Zen 3 and a Zen 5 host, so the name alone would let one CPU's file
  // steer another's choices.
  std::string cpuId;
  int64_t cores = 0;     // online CPUs
  std::string provider;  // "shm", "verbs"
  std::string version;   // ibdt version
  bool operator==(const HostKey&) const = default;
  // A file-name-safe digest of the five, e.g.
  // "amd-epyc-7b13-family-25-model-1-stepping-1-2c-shm-0-1-0".
  std::string fileStem() const;
};
HostKey currentHostKey(std::string_view provider);

// One collective algorithm's fitted cost (format_version 2, "collectives"):
//     fixedNs + perMessageNs * messages + perByteNs * bytes
// with `messages` and `bytes` what one rank sends in one call (the α-β model
// of the papers; the collectives layer computes both per algorithm, p and
// block size, and owns the names, e.g. "alltoall/bruck-modified").
struct CollectiveCost {
  double fixedNs = 0;
  double perMessageNs = 0;
  double perByteNs = 0;
  double ns(double messages, double bytes) const { return fixedNs + perMessageNs * messages + perByteNs * bytes; }
};
// One timing the fit was made from (format_version 3): `ranks` ranks,
// blocks of `blockBytes`, `ns` per call. The collectives layer prices an
// algorithm by its samples where they exist and by the fit elsewhere.
struct CollectiveSample {
  int64_t ranks = 0;
  int64_t blockBytes = 0;
  double ns = 0;
};
struct CollectiveFit {
  std::string name;  // [a-z0-9/-], at most 64 characters
  CollectiveCost cost;
  std::vector<CollectiveSample> samples;  // empty before format_version 3
};
inline constexpr size_t kMaxCollectiveFits = 32;

// Where ibdt-tune's rounds disagreed (tuning_rounds.h): at the layout of
// `bytes` in `blocks` blocks, `chosen` was fastest over all rounds, but in
// one round `roundWinner` took `ratio` (< 1) of chosen's time.
struct RoundDisagreement {
  double bytes = 0;
  double blocks = 0;
  TunedPath chosen = TunedPath::kPipelined;
  TunedPath roundWinner = TunedPath::kPipelined;
  double ratio = 1;
};
// How the point-to-point paths were timed (the optional "rounds" object; a
// file without one was timed path after path).
struct TuningRounds {
  int64_t count = 0;  // 0: not interleaved in rounds
  int64_t layouts = 0;  // layouts compared
  std::vector<RoundDisagreement> disagreements;
};
inline constexpr size_t kMaxRoundDisagreements = 32;
inline constexpr size_t kMaxCollectiveSamples = 64;  // per fit

struct Tuning {
  HostKey key;
  std::array<PathCost, kTunedPathCount> paths{};
  // Message sizes (bytes) the fits were measured between: outside them the
  // fits extrapolate, and the decisions say so in docs/tuning.md.
  int64_t minBytes = 0;
  int64_t maxBytes = 0;

  // Collective algorithms (empty in a format_version 1 file), measured at
  // [minRanks, maxRanks] forked ranks and [minBlock, maxBlock] bytes per block.
  std::vector<CollectiveFit> collectives;
  int64_t collectiveMinRanks = 0, collectiveMaxRanks = 0;
  int64_t collectiveMinBlock = 0, collectiveMaxBlock = 0;

  TuningRounds rounds;

  const PathCost& cost(TunedPath path) const { return paths[static_cast<size_t>(path)]; }
  PathCost& cost(TunedPath path) { return paths[static_cast<size_t>(path)]; }
};

// One end-to-end timing of a path: a message of `bytes` in `blocks` blocks
// (0 for contiguous) took `ns` (half a ping-pong round trip).
struct TuningSample {
  double bytes = 0;
  double blocks = 0;
  double ns = 0;
};
// Least squares of relative error (small messages count as much as large):
// the PathCost that best predicts `samples`. With `withBlocks` false the
// per-block term stays 0. Needs as many samples with distinct sizes as terms.
Result<PathCost> fitPathCost(const std::vector<TuningSample>& samples, bool withBlocks);

// The JSON text of a tuning file, and its strict parse. Input is untrusted:
// anything malformed, truncated, oversized, of a wrong type or out of range
// is a kInvalidArgument error naming what is wrong; never an exception.
std::string serializeTuning(const Tuning& tuning);
Result<Tuning> parseTuning(std::string_view text);

// IBDT_TUNE_FILE: "auto" (the default path below), "off" (no file), or a path.
inline constexpr std::string_view kTuneFileAuto = "auto";
inline constexpr std::string_view kTuneFileOff = "off";
// $XDG_CACHE_HOME/ibdt/tune-<stem>.json, else $HOME/.cache/ibdt/...
std::string defaultTuneFilePath(const HostKey& key);

// What a Context found when it looked for its tuning file.
struct LoadedTuning {
  std::optional<Tuning> tuning;  // empty: the built-in defaults apply
  std::string path;              // the file looked at ("" when off)
  std::string note;              // why it is (not) in force, for logs and ibdt-info
};
// Reads `setting` (an IBDT_TUNE_FILE value) for `key`. A missing default
// file is silent; a bad file, or one made for another host, is ignored with
// a warning in the log and in `note`.
LoadedTuning loadTuning(std::string_view setting, const HostKey& key);

// Writes the file (creating its directory), replacing it atomically.
Status writeTuningFile(const std::string& path, const Tuning& tuning);

}  // namespace ibdt::messaging
