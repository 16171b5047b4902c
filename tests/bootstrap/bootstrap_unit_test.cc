// Pure parts of the bootstrap: node maps, the wire format, ibdt-run's
// command line, the singleton store and backend selection.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

#include "bootstrap/launcher/options.h"
#include "bootstrap/node_map.h"
#include "bootstrap/singleton_store.h"
#include "bootstrap/store_test_util.h"
#include "bootstrap/store_wire.h"

namespace ibdt::bootstrap {
namespace {

using namespace std::chrono_literals;

TEST(NodeMap, BlockDistributionGivesExtraRanksToLowerNodes) {
  EXPECT_EQ(blockNodeMap(5, 2), (std::vector<int>{0, 0, 0, 1, 1}));
  EXPECT_EQ(blockNodeMap(4, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(blockNodeMap(3, 1), (std::vector<int>{0, 0, 0}));
}

TEST(NodeMap, PlacementFromAnInterleavedMap) {
  std::vector<int> nodes{0, 1, 0, 1, 2};
  Placement p = placementFromNodeMap(nodes, 3);
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.size, 5);
  EXPECT_EQ(p.nodeId, 1);
  EXPECT_EQ(p.numNodes, 3);
  EXPECT_EQ(p.localRank, 1);
  EXPECT_EQ(p.localSize, 2);
  Placement last = placementFromNodeMap(nodes, 4);
  EXPECT_EQ(last.localRank, 0);
  EXPECT_EQ(last.localSize, 1);
}

TEST(StoreWire, RoundTripsEveryFieldType) {
  std::string payloadOf = wire::Writer(wire::Op::kGet, 42).u8(7).u32(0xdeadbeef).u64(1ull << 40).blob("key").frame();
  ASSERT_EQ(wire::frameLength(payloadOf.data()), payloadOf.size() - 4);
  wire::Reader in(std::string_view(payloadOf).substr(4));
  EXPECT_EQ(in.u8(), static_cast<uint8_t>(wire::Op::kGet));
  EXPECT_EQ(in.u64(), 42u);
  EXPECT_EQ(in.u8(), 7);
  EXPECT_EQ(in.u32(), 0xdeadbeefu);
  EXPECT_EQ(in.u64(), 1ull << 40);
  EXPECT_EQ(in.blob(), "key");
  EXPECT_TRUE(in.finish("test").isOk());
}

TEST(StoreWire, TruncatedAndOverlongMessagesAreProtocolErrors) {
  std::string bytes = wire::Writer().blob("abcdef").fields();
  wire::Reader shortRead(std::string_view(bytes).substr(0, 7));
  EXPECT_EQ(shortRead.blob(), "");
  EXPECT_EQ(shortRead.finish("test").code(), Code::kProtocol);
  wire::Reader trailing(bytes + "x");
  trailing.blob();
  EXPECT_EQ(trailing.finish("test").code(), Code::kProtocol);
}

Result<LaunchOptions> parse(std::vector<const char*> words) {
  words.insert(words.begin(), "ibdt-run");
  return parseLaunchOptions(static_cast<int>(words.size()), words.data());
}

TEST(LaunchOptions, ProgramOptionsPassUntouched) {
  auto options = parse({"-n", "4", "--nodes", "2", "--timeout", "1.5", "--no-prefix", "prog", "-n", "7", "--x"});
  ASSERT_TRUE(options.isOk()) << options.status().toString();
  EXPECT_EQ(options->ranks, 4);
  EXPECT_EQ(options->nodes, 2);
  EXPECT_DOUBLE_EQ(options->timeoutSeconds, 1.5);
  EXPECT_FALSE(options->prefixOutput);
  EXPECT_EQ(options->command, (std::vector<std::string>{"prog", "-n", "7", "--x"}));
  auto dashed = parse({"--np", "2", "--", "-weird-program"});
  ASSERT_TRUE(dashed.isOk());
  EXPECT_EQ(dashed->command, (std::vector<std::string>{"-weird-program"}));
}

TEST(LaunchOptions, BadCommandLinesAreExplained) {
  EXPECT_EQ(parse({"prog"}).status().code(), Code::kInvalidArgument);  // no -n
  EXPECT_NE(parse({"-n", "0", "prog"}).status().message().find("-n expects an integer"), std::string_view::npos);
  EXPECT_EQ(parse({"-n", "4x", "prog"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse({"-n", "2", "--nodes", "3", "prog"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse({"-n", "2", "--timeout", "-1", "prog"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse({"-n", "2", "--bogus", "prog"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse({"-n", "2"}).status().code(), Code::kInvalidArgument);  // no program
  EXPECT_EQ(parse({"-n"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse({"--help"}).status().code(), Code::kCancelled);
}

TEST(SingletonStore, IsAJobOfOne) {
  SingletonStore store;
  EXPECT_EQ(store.backend(), "singleton");
  EXPECT_EQ(store.rank(), 0);
  EXPECT_EQ(store.size(), 1);
  EXPECT_EQ(store.localSize(), 1);
  EXPECT_EQ(store.numNodes(), 1);
  ASSERT_TRUE(store.put("k", "v").isOk());
  EXPECT_EQ(store.get(0, "k", Deadline::after(20ms)).status().code(), Code::kTimeout);  // not committed
  ASSERT_TRUE(store.commit().isOk());
  ASSERT_TRUE(store.fence(Deadline::after(1s)).isOk());
  auto value = store.get(0, "k", Deadline::after(1s));
  ASSERT_TRUE(value.isOk());
  EXPECT_EQ(test::toString(*value), "v");
  EXPECT_EQ(store.get(1, "k", Deadline::after(1s)).status().code(), Code::kInvalidArgument);
  auto all = store.allgather(test::toBytes("mine"), Deadline::after(1s));
  ASSERT_TRUE(all.isOk());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(test::toString((*all)[0]), "mine");
  ASSERT_TRUE(store.barrier(Deadline::after(1s)).isOk());
}

TEST(SingletonStore, GetWaitsForAnotherThread) {
  SingletonStore store;
  std::thread writer([&] {
    std::this_thread::sleep_for(10ms);
    ASSERT_TRUE(store.put("later", "x").isOk());
    ASSERT_TRUE(store.commit().isOk());
  });
  auto value = store.get(0, "later", Deadline::after(30s));
  writer.join();
  ASSERT_TRUE(value.isOk());
  EXPECT_EQ(test::toString(*value), "x");
}

// Runs connectStore() with a controlled environment and restores it.
class ConnectStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value != nullptr ? std::optional<std::string>(value) : std::nullopt);
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (auto& [name, value] : saved_) {
      if (value) ::setenv(name, value->c_str(), 1);
      else ::unsetenv(name);
    }
  }
  static constexpr const char* kNames[] = {"IBDT_BOOTSTRAP", "IBDT_RUN_SOCKET", "IBDT_RUN_TOKEN", "IBDT_RUN_RANK",
                                           "PMIX_NAMESPACE", "PMIX_RANK", "PMI_FD", "PMI_PORT", "PMI_RANK",
                                           "PMI_SIZE"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(ConnectStoreTest, NoLauncherMeansSingleton) {
  auto store = connectStore();
  ASSERT_TRUE(store.isOk()) << store.status().toString();
  EXPECT_EQ((*store)->backend(), "singleton");
  EXPECT_EQ((*store)->size(), 1);
}

TEST_F(ConnectStoreTest, ForcedBackendsFailClearlyWithoutTheirLauncher) {
  ::setenv("IBDT_BOOTSTRAP", "ibdt-run", 1);
  auto launcher = connectStore();
  ASSERT_FALSE(launcher.isOk());
  EXPECT_NE(launcher.status().message().find("IBDT_RUN_SOCKET"), std::string_view::npos)
      << launcher.status().toString();
  ::setenv("IBDT_BOOTSTRAP", "bogus", 1);
  auto bogus = connectStore();
  EXPECT_EQ(bogus.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bogus.status().message().find("IBDT_BOOTSTRAP"), std::string_view::npos);
  ::setenv("IBDT_BOOTSTRAP", "ibdt-run", 1);
  ::setenv("IBDT_RUN_SOCKET", "/nonexistent/ibdt/store.sock", 1);
  ::setenv("IBDT_RUN_TOKEN", "t", 1);
  auto missing = connectStore();
  EXPECT_EQ(missing.status().code(), Code::kSystem);
  EXPECT_NE(missing.status().message().find("/nonexistent/ibdt/store.sock"), std::string_view::npos);
}

}  // namespace
}  // namespace ibdt::bootstrap
