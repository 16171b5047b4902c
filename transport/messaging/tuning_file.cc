// The tuning file: JSON text, parsed as hostile input (tuning.h).
//
//   {"format": "ibdt-tune", "format_version": 1,
//    "host": {"cpu": "...", "cpu_id": "family 25 model 1 stepping 1", "cores": 2,
//             "provider": "shm", "ibdt": "0.1.0"},
//    "bytes_measured": [32768, 1048576],
//    "paths": {"bc-spup": {"per_message_ns": .., "per_byte_ns": .., "per_block_ns": ..}, ...}}
// format_version 2 adds the collective algorithms' fits:
//    "collectives": {"ranks_measured": [2, 4], "block_bytes_measured": [8, 16384],
//                    "fits": {"alltoall/pairwise": {"fixed_ns": .., "per_message_ns": .., "per_byte_ns": ..}, ...}}
// format_version 3 adds to each fit the timings it was made from:
//    "samples": [[ranks, block_bytes, ns], ...]
// Any version may hold how the paths were timed (optional; older readers skip it):
//    "rounds": {"count": 5, "layouts": 10, "disagreements": [{"bytes": .., "blocks": ..,
//               "chosen": "generic", "round_winner": "pipelined", "ratio": 0.4}, ...]}
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/log.h"
#include "transport/messaging/tuning.h"

namespace ibdt::messaging {
namespace {

using Json = nlohmann::json;

constexpr int kFormatVersion = 1;             // point-to-point paths only
constexpr int kCollectivesFormatVersion = 2;  // ... and a "collectives" object
constexpr int kSamplesFormatVersion = 3;      // ... whose fits carry their samples
constexpr size_t kMaxFileBytes = 256 << 10;  // a real file: ~40 KiB with samples at 2..8 ranks
constexpr double kMaxCostNs = 1e12;         // any fitted term beyond this is nonsense

Status bad(std::string_view what) { return makeError(Code::kInvalidArgument, "tuning file: ", what); }

Result<const Json*> member(const Json& object, const char* name) {
  if (!object.is_object()) return bad("expected an object");
  auto found = object.find(name);
  if (found == object.end()) return bad(strCat("missing \"", name, "\""));
  return &*found;
}

Result<std::string> stringMember(const Json& object, const char* name) {
  IBDT_ASSIGN_OR_RETURN(const Json* value, member(object, name));
  if (!value->is_string()) return bad(strCat("\"", name, "\" must be a string"));
  std::string text = value->get<std::string>();
  if (text.size() > 256) return bad(strCat("\"", name, "\" longer than 256 characters"));
  return text;
}

Result<double> numberMember(const Json& object, const char* name, double min, double max) {
  IBDT_ASSIGN_OR_RETURN(const Json* value, member(object, name));
  if (!value->is_number()) return bad(strCat("\"", name, "\" must be a number"));
  double number = value->get<double>();
  if (!std::isfinite(number) || number < min || number > max) {
    return bad(strCat("\"", name, "\" = ", number, " outside [", min, ", ", max, "]"));
  }
  return number;
}

Result<PathCost> parsePath(const Json& object) {
  PathCost cost;
  cost.measured = true;
  // The fits may go slightly negative where a term is lost in noise; the
  // total must stay positive, which the range check of each term ensures
  // together with decisions clamping at zero.
  IBDT_ASSIGN_OR_RETURN(cost.perMessageNs, numberMember(object, "per_message_ns", -kMaxCostNs, kMaxCostNs));
  IBDT_ASSIGN_OR_RETURN(cost.perByteNs, numberMember(object, "per_byte_ns", -1e3, 1e3));
  IBDT_ASSIGN_OR_RETURN(cost.perBlockNs, numberMember(object, "per_block_ns", -1e6, 1e6));
  return cost;
}

Result<HostKey> parseHost(const Json& root) {
  IBDT_ASSIGN_OR_RETURN(const Json* host, member(root, "host"));
  HostKey key;
  IBDT_ASSIGN_OR_RETURN(key.cpuModel, stringMember(*host, "cpu"));
  // Files written before the CPU's generation was recorded lack "cpu_id":
  // they may come from another CPU of the same name, so they match no host.
  if (host->contains("cpu_id")) {
    IBDT_ASSIGN_OR_RETURN(key.cpuId, stringMember(*host, "cpu_id"));
  }
  IBDT_ASSIGN_OR_RETURN(double cores, numberMember(*host, "cores", 1, 1 << 20));
  key.cores = static_cast<int64_t>(cores);
  IBDT_ASSIGN_OR_RETURN(key.provider, stringMember(*host, "provider"));
  IBDT_ASSIGN_OR_RETURN(key.version, stringMember(*host, "ibdt"));
  return key;
}

// [min, max] of non-negative integers up to `limit`.
Result<std::pair<int64_t, int64_t>> rangeMember(const Json& object, const char* name, double limit) {
  IBDT_ASSIGN_OR_RETURN(const Json* range, member(object, name));
  if (!range->is_array() || range->size() != 2 || !(*range)[0].is_number() || !(*range)[1].is_number()) {
    return bad(strCat("\"", name, "\" must be [min, max]"));
  }
  double low = (*range)[0].get<double>(), high = (*range)[1].get<double>();
  if (!(low >= 0 && low <= high && high <= limit)) return bad(strCat("\"", name, "\" out of order or range"));
  return std::pair{static_cast<int64_t>(low), static_cast<int64_t>(high)};
}

bool validCollectiveName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '/';
  });
}

