// tests/messaging/mp_support.h — what the multi-process messaging tests
// share: one domain per rank over the default provider, opened once with a
// job-unique tag, and deterministic payloads.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ibdt/fabric.h"
#include "ibdt/store.h"
#include "support/mp_test.h"
#include "support/pattern.h"

namespace ibdt::messaging::testing {

// A job-unique tag for the provider's shared resources: rank 0's pid.
inline std::string jobTag(bootstrap::Store& store) {
  uint32_t pid = static_cast<uint32_t>(getpid());
  std::vector<uint8_t> mine(sizeof(pid));
  std::memcpy(mine.data(), &pid, sizeof(pid));
  auto all = store.allgather(mine, test::mpDeadline());
  EXPECT_TRUE(all.isOk());
  std::memcpy(&pid, (*all)[0].data(), sizeof(pid));
  return "msg-mp-" + std::to_string(pid);
}

// This rank's domain ("auto" provider), opened at first use (collective).
inline std::unique_ptr<fabric::Domain>& mpDomain() {
  static std::unique_ptr<fabric::Domain> opened;
  if (!opened) {
    auto result = fabric::openDomain("auto", {jobTag(test::mpStore()), ""});
    EXPECT_TRUE(result.isOk()) << result.status().toString();
    if (result.isOk()) opened = std::move(result).value();
  }
  return opened;
}

using ibdt::test::pattern;  // tests/support/pattern.h

}  // namespace ibdt::messaging::testing
