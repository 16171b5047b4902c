// tests/verbs/verbs_test_util.h — shared pieces of the verbs provider tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ibdt/fabric.h"
#include "support/pattern.h"

namespace ibdt::fabric::testing {

// Set by tests/verbs/run-in-rxe-vm.sh inside the Soft-RoCE guest.
inline bool insideRxeVm() { return std::getenv("RXE_VM") != nullptr; }

// The registry's view of the verbs provider.
inline ProviderInfo verbsInfo() {
  for (ProviderInfo& info : probeProviders()) {
    if (info.name == "verbs") return info;
  }
  return {"verbs", false, "not compiled in"};
}

inline Result<std::unique_ptr<Domain>> openVerbsDomain(const DomainOptions& options) {
  return openDomain("verbs", options);
}

// Opens the verbs domain, or returns null with the reason when no active
// RDMA port exists (the test then skips, or fails inside the guest).
inline std::unique_ptr<Domain> openVerbs(std::string* why) {
  ProviderInfo info = verbsInfo();
  if (!info.available) {
    *why = info.detail;
    return nullptr;
  }
  auto domain = openVerbsDomain(DomainOptions{});
  if (!domain.isOk()) {
    *why = domain.status().toString();
    ADD_FAILURE() << "probe says available but open failed: " << *why;
    return nullptr;
  }
  return std::move(domain).value();
}

#define IBDT_OPEN_VERBS_OR_SKIP(domain)                                                         \
  std::string domain##Why;                                                                     \
  auto domain = ::ibdt::fabric::testing::openVerbs(&domain##Why);                              \
  if (!domain) {                                                                               \
    if (::ibdt::fabric::testing::insideRxeVm()) FAIL() << "no verbs device in the rxe guest: " << domain##Why; \
    GTEST_SKIP() << "no active RDMA port: " << domain##Why;                                    \
  }

// Collects `count` completions, sleeping in wait() between empty polls.
inline std::vector<Completion> collect(CompletionQueue& cq, size_t count,
                                       std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<Completion> got;
  Deadline deadline = Deadline::after(limit);
  Completion batch[16];
  while (got.size() < count && !deadline.expired()) {
    size_t n = cq.poll(std::span<Completion>(batch, std::min<size_t>(16, count - got.size())));
    got.insert(got.end(), batch, batch + n);
    if (n == 0) {
      Status status = cq.wait(Deadline::after(std::chrono::milliseconds(200)));
      if (status.isError() && status.code() != Code::kTimeout) ADD_FAILURE() << status.toString();
    }
  }
  EXPECT_EQ(got.size(), count) << "completions missing after " << limit.count() << " s";
  return got;
}

// "status 4 (vendor error 0x..)" for failure messages.
inline std::string completionStatusCode(const Completion& completion) {
  char text[64];
  std::snprintf(text, sizeof(text), "status %d (vendor error 0x%x)", static_cast<int>(completion.status),
                completion.vendorError);
  return text;
}

// Polls briefly for completions that must not exist.
inline size_t pollAll(CompletionQueue& cq) {
  Completion batch[16];
  size_t total = 0;
  for (size_t n; (n = cq.poll(batch)) > 0;) total += n;
  return total;
}

// Two endpoints of one domain connected to each other ("loopback" over the device).
struct Pair {
  std::unique_ptr<CompletionQueue> cqA, cqB;
  std::unique_ptr<Endpoint> a, b;
};

inline Pair connectPair(Domain& domain, const EndpointOptions& options = {}, uint32_t cqDepth = 1024) {
  Pair pair;
  auto cqA = domain.createCompletionQueue(cqDepth);
  auto cqB = domain.createCompletionQueue(cqDepth);
  EXPECT_TRUE(cqA.isOk() && cqB.isOk());
  if (!cqA.isOk() || !cqB.isOk()) return pair;
  pair.cqA = std::move(cqA).value();
  pair.cqB = std::move(cqB).value();
  auto a = domain.createEndpoint(*pair.cqA, *pair.cqA, options);
  auto b = domain.createEndpoint(*pair.cqB, *pair.cqB, options);
  EXPECT_TRUE(a.isOk()) << a.status().toString();
  EXPECT_TRUE(b.isOk()) << b.status().toString();
  if (!a.isOk() || !b.isOk()) return pair;
  pair.a = std::move(a).value();
  pair.b = std::move(b).value();
  pair.a->setPeerLabel("endpoint b");
  pair.b->setPeerLabel("endpoint a");
  Status ca = pair.a->connect(pair.b->address());
  Status cb = pair.b->connect(pair.a->address());
  EXPECT_TRUE(ca.isOk()) << ca.toString();
  EXPECT_TRUE(cb.isOk()) << cb.toString();
  return pair;
}

// Deterministic, position- and seed-dependent contents (tests/support/pattern.h).
using ibdt::test::fillPattern;
using ibdt::test::patternByte;

inline std::unique_ptr<MemoryRegion> allocate(Domain& domain, size_t bytes,
                                              uint32_t access = kLocalWrite | kRemoteWrite | kRemoteRead) {
  auto region = domain.allocateMemory(bytes, access);
  EXPECT_TRUE(region.isOk()) << region.status().toString();
  return region.isOk() ? std::move(region).value() : nullptr;
}

inline uint8_t* bytesOf(const MemoryRegion& region) { return static_cast<uint8_t*>(region.address()); }

// A source filled with pattern `seed` and a zeroed target, `bytes` each.
struct SourceTarget {
  std::unique_ptr<MemoryRegion> source, target;
};
inline SourceTarget sourceAndTarget(Domain& domain, size_t bytes, uint32_t seed,
                                    uint32_t targetAccess = kLocalWrite | kRemoteWrite | kRemoteRead) {
  SourceTarget regions{allocate(domain, bytes), allocate(domain, bytes, targetAccess)};
  if (regions.source && regions.target) {
    fillPattern(bytesOf(*regions.source), regions.source->length(), seed);
    std::memset(bytesOf(*regions.target), 0, regions.target->length());
  }
  return regions;
}

// Opens the domain (or skips) and connects a pair: connectPair(*domain, ...).
#define IBDT_CONNECTED_PAIR_OR_SKIP(domain, pair, ...)                                                \
  IBDT_OPEN_VERBS_OR_SKIP(domain);                                                                    \
  ::ibdt::fabric::testing::Pair pair = ::ibdt::fabric::testing::connectPair(*domain __VA_OPT__(, ) __VA_ARGS__); \
  ASSERT_TRUE(pair.a && pair.b)

inline Sge sgeOf(const MemoryRegion& region, size_t offset, uint32_t length) {
  return {reinterpret_cast<uint64_t>(bytesOf(region) + offset), length, region.lkey()};
}

}  // namespace ibdt::fabric::testing
