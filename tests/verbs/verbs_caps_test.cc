// Opening the verbs provider: probe, device/port/GID selection, caps() from
// the device, the registration cost model, and configuration errors.
#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>

#include "tests/verbs/verbs_test_util.h"

#include "support/scoped_env.h"

using ibdt::test::ScopedEnv;

namespace ibdt::fabric::testing {
namespace {

TEST(VerbsProbe, ReportsDevicesOrWhyNot) {
  ProviderInfo info = verbsInfo();
  EXPECT_EQ(info.name, "verbs");
  EXPECT_FALSE(info.detail.empty());
  std::printf("verbs probe: available=%d %s\n", info.available, info.detail.c_str());
  if (insideRxeVm()) {
    EXPECT_TRUE(info.available);
    EXPECT_NE(info.detail.find("rxe0:1 active Ethernet"), std::string::npos) << info.detail;
  }
}

TEST(VerbsCaps, PublishesTheDeviceLimits) {
  IBDT_OPEN_VERBS_OR_SKIP(domain);
  const Caps& caps = domain->caps();
  std::printf(
      "caps: provider=%s device=%s maxSendSge=%u maxRecvSge=%u maxInline=%u maxMessageSize=%llu "
      "maxSendQueueDepth=%u maxRecvQueueDepth=%u maxCompletionQueueDepth=%u maxReadsInFlight=%u rdmaRead=%d "
      "writeWithImm=%d pageSize=%zu registration=%.0f ns + %.1f ns/page transfer=%.0f ns/request + %.3f B/ns\n",
      caps.provider.c_str(), caps.device.c_str(), caps.maxSendSge, caps.maxRecvSge, caps.maxInline,
      static_cast<unsigned long long>(caps.maxMessageSize), caps.maxSendQueueDepth, caps.maxRecvQueueDepth,
      caps.maxCompletionQueueDepth, caps.maxReadsInFlight, caps.rdmaRead, caps.writeWithImm, caps.pageSize,
      caps.registration.fixedNs, caps.registration.perPageNs, caps.transfer.perRequestNs, caps.transfer.bytesPerNs);
  EXPECT_EQ(caps.provider, "verbs");
  EXPECT_NE(caps.device.find(':'), std::string::npos);
  EXPECT_GE(caps.maxSendSge, 1u);
  EXPECT_GE(caps.maxRecvSge, 1u);
  EXPECT_GT(caps.maxMessageSize, 0u);
  EXPECT_GT(caps.maxSendQueueDepth, 0u);
  EXPECT_GT(caps.maxCompletionQueueDepth, 0u);
  EXPECT_GE(caps.maxReadsInFlight, 1u);
  EXPECT_TRUE(caps.rdmaRead);
  EXPECT_TRUE(caps.writeWithImm);
  EXPECT_GT(caps.registration.fixedNs + caps.registration.perPageNs, 0.0);
  EXPECT_GT(caps.transfer.bytesPerNs, 0.0);
  if (insideRxeVm()) {
    // What rdma_rxe publishes (Linux 6.1): see README, "Where rxe differs from real HCAs".
    EXPECT_EQ(caps.device, "rxe0:1");
    EXPECT_EQ(caps.maxSendSge, 32u);
    EXPECT_GT(caps.maxInline, 0u);
    EXPECT_EQ(caps.maxMessageSize, 8u << 20);
  }
}

TEST(VerbsCaps, NamedDeviceAndPortAreHonoured) {
  IBDT_OPEN_VERBS_OR_SKIP(first);
  std::string device = first->caps().device;  // "name:port"
  DomainOptions options;
  options.device = device.substr(0, device.find(':'));
  auto byName = openVerbsDomain(options);
  ASSERT_TRUE(byName.isOk()) << byName.status().toString();
  EXPECT_EQ((*byName)->caps().device, device);

  options.device = "no_such_device0:1";
  auto missing = openVerbsDomain(options);
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("no_such_device0"), std::string_view::npos);

  options.device = device.substr(0, device.find(':')) + ":77";
  auto badPort = openVerbsDomain(options);
  ASSERT_FALSE(badPort.isOk());
  EXPECT_EQ(badPort.status().code(), Code::kNotFound) << badPort.status().toString();

