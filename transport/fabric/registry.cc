// The provider registry: which providers are compiled in, which can be
// opened here, and openDomain() with "auto" selection and IBDT_PROVIDER.
#include <algorithm>

#include "base/config.h"
#include "base/log.h"
#include "ibdt/fabric.h"
#include "transport/fabric/providers.h"

namespace ibdt::fabric {
namespace {

struct ProviderEntry {
  const char* name;
  ProviderInfo (*probe)();
  Result<std::unique_ptr<Domain>> (*open)(const DomainOptions&);
};

// In order of preference for "auto".
constexpr ProviderEntry kProviders[] = {
#if defined(IBDT_FABRIC_HAVE_VERBS)
    {"verbs", &verbs::probe, &verbs::open},
#endif
    {"shm", &shm::probe, &shm::open},
};

std::string compiledNames() {
  std::string names;
  for (const auto& entry : kProviders) names += strCat(names.empty() ? "" : ", ", entry.name);
  return names;
}

}  // namespace

std::vector<ProviderInfo> probeProviders() {
  std::vector<ProviderInfo> infos;
  for (const auto& entry : kProviders) infos.push_back(entry.probe());
  return infos;
}

Result<std::unique_ptr<Domain>> openDomain(std::string_view provider, const DomainOptions& options) {
  std::string wanted(provider);
  if (wanted == "auto") {
    IBDT_ASSIGN_OR_RETURN(std::string fromEnv, config::getString("IBDT_PROVIDER"));
    wanted = fromEnv;
  }
  if (wanted != "auto") {
    for (const auto& entry : kProviders) {
      if (wanted == entry.name) {
        auto domain = entry.open(options);
        if (!domain.isOk()) return std::move(domain).takeStatus().withContext(strCat("opening provider ", wanted));
        return domain;
      }
    }
    return makeError(Code::kNotFound, "fabric provider '", wanted, "' is not compiled in (available: ",
                     compiledNames(), ")");
  }
  // auto: the first provider that probes available.
  std::string reasons;
  for (const auto& entry : kProviders) {
    ProviderInfo info = entry.probe();
    if (!info.available) {
      reasons += strCat("; ", entry.name, ": ", info.detail);
      continue;
    }
    auto domain = entry.open(options);
    if (domain.isOk()) {
      IBDT_LOG(kInfo, "fabric: opened provider ", entry.name, " (", info.detail, ")");
      return domain;
    }
    reasons += strCat("; ", entry.name, ": ", domain.status().toString());
  }
  return makeError(Code::kNotFound, "no fabric provider could be opened", reasons);
}

}  // namespace ibdt::fabric
