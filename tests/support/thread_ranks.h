// tests/support/thread_ranks.h — run N ranks as threads of one process,
// each with its own loopback Domain and messaging Context.
#pragma once

#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "ibdt/messaging.h"
#include "messaging/loopback_fabric.h"
#include "support/thread_exchange.h"

namespace ibdt::messaging::testing {

// Per-rank view handed to the test body.
struct RankEnv {
  Context& context;
  ThreadExchange& exchange;
  int rank;
  void barrier() { (void)exchange.allgather(rank, {}); }
};

// Runs body(env) on `size` ranks; gtest assertions inside work per thread.
// With `drain` the ranks meet and progress before tearing down; without it
// each rank destroys its Context as soon as its body returns (after close()).
// `optionsOf(rank)`: each rank's Context options (e.g. its own tuning file).
inline void runRanksWith(int size, const std::function<Options(int)>& optionsOf,
                         const std::function<void(RankEnv&)>& body, fabric::Caps caps = loopbackCaps(),
                         bool drain = true) {
  auto world = makeLoopbackWorld();
  ThreadExchange exchange(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      auto domain = openLoopbackDomain(world, caps);
      Bootstrap bootstrap;
      bootstrap.rank = rank;
      bootstrap.size = size;
      bootstrap.allgather = [&exchange, rank](std::span<const uint8_t> value) {
        return exchange.allgather(rank, value);
      };
      auto context = Context::create(*domain, bootstrap, optionsOf(rank));
      ASSERT_TRUE(context.isOk()) << context.status().toString();
      RankEnv env{**context, exchange, rank};
      body(env);
      if (!drain) return;
      // Drain: nobody tears down while a peer may still need its replies.
      env.barrier();
      for (int i = 0; i < 100; ++i) (void)(*context)->progress();
      env.barrier();
    });
  }
  for (auto& thread : threads) thread.join();
}

inline void runRanks(int size, const Options& options, const std::function<void(RankEnv&)>& body,
                     fabric::Caps caps = loopbackCaps(), bool drain = true) {
  runRanksWith(size, [&](int) { return options; }, body, caps, drain);
}

// Ranks whose Contexts one test thread drives (e.g. to let one die).
struct Ranks {
  std::shared_ptr<LoopbackWorld> world;
  std::vector<std::unique_ptr<fabric::Domain>> domains;
  std::vector<std::unique_ptr<Context>> contexts;
};

// Creates `size` Contexts (create() is collective: one thread per rank).
// `sharedReceives`: the loopback offers shared receive queues (a verbs SRQ).
inline Ranks createRanks(int size, const Options& options, bool sharedReceives = false) {
  Ranks ranks;
  ranks.world = makeLoopbackWorld(sharedReceives);
  ThreadExchange exchange(size);
  for (int i = 0; i < size; ++i) ranks.domains.push_back(openLoopbackDomain(ranks.world, loopbackCaps()));
  ranks.contexts.resize(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      Bootstrap bootstrap{rank, size, [&exchange, rank](std::span<const uint8_t> v) { return exchange.allgather(rank, v); }};
      auto context = Context::create(*ranks.domains[static_cast<size_t>(rank)], bootstrap, options);
      EXPECT_TRUE(context.isOk()) << context.status().toString();
      if (context.isOk()) ranks.contexts[static_cast<size_t>(rank)] = std::move(*context);
    });
  }
  for (auto& thread : threads) thread.join();
  return ranks;
}

// Runs body(ranks, rank, meet) on a thread per rank of createRanks(size),
// for tests in which a rank dies (killLoopbackDomain, then its Context
// reset): `meet` is a barrier of every rank, which a dying rank may drop.
inline void runRanksThatMayDie(int size, const std::function<void(Ranks&, int, std::barrier<>&)>& body,
                               const Options& options = {}) {
  Ranks ranks = createRanks(size, options);
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  std::barrier meet(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] { body(ranks, rank, meet); });
  }
  for (auto& thread : threads) thread.join();
}

// Drives two ranks' requests from one thread until both completed (a lazy
// connection needs both ranks to progress); false after 30 s.
inline bool completeBoth(Context& a, Request& ra, Context& b, Request& rb) {
  auto done = [](Result<bool> result) { return result.isOk() && *result; };
  bool doneA = false, doneB = false;
  for (auto deadline = Deadline::after(std::chrono::seconds(30)); !(doneA && doneB) && !deadline.expired();) {
    if (!doneA) doneA = done(a.test(ra));
    if (!doneB) doneB = done(b.test(rb));
  }
  return doneA && doneB;
}

// Bounds every wait of a test: a hang fails it instead of stalling the suite.
inline Deadline soon() { return Deadline::after(std::chrono::seconds(60)); }

// Limits so small that short messages already cross them: few credits (flow
// control), a 256-byte eager limit and 1000-byte rendezvous segments.
inline Options smallOptions() {
  Options options;
  options.eagerLimit = 256;
  options.eagerCredits = 4;
  options.segmentSize = 1000;
  return options;
}

// A 256-byte eager limit (pipelined and rendezvous from short messages on),
// the default 32 credits before any budget, every rank connected at once.
inline Options budgetOptions() {
  Options options;
  options.eagerLimit = 256;
  options.eagerCredits = 32;
  options.connect = Connect::kEager;
  return options;
}

}  // namespace ibdt::messaging::testing