// A fit's "samples": at most kMaxCollectiveSamples [ranks, block_bytes, ns]
// triples, each (ranks, block_bytes) once, every number finite and in range.
Result<std::vector<CollectiveSample>> parseSamples(const Json& fit) {
  std::vector<CollectiveSample> samples;
  auto found = fit.find("samples");
  if (found == fit.end()) return samples;
  if (!found->is_array()) return bad("\"samples\" must be an array");
  if (found->size() > kMaxCollectiveSamples) {
    return bad(strCat(found->size(), " samples, at most ", kMaxCollectiveSamples));
  }
  for (const Json& item : *found) {
    if (!item.is_array() || item.size() != 3 || !item[0].is_number() || !item[1].is_number() ||
        !item[2].is_number()) {
      return bad("a sample must be [ranks, block_bytes, ns]");
    }
    const double ranks = item[0].get<double>(), block = item[1].get<double>(), ns = item[2].get<double>();
    if (!(ranks >= 1 && ranks <= (1 << 24) && ranks == std::floor(ranks))) return bad("sample ranks out of range");
    if (!(block >= 0 && block <= double(int64_t{1} << 40) && block == std::floor(block))) {
      return bad("sample block_bytes out of range");
    }
    if (!(std::isfinite(ns) && ns > 0 && ns <= kMaxCostNs)) return bad("sample ns out of range");
    const CollectiveSample sample{static_cast<int64_t>(ranks), static_cast<int64_t>(block), ns};
    for (const CollectiveSample& other : samples) {
      if (other.ranks == sample.ranks && other.blockBytes == sample.blockBytes) {
        return bad(strCat("two samples at ", sample.ranks, " ranks, ", sample.blockBytes, " B"));
      }
    }
    samples.push_back(sample);
  }
  return samples;
}

