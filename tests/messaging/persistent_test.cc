// Persistent requests (sendInit / recvInit / start): the same request run
// many times over eager, pipelined and rendezvous sizes with new data each
// run, every byte checked; the inactive state; misuse; cancel and restart;
// and that a persistent run allocates less than isend/irecv (it reuses its
// operation).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <vector>

#include "support/thread_ranks.h"
#include "transport/messaging/operation_pool.h"

namespace ibdt::messaging::testing {
namespace {

using datatype::Datatype;
using namespace std::chrono_literals;

// Eager up to 256 B, pipelined up to 4 KiB, rendezvous above.
Options persistentOptions() {
  Options options = smallOptions();
  options.pipelineLimit = 4096;
  return options;
}

// Value of element i in run r.
int32_t valueOf(int run, int64_t i) { return static_cast<int32_t>(run * 100003 + i); }

TEST(Persistent, OneRequestRunsManyTimesWithTheDataOfEachStart) {
  runRanks(2, persistentOptions(), [](RankEnv& env) {
    // Every other int of a 2n-int buffer: a derived type on both sides.
    auto strided = Datatype::vector(1, 1, 2, Datatype::of<int32_t>());
    ASSERT_TRUE(strided.isOk());
    auto every = Datatype::resized(*strided, 0, 8);
    ASSERT_TRUE(every.isOk());
    ASSERT_TRUE(every->commit().isOk());
    // Eager (32 ints = 128 B), pipelined (800 B) and rendezvous (20000 B).
    for (int64_t count : {32, 200, 5000}) {
      SCOPED_TRACE(::testing::Message() << "count " << count);
      std::vector<int32_t> buffer(static_cast<size_t>(2 * count + 1), -1);
      auto request = env.rank == 0 ? env.context.sendInit(buffer.data(), count, *every, 1, 9)
                                   : env.context.recvInit(buffer.data(), count, *every, 0, 9);
      ASSERT_TRUE(request.isOk()) << request.status().toString();
      EXPECT_TRUE(request->persistent());
      for (int run = 0; run < 12; ++run) {
        if (env.rank == 0) {
          for (int64_t i = 0; i < count; ++i) buffer[static_cast<size_t>(2 * i)] = valueOf(run, i);
        } else {
          std::fill(buffer.begin(), buffer.end(), -1);
        }
        ASSERT_TRUE(env.context.start(*request).isOk()) << "run " << run;
        RecvInfo info;
        Status status = env.context.wait(*request, &info, soon());
        ASSERT_TRUE(status.isOk()) << "run " << run << ": " << status.toString();
        ASSERT_TRUE(request->valid()) << "a persistent request outlives its wait";
        if (env.rank == 1) {
          EXPECT_EQ(info.source, 0);
          EXPECT_EQ(info.bytes, count * 4);
          for (int64_t i = 0; i < count; ++i) {
            ASSERT_EQ(buffer[static_cast<size_t>(2 * i)], valueOf(run, i)) << "run " << run << " element " << i;
            ASSERT_EQ(buffer[static_cast<size_t>(2 * i + 1)], -1) << "gap written, run " << run;
          }
          ASSERT_EQ(buffer.back(), -1) << "written beyond the receive, run " << run;
        }
      }
    }
  });
}

TEST(Persistent, InactiveRequestsAndMisuse) {
  runRanks(2, persistentOptions(), [](RankEnv& env) {
    Datatype type = Datatype::of<int32_t>();
    int32_t value = 7;
    auto idle = env.context.recvInit(&value, 1, type, 1 - env.rank, 3);
    ASSERT_TRUE(idle.isOk());
    // Never started: complete, with nothing to report.
    auto tested = env.context.test(*idle);
    ASSERT_TRUE(tested.isOk());
    EXPECT_TRUE(*tested);
    EXPECT_TRUE(env.context.wait(*idle, nullptr, soon()).isOk());
    EXPECT_TRUE(idle->valid());
    // Started and not yet matched: a second start is refused.
    ASSERT_TRUE(env.context.start(*idle).isOk());
    EXPECT_EQ(env.context.start(*idle).code(), Code::kState);
    // Cancelled, then started again and matched.
    ASSERT_TRUE(env.context.cancel(*idle).isOk());
    EXPECT_EQ(env.context.wait(*idle, nullptr, soon()).code(), Code::kCancelled);
    env.barrier();
    ASSERT_TRUE(env.context.start(*idle).isOk());
    int32_t mine = 40 + env.rank;
    ASSERT_TRUE(env.context.send(&mine, 1, type, 1 - env.rank, 3).isOk());
    ASSERT_TRUE(env.context.wait(*idle, nullptr, soon()).isOk());
    EXPECT_EQ(value, 40 + (1 - env.rank));
    // A plain request is not started again, and bad arguments fail at init.
    auto plain = env.context.isend(&mine, 1, type, 1 - env.rank, 4);
    ASSERT_TRUE(plain.isOk());
    EXPECT_FALSE(plain->persistent());
    EXPECT_EQ(env.context.start(*plain).code(), Code::kInvalidArgument);
    ASSERT_TRUE(env.context.recv(&value, 1, type, 1 - env.rank, 4).isOk());
    ASSERT_TRUE(env.context.wait(*plain, nullptr, soon()).isOk());
    EXPECT_EQ(env.context.sendInit(&mine, 1, type, 5, 4).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(env.context.recvInit(&value, -1, type, 0, 4).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(env.context.sendInit(&mine, 1, type, 0, -2).status().code(), Code::kInvalidArgument);
    Request empty;
    EXPECT_EQ(env.context.start(empty).code(), Code::kInvalidArgument);
  });
}

// isend/irecv make an operation per message; a persistent request makes it
// once (operations made are counted per thread by their pool,
// operation_pool.h, whether or not their memory is reused).
TEST(Persistent, RunsMakeNoOperationPerStart) {
  constexpr int kRuns = 400;
  std::atomic<uint64_t> fresh{0}, persistent{0};
  runRanks(2, Options(), [&](RankEnv& env) {
    Datatype type = Datatype::of<int64_t>();
    const int peer = 1 - env.rank;
    int64_t out = env.rank, in = -1;
    auto exchangeFresh = [&](int run) {
      out = run;
      auto recv = env.context.irecv(&in, 1, type, peer, 1);
      auto send = env.context.isend(&out, 1, type, peer, 1);
      ASSERT_TRUE(recv.isOk() && send.isOk());
      ASSERT_TRUE(env.context.wait(*recv, nullptr, soon()).isOk());
      ASSERT_TRUE(env.context.wait(*send, nullptr, soon()).isOk());
      ASSERT_EQ(in, run);
    };
    auto recv = env.context.recvInit(&in, 1, type, peer, 2);
    auto send = env.context.sendInit(&out, 1, type, peer, 2);
    ASSERT_TRUE(recv.isOk() && send.isOk());
    auto exchangePersistent = [&](int run) {
      out = run;
      ASSERT_TRUE(env.context.start(*recv).isOk());
      ASSERT_TRUE(env.context.start(*send).isOk());
      ASSERT_TRUE(env.context.wait(*recv, nullptr, soon()).isOk());
      ASSERT_TRUE(env.context.wait(*send, nullptr, soon()).isOk());
      ASSERT_EQ(in, run);
    };
    for (int run = 0; run < 20; ++run) exchangeFresh(run);  // warm queues and caches
    for (int run = 0; run < 20; ++run) exchangePersistent(run);
    const uint64_t before = operationBlocks().made();
    for (int run = 0; run < kRuns; ++run) exchangeFresh(run);
    const uint64_t middle = operationBlocks().made();
    for (int run = 0; run < kRuns; ++run) exchangePersistent(run);
    fresh += middle - before;
    persistent += operationBlocks().made() - middle;
  });
  // Each run starts 4 requests over the two ranks: 4 operations per fresh
  // run. A start() makes a copy only while a protocol still holds the last
  // run's operation (rare), so 2 per run still fails one that always copies.
  EXPECT_EQ(fresh.load(), 4u * kRuns);
  EXPECT_LE(persistent.load() + 2 * kRuns, fresh.load())
      << "fresh requests: " << fresh.load() << " operations made, persistent: " << persistent.load();
}

}  // namespace
}  // namespace ibdt::messaging::testing
