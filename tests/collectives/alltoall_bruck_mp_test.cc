// The Bruck alltoall family and the shared-memory alltoall among real
// processes (ibdt-run, 4 ranks) over the default provider, one case per algorithm: contiguous bytes from eager
// to rendezvous sizes, a strided send type received dense, a persistent plan
// started repeatedly with new data, and a mismatched signature that fails
// every rank. Every byte of every receive buffer is checked.
#include <gtest/gtest.h>

#include "collectives/alltoall_data.h"
#include "ibdt/collectives.h"
#include "ibdt/messaging.h"
#include "ibdt/store.h"
#include "messaging/mp_support.h"
#include "support/mp_test.h"

namespace ibdt::collectives {
namespace {

using datatype::Datatype;
using test::mpDeadline;
using test::mpStore;
using testing::AlltoallBuffers;
using testing::Side;

struct Forced {
  AlltoallAlgorithm algorithm;
  int64_t radix;
  const char* name;
};

class BruckMp : public ::testing::TestWithParam<Forced> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(messaging::testing::mpDomain());
    auto context = messaging::Context::create(*messaging::testing::mpDomain(), mpStore(), {}, mpDeadline());
    ASSERT_TRUE(context.isOk()) << context.status().toString();
    context_ = std::move(*context);
    auto comm = Communicator::create(*context_, mpStore(), mpDeadline());
    ASSERT_TRUE(comm.isOk()) << comm.status().toString();
    comm_ = std::move(*comm);
    options_.algorithm = GetParam().algorithm;
    options_.radix = GetParam().radix;
  }
  void TearDown() override {
    if (context_) {
      EXPECT_TRUE(context_->close(mpDeadline()).isOk());
    }
  }

  std::unique_ptr<messaging::Context> context_;
  std::unique_ptr<Communicator> comm_;
  AlltoallOptions options_;
};

TEST_P(BruckMp, EverySizePersistentAndMismatched) {
  Side strided = testing::vectorSide(30);
  const std::pair<Side, Side> cases[] = {{testing::byteSide(13), testing::byteSide(13)},
                                         {testing::byteSide(80000), testing::byteSide(80000)},
                                         {strided, testing::denseSide(strided.type, 30)}};
  for (const auto& [send, recv] : cases) {
    AlltoallBuffers buffers(send, recv, comm_->size(), comm_->rank());
    auto plan = alltoallInit(*comm_, buffers.sendbuf(), send.count, send.type, buffers.recvbuf(), recv.count,
                             recv.type, options_);
    ASSERT_TRUE(plan.isOk()) << plan.status().toString();
    EXPECT_EQ(plan->algorithm(), GetParam().name);
    for (int run = 0; run < 3; ++run) {
      ASSERT_EQ(testing::runChecked(*plan, buffers, run, mpDeadline()), "") << send.bytes() << " bytes, run " << run;
      ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());  // peers' runs end before the buffers change
    }
  }
  // Rank 0 sends int32s where the others send bytes: every rank fails in time.
  const int me = comm_->rank();
  Side side = me == 0 ? testing::denseSide(Datatype::of<int32_t>(), 300) : testing::byteSide(1200);
  AlltoallBuffers buffers(side, side, comm_->size(), me);
  Status status = alltoall(*comm_, buffers.sendbuf(), side.count, side.type, buffers.recvbuf(), side.count,
                           side.type, options_, mpDeadline());
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.code(), Code::kTimeout) << status.toString();
  ASSERT_TRUE(mpStore().barrier(mpDeadline()).isOk());
}

INSTANTIATE_TEST_SUITE_P(Algorithms, BruckMp,
                         ::testing::Values(Forced{AlltoallAlgorithm::kBruckBasic, 4, "bruck-basic"},
                                           Forced{AlltoallAlgorithm::kBruckModified, 4, "bruck-modified"},
                                           Forced{AlltoallAlgorithm::kBruckZeroCopy, 4, "bruck-zero-copy"},
                                           Forced{AlltoallAlgorithm::kBruckRadix, 3, "bruck-radix-3"},
                                           // processes mapping one segment (rank 0's memfd)
                                           Forced{AlltoallAlgorithm::kSharedMemory, 4, "shared-memory"}),
                         [](const auto& param) {
                           std::string name = param.param.name;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace ibdt::collectives