Status parseCollectives(const Json& object, Tuning& tuning, bool withSamples) {
  IBDT_ASSIGN_OR_RETURN(auto ranks, rangeMember(object, "ranks_measured", 1 << 24));
  IBDT_ASSIGN_OR_RETURN(auto blocks, rangeMember(object, "block_bytes_measured", double(int64_t{1} << 40)));
  tuning.collectiveMinRanks = ranks.first;
  tuning.collectiveMaxRanks = ranks.second;
  tuning.collectiveMinBlock = blocks.first;
  tuning.collectiveMaxBlock = blocks.second;
  IBDT_ASSIGN_OR_RETURN(const Json* fits, member(object, "fits"));
  if (!fits->is_object()) return bad("\"collectives.fits\" must be an object");
  if (fits->size() > kMaxCollectiveFits) return bad(strCat(fits->size(), " collective fits, at most ", kMaxCollectiveFits));
  for (const auto& item : fits->items()) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in the lambda below.
    const std::string& name = item.key();
    const Json& value = item.value();
    if (!validCollectiveName(name)) return bad(strCat("collective fit name \"", name.substr(0, 64), "\""));
    CollectiveFit fit{name, {}};
    auto parse = [&]() -> Status {
      IBDT_ASSIGN_OR_RETURN(fit.cost.fixedNs, numberMember(value, "fixed_ns", -kMaxCostNs, kMaxCostNs));
      IBDT_ASSIGN_OR_RETURN(fit.cost.perMessageNs, numberMember(value, "per_message_ns", 0, kMaxCostNs));
      IBDT_ASSIGN_OR_RETURN(fit.cost.perByteNs, numberMember(value, "per_byte_ns", 0, 1e3));
      if (withSamples) {
        IBDT_ASSIGN_OR_RETURN(fit.samples, parseSamples(value));
      }
      return Status::ok();
    };
    IBDT_RETURN_IF_ERROR(parse().withContext(strCat("collective ", name)));
    tuning.collectives.push_back(std::move(fit));
  }
  return Status::ok();
}

// The path named `name`, or -1.
int tunedPathIndex(std::string_view name) {
  for (int p = 0; p < kTunedPathCount; ++p) {
    if (name == tunedPathName(static_cast<TunedPath>(p))) return p;
  }
  return -1;
}

Result<TunedPath> pathMember(const Json& object, const char* name) {
  IBDT_ASSIGN_OR_RETURN(std::string text, stringMember(object, name));
  const int found = tunedPathIndex(text);
  if (found < 0) return bad(strCat("\"", name, "\": unknown path \"", text.substr(0, 64), "\""));
  return static_cast<TunedPath>(found);
}

// The optional "rounds" object (tuning.h, TuningRounds).
Status parseRounds(const Json& root, Tuning& tuning) {
  auto found = root.find("rounds");
  if (found == root.end()) return Status::ok();
  const Json& rounds = *found;
  IBDT_ASSIGN_OR_RETURN(double count, numberMember(rounds, "count", 1, 1000));
  IBDT_ASSIGN_OR_RETURN(double layouts, numberMember(rounds, "layouts", 0, 1000));
  if (count != std::floor(count) || layouts != std::floor(layouts)) return bad("\"rounds\" counts must be integers");
  tuning.rounds.count = static_cast<int64_t>(count);
  tuning.rounds.layouts = static_cast<int64_t>(layouts);
  IBDT_ASSIGN_OR_RETURN(const Json* list, member(rounds, "disagreements"));
  if (!list->is_array()) return bad("\"rounds.disagreements\" must be an array");
  if (list->size() > kMaxRoundDisagreements || static_cast<int64_t>(list->size()) > tuning.rounds.layouts) {
    return bad(strCat(list->size(), " round disagreements, at most one per layout and ", kMaxRoundDisagreements));
  }
  for (const Json& item : *list) {
    RoundDisagreement disagreement;
    IBDT_ASSIGN_OR_RETURN(disagreement.bytes, numberMember(item, "bytes", 0, double(int64_t{1} << 40)));
    IBDT_ASSIGN_OR_RETURN(disagreement.blocks, numberMember(item, "blocks", 0, double(int64_t{1} << 40)));
    IBDT_ASSIGN_OR_RETURN(disagreement.chosen, pathMember(item, "chosen"));
    IBDT_ASSIGN_OR_RETURN(disagreement.roundWinner, pathMember(item, "round_winner"));
    IBDT_ASSIGN_OR_RETURN(disagreement.ratio, numberMember(item, "ratio", 0, 1));
    tuning.rounds.disagreements.push_back(disagreement);
  }
  return Status::ok();
}

}  // namespace

