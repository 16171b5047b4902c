// tests/support/flood_exchange.h — one rank floods another that does not
// progress while the other ranks exchange with it (ranks as threads over the
// loopback fabric, support/thread_ranks.h): the flood must starve nobody and
// arrive whole and in order. Used by the shared receive queue and the shared
// eager pool tests (docs/many-ranks.md).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <vector>

#include "support/thread_ranks.h"

namespace ibdt::messaging::testing {

inline std::vector<uint8_t> payload(int from, int i, int64_t bytes) {
  std::vector<uint8_t> data(static_cast<size_t>(bytes));
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(from * 53 + i * 31 + k * 7 + (k >> 8));
  return data;
}

struct Transfer {
  Context* context;
  Request request;
};

inline size_t finished(std::vector<Transfer>& transfers) {
  size_t done = 0;
  for (auto& t : transfers) {
    auto result = t.context->test(t.request);
    EXPECT_TRUE(result.isOk()) << result.status().toString();
    done += result.isOk() && *result ? 1 : 0;
  }
  return done;
}

inline bool progressUntil(Ranks& ranks, std::vector<Transfer>& transfers) {
  auto deadline = soon();
  while (!deadline.expired()) {
    for (auto& context : ranks.contexts) EXPECT_TRUE(context->progress().isOk());
    if (finished(transfers) == transfers.size()) return true;
  }
  return false;
}

// Rank 1 floods rank 0 with `messages` (eager, pipelined and rendezvous
// sizes) while rank 0 does not progress; ranks 2.. meanwhile send to rank 0
// and wait for its answers. Rank 0 first serves them (the flood starves
// nobody), then takes the flood: everything in posting order, every byte
// right.
inline void floodWithExchanges(Ranks& ranks, int tag, int messages) {
  const int size = static_cast<int>(ranks.contexts.size());
  for (auto& context : ranks.contexts) ASSERT_NE(context, nullptr);
  Context& receiver = *ranks.contexts[0];
  std::vector<int64_t> flood;
  for (int i = 0; i < messages; ++i) flood.push_back(i % 10 == 7 ? 3000 : i % 10 == 9 ? 40000 : 1 + i * 8);
  std::vector<std::vector<uint8_t>> sent, got;
  std::vector<Transfer> floodSends, floodRecvs, exchanges;
  for (size_t i = 0; i < flood.size(); ++i) {
    sent.push_back(payload(1, static_cast<int>(i), flood[i]));
    auto request = ranks.contexts[1]->isend(sent.back().data(), flood[i], datatype::Datatype::of<uint8_t>(), 0, tag);
    ASSERT_TRUE(request.isOk()) << request.status().toString();
    floodSends.push_back({ranks.contexts[1].get(), std::move(*request)});
  }
  constexpr int kRounds = 6;
  std::vector<std::vector<uint8_t>> toZero, fromZero, atZero, backFromZero;
  for (int peer = 2; peer < size; ++peer) {
    for (int i = 0; i < kRounds; ++i) {
      toZero.push_back(payload(peer, i, 100));
      fromZero.emplace_back(100, 0);
      Context& other = *ranks.contexts[static_cast<size_t>(peer)];
      auto send = other.isend(toZero.back().data(), 100, datatype::Datatype::of<uint8_t>(), 0, tag + peer);
      auto recv = other.irecv(fromZero.back().data(), 100, datatype::Datatype::of<uint8_t>(), 0, tag + peer);
      ASSERT_TRUE(send.isOk() && recv.isOk());
      exchanges.push_back({&other, std::move(*send)});
      exchanges.push_back({&other, std::move(*recv)});
    }
  }
  // Rank 0 stalls while the others push.
  for (int i = 0; i < 200; ++i) {
    for (int rank = 1; rank < size; ++rank) EXPECT_TRUE(ranks.contexts[static_cast<size_t>(rank)]->progress().isOk());
  }
  // Rank 0 answers ranks 2.. first, the flood still waiting.
  for (int peer = 2; peer < size; ++peer) {
    for (int i = 0; i < kRounds; ++i) {
      atZero.emplace_back(100, 0);
      backFromZero.push_back(payload(10 + peer, i, 100));
      auto recv = receiver.irecv(atZero.back().data(), 100, datatype::Datatype::of<uint8_t>(), peer, tag + peer);
      auto send = receiver.isend(backFromZero.back().data(), 100, datatype::Datatype::of<uint8_t>(), peer, tag + peer);
      ASSERT_TRUE(send.isOk() && recv.isOk());
      exchanges.push_back({&receiver, std::move(*recv)});
      exchanges.push_back({&receiver, std::move(*send)});
    }
  }
  ASSERT_TRUE(progressUntil(ranks, exchanges)) << "the exchanges starved behind the flood";
  for (size_t k = 0; k < toZero.size(); ++k) EXPECT_EQ(atZero[k], toZero[k]) << "exchange " << k;
  for (size_t k = 0; k < fromZero.size(); ++k) EXPECT_EQ(fromZero[k], backFromZero[k]) << "answer " << k;
  for (int64_t bytes : flood) {
    got.emplace_back(static_cast<size_t>(bytes), 0);
    auto request = receiver.irecv(got.back().data(), bytes, datatype::Datatype::of<uint8_t>(), 1, tag);
    ASSERT_TRUE(request.isOk());
    floodRecvs.push_back({&receiver, std::move(*request)});
  }
  floodSends.insert(floodSends.end(), std::make_move_iterator(floodRecvs.begin()),
                    std::make_move_iterator(floodRecvs.end()));
  ASSERT_TRUE(progressUntil(ranks, floodSends)) << "the flood did not complete";
  for (size_t i = 0; i < flood.size(); ++i) EXPECT_EQ(got[i], sent[i]) << "flood message " << i;
}

}  // namespace ibdt::messaging::testing
