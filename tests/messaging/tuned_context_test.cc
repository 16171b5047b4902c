// A Context with a tuning file in force (docs/tuning.md): the file, not the
// IBDT_MSG_PIPELINE_LIMIT constant, decides pipelined eager against
// rendezvous and which Table 1 scheme carries a message, unless the user
// forces it; every byte still arrives. Ranks are threads over the loopback
// fabric; the files are synthetic, keyed to this host and that provider.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "support/thread_ranks.h"
#include "transport/messaging/tuning.h"

namespace ibdt::messaging {
namespace {

using datatype::Datatype;
using testing::RankEnv;
using testing::runRanks;

PathCost costOf(double message, double byte, double block) { return PathCost{true, message, byte, block}; }

// Pipelined eager costs `pipelinedPerByte` ns per byte; the rendezvous
// schemes cost 20 us + 0.5 ns per byte, Multi-W the least per block, so a
// strided message goes by Multi-W when it rendezvous.
Tuning tuningWith(double pipelinedPerByte) {
  Tuning tuning;
  tuning.key = currentHostKey(testing::loopbackCaps().provider);
  tuning.minBytes = 65536;
  tuning.maxBytes = 1 << 20;
  tuning.cost(TunedPath::kPipelined) = costOf(1000, pipelinedPerByte, 0);
  tuning.cost(TunedPath::kPipelinedContig) = costOf(1000, pipelinedPerByte, 0);
  tuning.cost(TunedPath::kContig) = costOf(20'000, 0.5, 0);
  tuning.cost(TunedPath::kBcSpup) = costOf(20'000, 0.5, 50);
  tuning.cost(TunedPath::kRwgUp) = costOf(20'000, 0.5, 40);
  tuning.cost(TunedPath::kMultiW) = costOf(20'000, 0.5, 10);
  return tuning;
}

class TunedContext : public ::testing::Test {
 protected:
  void SetUp() override { path_ = ::testing::TempDir() + "ibdt-tuned-context-" + std::to_string(getpid()) + ".json"; }
  void TearDown() override { std::remove(path_.c_str()); }

  // Sends `rows` blocks of 2 KiB (stride 4 KiB) from rank 0 to rank 1 and
  // returns the scheme that carried it, after checking every byte.
  Scheme sendStrided(const Options& options, int64_t rows) {
    Scheme carried = Scheme::kAuto;
    std::string note;
    runRanks(2, options, [&](RankEnv& env) {
      auto type = Datatype::vector(rows, 512, 1024, Datatype::of<int32_t>());
      ASSERT_TRUE(type.isOk() && type->commit().isOk());
      std::vector<int32_t> data(static_cast<size_t>(rows * 1024));
      for (size_t i = 0; i < data.size(); ++i) data[i] = env.rank == 0 ? static_cast<int32_t>(i * 7 + 1) : -1;
      if (env.rank == 0) {
        note = env.context.tuningNote();
        ASSERT_TRUE(env.context.send(data.data(), 1, *type, 1, 3).isOk());
        return;
      }
      RecvInfo info;
      Status status = env.context.recv(data.data(), 1, *type, 0, 3, 0, &info);
      ASSERT_TRUE(status.isOk()) << status.toString();
      carried = info.scheme;
      for (size_t i = 0; i < data.size(); ++i) {
        int32_t want = (i % 1024) < 512 ? static_cast<int32_t>(i * 7 + 1) : -1;
        ASSERT_EQ(data[i], want) << "int " << i;
      }
    });
    note_ = note;
    return carried;
  }

  // Sends `bytes` contiguous bytes on an exchange communicator from rank 0
  // to rank 1; returns the path that carried them, after checking every byte.
  Scheme sendExchange(const Options& options, int64_t bytes) {
    Scheme carried = Scheme::kAuto;
    runRanks(2, options, [&](RankEnv& env) {
      std::vector<uint8_t> data(static_cast<size_t>(bytes));
      for (size_t i = 0; i < data.size(); ++i) data[i] = env.rank == 0 ? static_cast<uint8_t>(i * 13 + 5) : 0;
      const Datatype bytesType = Datatype::of<uint8_t>();
      if (env.rank == 0) {
        ASSERT_TRUE(env.context.send(data.data(), bytes, bytesType, 1, 4, kFirstExchangeCommunicator).isOk());
        return;
      }
      RecvInfo info;
      Status status = env.context.recv(data.data(), bytes, bytesType, 0, 4, kFirstExchangeCommunicator, &info);
      ASSERT_TRUE(status.isOk()) << status.toString();
      carried = info.scheme;
      for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], static_cast<uint8_t>(i * 13 + 5)) << "byte " << i;
    });
    return carried;
  }

  Options withFile(double pipelinedPerByte) {
    EXPECT_TRUE(writeTuningFile(path_, tuningWith(pipelinedPerByte)).isOk());
    Options options;
    options.tuneFile = path_;
    return options;
  }

  std::string path_;
  std::string note_;
};

TEST_F(TunedContext, WithoutAFileTheConstantLimitDecides) {
  Options options;                                           // tuneFile "": built-in defaults
  EXPECT_EQ(sendStrided(options, 64), Scheme::kPipelined);   // 128 KiB <= 256 KiB
  EXPECT_NE(sendStrided(options, 256), Scheme::kPipelined);  // 512 KiB
  EXPECT_NE(note_.find("built-in defaults"), std::string::npos) << note_;
}

TEST_F(TunedContext, TheFileMovesThePipelineLimitBothWays) {
  // Pipelined at 0.1 ns/B beats every rendezvous: even 512 KiB (above the
  // 256 KiB constant, within the measured 1 MiB) goes pipelined.
  EXPECT_EQ(sendStrided(withFile(0.1), 256), Scheme::kPipelined);
  EXPECT_NE(note_.find("in force"), std::string::npos) << note_;
  // At 5 ns/B it loses: 128 KiB rendezvous, by the cheapest scheme (Multi-W).
  EXPECT_EQ(sendStrided(withFile(5), 64), Scheme::kMultiW);
  // Beyond the measured sizes the file does not extrapolate pipelined eager.
  EXPECT_NE(sendStrided(withFile(0.1), 1024), Scheme::kPipelined);  // 2 MiB
}

TEST_F(TunedContext, ForcedKnobsWinOverTheFile) {
  Options options = withFile(5);
  options.pipelineLimitForced = true;  // as IBDT_MSG_PIPELINE_LIMIT set
  EXPECT_EQ(sendStrided(options, 64), Scheme::kPipelined);
  options = withFile(0.1);
  options.forcedScheme = Scheme::kBcSpup;
  EXPECT_EQ(sendStrided(options, 64), Scheme::kBcSpup);
}

TEST_F(TunedContext, TheFileDecidesTheExchangeZeroCopyLimit) {
  Options options;  // no file: the 64 KiB constant sends 128 KiB single-copy
  EXPECT_EQ(sendExchange(options, 128 << 10), Scheme::kContiguous);
  // Pipelined eager at 0.1 ns/B is cheaper than single-copy over the whole
  // measured range: the file turns the limit off and 128 KiB goes pipelined.
  EXPECT_EQ(sendExchange(withFile(0.1), 128 << 10), Scheme::kPipelined);
  // At 5 ns/B single-copy wins from the eager limit up.
  EXPECT_EQ(sendExchange(withFile(5), 64 << 10), Scheme::kContiguous);
  // Forced (IBDT_MSG_EXCHANGE_ZERO_COPY set) wins over the file.
  options = withFile(0.1);
  options.exchangeZeroCopyForced = true;
  EXPECT_EQ(sendExchange(options, 128 << 10), Scheme::kContiguous);
}

// Generic (the whole message packed, written once, unpacked) is a path the
// file prices: when it is the cheapest, the sender asks for it in its RTS and
// the receiver follows; forced knobs still win.
TEST_F(TunedContext, TheFileChoosesGenericWhenItIsCheapest) {
  Tuning tuning = tuningWith(5);
  tuning.cost(TunedPath::kGeneric) = costOf(5'000, 0.5, 0);
  ASSERT_TRUE(writeTuningFile(path_, tuning).isOk());
  Options options;
  options.tuneFile = path_;
  EXPECT_EQ(sendStrided(options, 64), Scheme::kGeneric);   // 128 KiB
  EXPECT_EQ(sendStrided(options, 512), Scheme::kGeneric);  // 1 MiB, beyond the pipelined range
  options.forcedScheme = Scheme::kMultiW;
  EXPECT_EQ(sendStrided(options, 64), Scheme::kMultiW);
  options.forcedScheme = Scheme::kAuto;
  options.packBelowBlock = 1 << 20;  // as IBDT_MSG_PACK_BELOW set: the user decides pack vs gather
  EXPECT_NE(sendStrided(options, 64), Scheme::kGeneric);
}

TEST_F(TunedContext, AFileForAnotherHostIsIgnored) {
  Tuning other = tuningWith(5);
  other.key.cpuModel = "Some Other CPU";
  ASSERT_TRUE(writeTuningFile(path_, other).isOk());
  Options options;
  options.tuneFile = path_;
  EXPECT_EQ(sendStrided(options, 64), Scheme::kPipelined);  // the 256 KiB constant again
  EXPECT_NE(note_.find("made for Some Other CPU"), std::string::npos) << note_;
}

}  // namespace
}  // namespace ibdt::messaging