  options.device = "rxe0:x";
  auto malformed = openVerbsDomain(options);
  ASSERT_FALSE(malformed.isOk());
  EXPECT_EQ(malformed.status().code(), Code::kInvalidArgument) << malformed.status().toString();
}

TEST(VerbsCaps, GidIndexKnobIsValidated) {
  IBDT_OPEN_VERBS_OR_SKIP(domain);
  {
    ScopedEnv env("IBDT_VERBS_GID_INDEX", "200");
    auto missing = openVerbsDomain(DomainOptions{});
    if (insideRxeVm()) {  // rxe0 has GIDs 0 and 1 only
      ASSERT_FALSE(missing.isOk());
      EXPECT_EQ(missing.status().code(), Code::kNotFound);
      EXPECT_NE(missing.status().message().find("IBDT_VERBS_GID_INDEX"), std::string_view::npos);
    }
  }
  {
    ScopedEnv env("IBDT_VERBS_GID_INDEX", "banana");
    auto bad = openVerbsDomain(DomainOptions{});
    ASSERT_FALSE(bad.isOk());
    EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  }
  if (insideRxeVm()) {
    // Index 0 is rxe's link-local RoCE v2 GID: also usable, and chosen only when asked for.
    ScopedEnv env("IBDT_VERBS_GID_INDEX", "0");
    auto zero = openVerbsDomain(DomainOptions{});
    ASSERT_TRUE(zero.isOk()) << zero.status().toString();
    Pair pair = connectPair(**zero);
    ASSERT_TRUE(pair.a && pair.b);
    EXPECT_EQ(pair.a->state(), EndpointState::kConnected);
  }
}

TEST(VerbsMemory, RegistersCallerMemoryWithItsAccess) {
  IBDT_OPEN_VERBS_OR_SKIP(domain);
  std::vector<uint8_t> buffer(3 * 4096 + 100);
  auto region = domain->registerMemory(buffer.data() + 10, buffer.size() - 10, kLocalWrite | kRemoteRead);
  ASSERT_TRUE(region.isOk()) << region.status().toString();
  EXPECT_EQ((*region)->address(), buffer.data() + 10);
  EXPECT_EQ((*region)->length(), buffer.size() - 10);
  EXPECT_EQ((*region)->access(), uint32_t{kLocalWrite | kRemoteRead});
  RemoteKey key = (*region)->remoteKey();
  EXPECT_EQ(key.address, reinterpret_cast<uint64_t>(buffer.data() + 10));
  EXPECT_EQ(key.rkey, (*region)->rkey());

  auto allocated = domain->allocateMemory(5000, kLocalWrite);
  ASSERT_TRUE(allocated.isOk()) << allocated.status().toString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*allocated)->address()) % domain->caps().pageSize, 0u);
  EXPECT_GE((*allocated)->length(), 5000u);
  std::memset((*allocated)->address(), 0x5a, (*allocated)->length());  // writable, all of it
}

TEST(VerbsMemory, RejectsBadRegistrations) {
  IBDT_OPEN_VERBS_OR_SKIP(domain);
  std::vector<uint8_t> buffer(64);
  auto empty = domain->registerMemory(buffer.data(), 0, kLocalWrite);
  ASSERT_FALSE(empty.isOk());
  EXPECT_EQ(empty.status().code(), Code::kInvalidArgument);
  auto flags = domain->registerMemory(buffer.data(), buffer.size(), 1u << 9);
  ASSERT_FALSE(flags.isOk());
  EXPECT_EQ(flags.status().code(), Code::kInvalidArgument);
  EXPECT_NE(flags.status().message().find("access"), std::string_view::npos);
  auto remoteOnly = domain->registerMemory(buffer.data(), buffer.size(), kRemoteWrite);
  ASSERT_FALSE(remoteOnly.isOk());
  EXPECT_EQ(remoteOnly.status().code(), Code::kInvalidArgument);

  // A range with an unmapped hole fails like ibv_reg_mr (optimistic group registration depends on it).
  size_t page = domain->caps().pageSize;
  void* map = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::memset(map, 1, 3 * page);
  ASSERT_EQ(munmap(static_cast<uint8_t*>(map) + page, page), 0);
  auto hole = domain->registerMemory(map, 3 * page, kLocalWrite);
  EXPECT_FALSE(hole.isOk());
  if (!hole.isOk()) std::printf("unmapped hole: %s\n", hole.status().toString().c_str());
  munmap(map, page);
  munmap(static_cast<uint8_t*>(map) + 2 * page, page);
}

}  // namespace
}  // namespace ibdt::fabric::testing
