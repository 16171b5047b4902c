// Provider-independent pieces: remote keys, completion statuses, the registry.
#include <stdlib.h>

#include <array>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "ibdt/fabric.h"

#include "support/scoped_env.h"

using ibdt::test::ScopedEnv;

namespace ibdt::fabric {
namespace {

TEST(RemoteKey, RoundTripsThroughTheWireFormat) {
  RemoteKey key{0x00007f1234567000ull, 0x123456789ull, 0xfeedface00000011ull};
  std::array<uint8_t, RemoteKey::kWireSize> wire{};
  key.serialize(wire);
  EXPECT_EQ(wire[0], 0x00);  // little endian
  EXPECT_EQ(wire[1], 0x70);
  auto parsed = RemoteKey::parse(wire);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
  EXPECT_EQ(parsed->address, key.address);
  EXPECT_EQ(parsed->length, key.length);
  EXPECT_EQ(parsed->rkey, key.rkey);
}

TEST(RemoteKey, RejectsWrongSizeAndWrappingRanges) {
  std::array<uint8_t, 23> tooShort{};
  EXPECT_EQ(RemoteKey::parse(tooShort).status().code(), Code::kProtocol);
  std::array<uint8_t, RemoteKey::kWireSize> wire{};
  RemoteKey{~0ull - 10, 100, 1}.serialize(wire);
  auto parsed = RemoteKey::parse(wire);
  EXPECT_EQ(parsed.status().code(), Code::kProtocol);
  EXPECT_NE(parsed.status().message().find("wraps"), std::string_view::npos);
}

TEST(CompletionStatus, NamesAndErrorsNameOperationStatusAndPeer) {
  EXPECT_EQ(completionStatusName(CompletionStatus::kRemoteAccess), "remote-access-error");
  EXPECT_EQ(completionStatusName(CompletionStatus::kFlushed), "flushed");
  Completion completion;
  completion.id = 42;
  completion.opcode = Opcode::kWrite;
  EXPECT_TRUE(completionError(completion, "rank 3").isOk());
  completion.status = CompletionStatus::kRemoteAccess;
  Status status = completionError(completion, "rank 3");
  EXPECT_EQ(status.code(), Code::kRemoteAccess);
  EXPECT_NE(status.message().find("rdma-write"), std::string_view::npos);
  EXPECT_NE(status.message().find("rank 3"), std::string_view::npos);
  EXPECT_NE(status.message().find("42"), std::string_view::npos);
  completion.status = CompletionStatus::kRetryExceeded;
  EXPECT_EQ(completionError(completion, "x").code(), Code::kPeerFailed);
  completion.status = CompletionStatus::kFlushed;
  EXPECT_EQ(completionError(completion, "x").code(), Code::kFlushed);
}

TEST(Registry, ShmIsCompiledInAndAvailable) {
  bool found = false;
  for (const ProviderInfo& info : probeProviders()) {
    if (info.name == "shm") {
      found = true;
      EXPECT_TRUE(info.available) << info.detail;
      EXPECT_FALSE(info.detail.empty());
    }
  }
  EXPECT_TRUE(found);
}

TEST(Registry, UnknownProviderIsNotFound) {
  auto domain = openDomain("carrier-pigeon", {});
  EXPECT_EQ(domain.status().code(), Code::kNotFound);
  EXPECT_NE(domain.status().message().find("shm"), std::string_view::npos) << domain.status().toString();
}

TEST(Registry, AutoOpensAProviderWithCaps) {
  auto domain = openDomain("auto", {});
  ASSERT_TRUE(domain.isOk()) << domain.status().toString();
  const Caps& caps = (*domain)->caps();
  EXPECT_FALSE(caps.provider.empty());
  EXPECT_GE(caps.maxSendSge, 1u);
  EXPECT_GE(caps.maxMessageSize, 1u << 20);
  EXPECT_GT(caps.transfer.bytesPerNs, 0);
}

// A bad knob is a clear error at open, never a silent default.
TEST(Registry, BadKnobsAreClearErrors) {
  {
    ScopedEnv env("IBDT_PROVIDER", "carrier-pigeon");
    auto domain = openDomain("auto", {});
    EXPECT_EQ(domain.status().code(), Code::kNotFound);
    EXPECT_NE(domain.status().message().find("carrier-pigeon"), std::string_view::npos) << domain.status().toString();
  }
  {
    ScopedEnv env("IBDT_SHM_LIVENESS_MS", "0");
    auto domain = openDomain("shm", {});
    EXPECT_EQ(domain.status().code(), Code::kInvalidArgument);
    EXPECT_NE(domain.status().message().find("IBDT_SHM_LIVENESS_MS"), std::string_view::npos)
        << domain.status().toString();
  }
  {
    ScopedEnv env("IBDT_SHM_CMA", "sometimes");
    auto domain = openDomain("shm", {});
    EXPECT_EQ(domain.status().code(), Code::kInvalidArgument);
    EXPECT_NE(domain.status().message().find("IBDT_SHM_CMA"), std::string_view::npos) << domain.status().toString();
  }
}

}  // namespace
}  // namespace ibdt::fabric
