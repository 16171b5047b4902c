// The host key of a tuning file and where the file lives (tuning.h).
#include "transport/messaging/tuning.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>

namespace ibdt::messaging {
namespace {

constexpr std::array<std::string_view, kTunedPathCount> kPathNames = {
    "pipelined", "pipelined-contig", "contig", "bc-spup", "rwg-up", "multi-w", "p-rrs", "generic"};

// The first "model name" of /proc/cpuinfo (x86, most arm64 kernels show it);
// "unknown-cpu" where the kernel shows none.
std::string cpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? std::string("unknown-cpu") : line.substr(begin);
  }
  return "unknown-cpu";
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
  return slug(cpuModel) + "-" + std::to_string(cores) + "c-" + slug(provider) + "-" + slug(version);
}

HostKey currentHostKey(std::string_view provider) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return HostKey{cpuModelName(), cores > 0 ? cores : 1, std::string(provider), IBDT_VERSION_STRING};
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