std::string serializeTuning(const Tuning& tuning) {
  Json paths = Json::object();
  for (int p = 0; p < kTunedPathCount; ++p) {
    const PathCost& cost = tuning.paths[static_cast<size_t>(p)];
    if (!cost.measured) continue;
    paths[std::string(tunedPathName(static_cast<TunedPath>(p)))] = {
        {"per_message_ns", cost.perMessageNs}, {"per_byte_ns", cost.perByteNs}, {"per_block_ns", cost.perBlockNs}};
  }
  const bool withSamples = std::any_of(tuning.collectives.begin(), tuning.collectives.end(),
                                      [](const CollectiveFit& fit) { return !fit.samples.empty(); });
  const int version = tuning.collectives.empty() ? kFormatVersion
                      : withSamples                  ? kSamplesFormatVersion
                                                 : kCollectivesFormatVersion;
  Json root = {{"format", "ibdt-tune"},
               {"format_version", version},
               {"host",
                {{"cpu", tuning.key.cpuModel},
                 {"cpu_id", tuning.key.cpuId},
                 {"cores", tuning.key.cores},
                 {"provider", tuning.key.provider},
                 {"ibdt", tuning.key.version}}},
               {"bytes_measured", {tuning.minBytes, tuning.maxBytes}},
               {"paths", paths}};
  if (tuning.rounds.count > 0) {
    Json disagreements = Json::array();
    for (const RoundDisagreement& d : tuning.rounds.disagreements) {
      disagreements.push_back({{"bytes", d.bytes},
                               {"blocks", d.blocks},
                               {"chosen", tunedPathName(d.chosen)},
                               {"round_winner", tunedPathName(d.roundWinner)},
                               {"ratio", d.ratio}});
    }
    root["rounds"] = {
        {"count", tuning.rounds.count}, {"layouts", tuning.rounds.layouts}, {"disagreements", disagreements}};
  }
  if (!tuning.collectives.empty()) {
    Json fits = Json::object();
    for (const CollectiveFit& fit : tuning.collectives) {
      fits[fit.name] = {{"fixed_ns", fit.cost.fixedNs},
                        {"per_message_ns", fit.cost.perMessageNs},
                        {"per_byte_ns", fit.cost.perByteNs}};
      if (fit.samples.empty()) continue;
      Json samples = Json::array();
      for (const CollectiveSample& sample : fit.samples) samples.push_back({sample.ranks, sample.blockBytes, sample.ns});
      fits[fit.name]["samples"] = samples;
    }
    root["collectives"] = {{"ranks_measured", {tuning.collectiveMinRanks, tuning.collectiveMaxRanks}},
                           {"block_bytes_measured", {tuning.collectiveMinBlock, tuning.collectiveMaxBlock}},
                           {"fits", fits}};
  }
  return root.dump(2) + "\n";
}

