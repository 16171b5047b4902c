// Lazy connection to a peer process that exited (forked ranks over every
// provider): the messages queued for it fail with kPeerFailed, and the
// survivors connect, exchange every byte and close as if nothing happened.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "fabric/fabric_harness.h"
#include "ibdt/messaging.h"

namespace ibdt::messaging {
namespace {

using fabric::testing::Mesh;

// The ranks' allgather over the forked run's socketpairs.
Bootstrap bootstrapOf(Mesh& mesh) {
  Bootstrap bootstrap;
  bootstrap.rank = mesh.rank();
  bootstrap.size = mesh.size();
  bootstrap.allgather = [&mesh](std::span<const uint8_t> value) -> Result<std::vector<std::vector<uint8_t>>> {
    std::vector<std::vector<uint8_t>> all(static_cast<size_t>(mesh.size()));
    std::vector<uint8_t> mine(value.begin(), value.end());
    for (int peer = 0; peer < mesh.size(); ++peer) {
      all[static_cast<size_t>(peer)] = peer == mesh.rank() ? mine : mesh.swap(peer, mine);
    }
    return all;
  };
  return bootstrap;
}

class DeadPeer : public ::testing::TestWithParam<std::string> {};

TEST_P(DeadPeer, QueuedMessagesFailAndTheOthersGoOn) {
  const std::string provider = GetParam();
  auto statuses = fabric::testing::runForked(3, [&](Mesh& mesh) {
    auto domain = fabric::openDomain(provider, {"msg-dead-peer", ""});
    ASSERT_TRUE(domain.isOk()) << domain.status().toString();
    Options options;
    options.connect = Connect::kLazy;
    options.connectTimeoutMs = 3000;  // verbs cannot see the death: the bound
    auto created = Context::create(**domain, bootstrapOf(mesh), options);
    ASSERT_TRUE(created.isOk()) << created.status().toString();
    Context& context = **created;
    datatype::Datatype type = datatype::Datatype::of<uint8_t>();
    if (mesh.rank() == 2) {
      _exit(0);  // gone before anybody connected to it
    }
    std::vector<uint8_t> small(100), large(100'000);
    fabric::testing::fillPattern(small.data(), small.size(), 1);
    fabric::testing::fillPattern(large.data(), large.size(), 2);
    if (mesh.rank() == 0) {
      auto eager = context.isend(small.data(), 100, type, 2, 0);
      ASSERT_TRUE(eager.isOk());
      Status status = context.wait(*eager, nullptr, Deadline::after(std::chrono::seconds(60)));
      EXPECT_EQ(status.code(), Code::kPeerFailed) << status.toString();
      EXPECT_NE(status.message().find("rank 2"), std::string_view::npos) << status.toString();
      EXPECT_EQ(context.isend(large.data(), 100'000, type, 2, 0).status().code(), Code::kPeerFailed);
    }
    // Ranks 0 and 1 exchange both ways, eager and rendezvous.
    int other = 1 - mesh.rank();
    std::vector<uint8_t> in(100'000, 0);
    auto recv = context.irecv(in.data(), 100'000, type, other, 5);
    ASSERT_TRUE(recv.isOk());
    ASSERT_TRUE(context.send(mesh.rank() == 0 ? large.data() : small.data(), mesh.rank() == 0 ? 100'000 : 100,
                             type, other, 5)
                    .isOk());
    RecvInfo info;
    ASSERT_TRUE(context.wait(*recv, &info, Deadline::after(std::chrono::seconds(60))).isOk());
    ASSERT_EQ(info.bytes, mesh.rank() == 0 ? 100 : 100'000);
    EXPECT_EQ(fabric::testing::firstMismatch(in.data(), static_cast<size_t>(info.bytes), mesh.rank() == 0 ? 1 : 2),
              -1);
    ASSERT_TRUE(context.close(Deadline::after(std::chrono::seconds(60))).isOk());
    EXPECT_EQ(context.counters().connections, 1u);
  });
  fabric::testing::expectAllPassed(statuses);
}

INSTANTIATE_TEST_SUITE_P(Providers, DeadPeer, ::testing::ValuesIn(fabric::testing::providersUnderTest()),
                         [](const auto& param) { return param.param; });

}  // namespace
}  // namespace ibdt::messaging
