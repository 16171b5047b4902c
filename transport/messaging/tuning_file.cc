// The tuning file: JSON text, parsed as hostile input (tuning.h).
//
//   {"format": "ibdt-tune", "format_version": 1,
//    "host": {"cpu": "...", "cores": 2, "provider": "shm", "ibdt": "0.1.0"},
//    "bytes_measured": [32768, 1048576],
//    "paths": {"bc-spup": {"per_message_ns": .., "per_byte_ns": .., "per_block_ns": ..}, ...}}
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

constexpr int kFormatVersion = 1;
constexpr size_t kMaxFileBytes = 64 << 10;  // a real file is under 2 KiB
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
  IBDT_ASSIGN_OR_RETURN(double cores, numberMember(*host, "cores", 1, 1 << 20));
  key.cores = static_cast<int64_t>(cores);
  IBDT_ASSIGN_OR_RETURN(key.provider, stringMember(*host, "provider"));
  IBDT_ASSIGN_OR_RETURN(key.version, stringMember(*host, "ibdt"));
  return key;
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
  Json root = {{"format", "ibdt-tune"},
               {"format_version", kFormatVersion},
               {"host",
                {{"cpu", tuning.key.cpuModel},
                 {"cores", tuning.key.cores},
                 {"provider", tuning.key.provider},
                 {"ibdt", tuning.key.version}}},
               {"bytes_measured", {tuning.minBytes, tuning.maxBytes}},
               {"paths", paths}};
  return root.dump(2) + "\n";
}

Result<Tuning> parseTuning(std::string_view text) {
  if (text.size() > kMaxFileBytes) return bad(strCat(text.size(), " bytes, more than a tuning file holds"));
  Json root = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return bad("not valid JSON (truncated or corrupt)");
  IBDT_ASSIGN_OR_RETURN(std::string format, stringMember(root, "format"));
  if (format != "ibdt-tune") return bad(strCat("format \"", format, "\" is not ibdt-tune"));
  IBDT_ASSIGN_OR_RETURN(double version, numberMember(root, "format_version", 0, 1e9));
  if (version != kFormatVersion) return bad(strCat("format_version ", version, ", this ibdt reads ", kFormatVersion));
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
    int found = -1;
    for (int p = 0; p < kTunedPathCount; ++p) {
      if (name == tunedPathName(static_cast<TunedPath>(p))) found = p;
    }
    if (found < 0) return bad(strCat("unknown path \"", name.substr(0, 64), "\""));
    auto cost = parsePath(value);
    if (!cost.isOk()) return std::move(cost).takeStatus().withContext(strCat("path ", name));
    tuning.paths[static_cast<size_t>(found)] = *cost;
  }
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
    loaded.note = strCat("ignored ", loaded.path, ": made for ", other.cpuModel, ", ", other.cores, " cores, ",
                         other.provider, ", ibdt ", other.version, "; this is ", key.cpuModel, ", ", key.cores,
                         " cores, ", key.provider, ", ibdt ", key.version, " (run ibdt-tune); built-in defaults");
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