Result<Tuning> parseTuning(std::string_view text) {
  if (text.size() > kMaxFileBytes) return bad(strCat(text.size(), " bytes, more than a tuning file holds"));
  Json root = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return bad("not valid JSON (truncated or corrupt)");
  IBDT_ASSIGN_OR_RETURN(std::string format, stringMember(root, "format"));
  if (format != "ibdt-tune") return bad(strCat("format \"", format, "\" is not ibdt-tune"));
  IBDT_ASSIGN_OR_RETURN(double version, numberMember(root, "format_version", 0, 1e9));
  if (version != kFormatVersion && version != kCollectivesFormatVersion && version != kSamplesFormatVersion) {
    return bad(strCat("format_version ", version, ", this ibdt reads ", kFormatVersion, " to ",
                      kSamplesFormatVersion));
  }
  Tuning tuning;
  IBDT_ASSIGN_OR_RETURN(tuning.key, parseHost(root));
  IBDT_ASSIGN_OR_RETURN(const Json* range, member(root, "bytes_measured"));
  if (!range->is_array() || range->size() != 2 || !(*range)[0].is_number() || !(*range)[1].is_number()) {
    return bad("\"bytes_measured\" must be [min, max]");
  }
  double low = (*range)[0].get<double>(), high = (*range)[1].get<double>();
  if (!(low >= 0 && low <= high && high <= double(int64_t{1} << 40)))
    return bad("\"bytes_measured\" out of order or range");
  tuning.minBytes = static_cast<int64_t>(low);
  tuning.maxBytes = static_cast<int64_t>(high);
  IBDT_ASSIGN_OR_RETURN(const Json* paths, member(root, "paths"));
  if (!paths->is_object()) return bad("\"paths\" must be an object");
  for (const auto& [name, value] : paths->items()) {
    const int found = tunedPathIndex(name);
    if (found < 0) return bad(strCat("unknown path \"", name.substr(0, 64), "\""));
    auto cost = parsePath(value);
    if (!cost.isOk()) return std::move(cost).takeStatus().withContext(strCat("path ", name));
    tuning.paths[static_cast<size_t>(found)] = *cost;
  }
  if (version >= kCollectivesFormatVersion) {
    IBDT_ASSIGN_OR_RETURN(const Json* collectives, member(root, "collectives"));
    IBDT_RETURN_IF_ERROR(parseCollectives(*collectives, tuning, version >= kSamplesFormatVersion));
  }
  IBDT_RETURN_IF_ERROR(parseRounds(root, tuning));
  return tuning;
}

LoadedTuning loadTuning(std::string_view setting, const HostKey& key) {
  LoadedTuning loaded;
  if (setting == kTuneFileOff || setting.empty()) {
    loaded.note = "off: built-in defaults";
    return loaded;
  }
  const bool byDefault = setting == kTuneFileAuto;
  loaded.path = byDefault ? defaultTuneFilePath(key) : std::string(setting);
  std::ifstream in(loaded.path, std::ios::binary);
  if (!in) {
    loaded.note = strCat("no file ", loaded.path, ": built-in defaults (run ibdt-tune)");
    if (!byDefault) IBDT_LOG(kWarn, "IBDT_TUNE_FILE=", loaded.path, " cannot be read; built-in defaults apply");
    return loaded;
  }
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  auto parsed = parseTuning(text);
  if (!parsed.isOk()) {
    loaded.note = strCat("ignored ", loaded.path, ": ", parsed.status().toString(), "; built-in defaults");
  } else if (!(parsed->key == key)) {
    const HostKey& other = parsed->key;
    loaded.note = strCat("ignored ", loaded.path, ": made for ", other.cpuModel, " (",
                         other.cpuId.empty() ? "generation not recorded" : other.cpuId, "), ", other.cores,
                         " cores, ", other.provider, ", ibdt ", other.version, "; this is ", key.cpuModel, " (",
                         key.cpuId, "), ", key.cores, " cores, ", key.provider, ", ibdt ", key.version,
                         " (run ibdt-tune); built-in defaults");
  } else {
    loaded.tuning = std::move(*parsed);
    loaded.note = strCat("in force: ", loaded.path);
    return loaded;
  }
  log::once(log::Level::kWarn, "tuning-file-ignored", loaded.note);
  return loaded;
}

Status writeTuningFile(const std::string& path, const Tuning& tuning) {
  std::error_code error;
  std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), error);
  if (error) return makeError(Code::kSystem, "creating ", target.parent_path().string(), ": ", error.message());
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << serializeTuning(tuning);
    out.close();
    if (!out) return makeError(Code::kSystem, "writing ", temporary, ": ", std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    int saved = errno;
    std::remove(temporary.c_str());
    return makeError(Code::kSystem, "renaming ", temporary, " to ", path, ": ", std::strerror(saved));
  }
  return Status::ok();
}

}  // namespace ibdt::messaging
