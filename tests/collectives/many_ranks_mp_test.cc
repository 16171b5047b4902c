// Many ranks per node (issue 16, docs/many-ranks.md), real processes under
// ibdt-run, oversubscribing the 2 cores (32 and 64 ranks; eager and lazy
// connection through IBDT_MSG_CONNECT, set by the CMake registration):
//   * a pairwise all-to-all at eager and rendezvous sizes, every byte of
//     every receive buffer checked;
//   * a flood: rank 1 posts far more messages to rank 0 (eager, pipelined
//     and rendezvous sizes, one tag) than rank 0 has eager buffers for it,
//     while rank 0 posts none of those receives and first exchanges with
//     every other rank; everything arrives, in posting order (MPI's
//     non-overtaking rule), every byte checked, and neither side hangs.
// The shm provider's activity summary is what progress relies on here: an
// arrival from any of 63 peers must be noticed.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/alltoall_data.h"
#include "collectives/collectives_mp.h"
#include "ibdt/collectives.h"
#include "ibdt/messaging.h"
#include "support/mp_test.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using test::mpDeadline;
using testing::AlltoallBuffers;

class ManyRanksMp : public testing::CollectivesMp {};

TEST_F(ManyRanksMp, PairwiseAlltoallEveryByteChecked) {
  // Two sizes only: 32 oversubscribed ranks on a loaded 2-core machine take
  // ~10 s per all-to-all (scheduling, not the exchange); the throttles and
  // types are covered by collectives_mp_test at 2-8 ranks.
  for (int64_t throttle : {0}) {
    for (int64_t bytes : {8, 40000}) {  // eager; above the eager limit
      AlltoallBuffers buffers(testing::byteSide(bytes), testing::byteSide(bytes), comm_->size(), comm_->rank());
      Status status = alltoall(*comm_, buffers.sendbuf(), bytes, Datatype::of<uint8_t>(), buffers.recvbuf(), bytes,
                               Datatype::of<uint8_t>(), {AlltoallAlgorithm::kPairwise, throttle}, mpDeadline());
      ASSERT_TRUE(status.isOk()) << status.toString();
      ASSERT_EQ(buffers.check(), "") << bytes << " bytes, throttle " << throttle;
    }
  }
}

constexpr int kFloodTag = 5;
constexpr int kExchangeTag = 6;
constexpr int kStartedTag = 7;
constexpr int kFloodMessages = 96;  // three times the default eager credits per peer
constexpr int kExchangeRounds = 4;

// Message i of the flood: mostly eager, every 8th pipelined, every 16th rendezvous.
int64_t floodBytes(int i) { return i % 16 == 15 ? 300000 : i % 8 == 7 ? 60000 : 1 + (i * 977) % 32000; }
uint8_t floodByte(int i, int64_t k) { return static_cast<uint8_t>(i * 29 + k * 7 + (k >> 9)); }

std::vector<uint8_t> floodMessage(int i) {
  std::vector<uint8_t> bytes(static_cast<size_t>(floodBytes(i)));
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = floodByte(i, static_cast<int64_t>(k));
  return bytes;
}

// Blocking send and receive bounded by the test deadline (a hang fails).
Status sendBytes(messaging::Context& context, const void* data, int64_t bytes, int dest, int tag) {
  IBDT_ASSIGN_OR_RETURN(auto request, context.isend(data, bytes, Datatype::of<uint8_t>(), dest, tag));
  return context.wait(request, nullptr, mpDeadline());
}
Status recvBytes(messaging::Context& context, void* data, int64_t bytes, int source, int tag,
                 messaging::RecvInfo* info = nullptr) {
  IBDT_ASSIGN_OR_RETURN(auto request, context.irecv(data, bytes, Datatype::of<uint8_t>(), source, tag));
  return context.wait(request, info, mpDeadline());
}

// Rank 1: posts the whole flood, then tells rank 2 it started.
void flood(messaging::Context& context) {
  std::vector<std::vector<uint8_t>> messages;
  std::vector<messaging::Request> requests;
  for (int i = 0; i < kFloodMessages; ++i) {
    messages.push_back(floodMessage(i));
    auto request = context.isend(messages.back().data(), floodBytes(i), Datatype::of<uint8_t>(), 0, kFloodTag);
    ASSERT_TRUE(request.isOk()) << request.status().toString();
    requests.push_back(std::move(*request));
  }
  int started = 1;
  ASSERT_TRUE(sendBytes(context, &started, sizeof started, 2, kStartedTag).isOk());
  Status status = context.waitAll(requests, mpDeadline());
  ASSERT_TRUE(status.isOk()) << status.toString();
}

// Rank 0: exchanges with every rank but 1, then receives the flood in order.
void receiveFlood(messaging::Context& context, int size) {
  for (int round = 0; round < kExchangeRounds; ++round) {
    for (int peer = 2; peer < size; ++peer) {
      int64_t out = round * 1000 + peer, in = -1;
      ASSERT_TRUE(sendBytes(context, &out, sizeof out, peer, kExchangeTag).isOk());
      ASSERT_TRUE(recvBytes(context, &in, sizeof in, peer, kExchangeTag).isOk());
      ASSERT_EQ(in, -(round * 1000 + peer));
    }
  }
  for (int i = 0; i < kFloodMessages; ++i) {
    std::vector<uint8_t> got(static_cast<size_t>(floodBytes(i)), 0);
    messaging::RecvInfo info;
    Status status = recvBytes(context, got.data(), floodBytes(i), 1, kFloodTag, &info);
    ASSERT_TRUE(status.isOk()) << "flood message " << i << ": " << status.toString();
    ASSERT_EQ(info.bytes, floodBytes(i)) << "flood message " << i << " out of order";
    ASSERT_EQ(got, floodMessage(i)) << "flood message " << i;
  }
}

TEST_F(ManyRanksMp, FloodNeitherLosesNorReordersNorStarvesTheOthers) {
  const int rank = comm_->rank(), size = comm_->size();
  ASSERT_GE(size, 3);
  messaging::Context& context = *context_;
  if (rank == 1) {
    flood(context);
  } else if (rank == 0) {
    receiveFlood(context, size);
  } else {
    if (rank == 2) {  // starts only once the flood is under way
      int started = 0;
      ASSERT_TRUE(recvBytes(context, &started, sizeof started, 1, kStartedTag).isOk());
    }
    for (int round = 0; round < kExchangeRounds; ++round) {
      int64_t in = -1;
      ASSERT_TRUE(recvBytes(context, &in, sizeof in, 0, kExchangeTag).isOk());
      ASSERT_EQ(in, round * 1000 + rank);
      int64_t out = -in;
      ASSERT_TRUE(sendBytes(context, &out, sizeof out, 0, kExchangeTag).isOk());
    }
  }
  ASSERT_TRUE(barrier(*comm_, mpDeadline()).isOk());
}

}  // namespace
}  // namespace ibdt::collectives
