// The host key of a tuning file and where the file lives (tuning.h).
#include "transport/messaging/tuning.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>

namespace ibdt::messaging {
namespace {

constexpr std::array<std::string_view, kTunedPathCount> kPathNames = {
    "pipelined", "pipelined-contig", "contig", "bc-spup", "rwg-up", "multi-w", "p-rrs", "generic"};

// The fields of the first processor in /proc/cpuinfo, by name.
using CpuFields = std::map<std::string, std::string, std::less<>>;
CpuFields firstProcessorFields() {
  CpuFields fields;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.empty() && !fields.empty()) break;  // the first processor's block has ended
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    const auto nameEnd = line.find_last_not_of(" \t", colon - 1);
    if (nameEnd == std::string::npos) continue;
    const auto valueBegin = line.find_first_not_of(" \t", colon + 1);
    fields.emplace(line.substr(0, nameEnd + 1), valueBegin == std::string::npos ? "" : line.substr(valueBegin));
  }
  return fields;
}

// "model name" (x86, most arm64 kernels); "unknown-cpu" where there is none.
std::string cpuModelName(const CpuFields& fields) {
  auto found = fields.find("model name");
  return found == fields.end() || found->second.empty() ? std::string("unknown-cpu") : found->second;
}

// The generation fields present of x86's or arm64's, "name value" each.
std::string cpuIdentity(const CpuFields& fields) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kIdentityFields = {{
      {"cpu family", "family"},
      {"model", "model"},
      {"stepping", "stepping"},
      {"CPU implementer", "implementer"},
      {"CPU part", "part"},
      {"CPU variant", "variant"},
      {"CPU revision", "revision"},
  }};
  std::string identity;
  for (auto [field, label] : kIdentityFields) {
    auto found = fields.find(field);
    if (found == fields.end() || found->second.empty()) continue;
    if (!identity.empty()) identity += ' ';
    identity.append(label).append(" ").append(found->second);
  }
  return identity.empty() ? std::string("unknown") : identity;
}

// Lower-case letters and digits, every other run of characters one '-'.
std::string slug(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.substr(0, 48);
}

}  // namespace

std::string_view tunedPathName(TunedPath path) {
  auto index = static_cast<size_t>(path);
  return index < kPathNames.size() ? kPathNames[index] : "unknown";
}

std::string HostKey::fileStem() const {
  return slug(cpuModel) + "-" + slug(cpuId) + "-" + std::to_string(cores) + "c-" + slug(provider) + "-" +
         slug(version);
}

HostKey currentHostKey(std::string_view provider) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  auto fields = firstProcessorFields();
  return HostKey{cpuModelName(fields), cpuIdentity(fields), cores > 0 ? cores : 1, std::string(provider),
                 IBDT_VERSION_STRING};
}

std::string defaultTuneFilePath(const HostKey& key) {
  std::string directory;
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (cache != nullptr && cache[0] == '/')
    directory = cache;
  else if (home != nullptr && home[0] != '\0')
    directory = std::string(home) + "/.cache";
  else
    directory = "/tmp";
  return directory + "/ibdt/tune-" + key.fileStem() + ".json";
}

}  // namespace ibdt::messaging
