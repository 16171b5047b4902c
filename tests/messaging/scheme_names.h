// tests/messaging/scheme_names.h — gtest parameter names for schemes.
#pragma once

#include <string>

#include "ibdt/messaging.h"

namespace ibdt::messaging::testing {

// "bc-spup" -> "bcspup": gtest names allow only letters, digits and '_'.
inline std::string schemeTestName(Scheme scheme) {
  std::string name(schemeName(scheme));
  std::erase(name, '-');
  return name;
}

}  // namespace ibdt::messaging::testing
