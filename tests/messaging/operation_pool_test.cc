// The per-thread reuse of operations' memory (transport/messaging/operation_pool.h).
#include "transport/messaging/operation_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

namespace ibdt::messaging {
namespace {

struct Payload {
  int64_t values[40];
};

TEST(OperationPool, AFreedBlockServesTheNextOperation) {
#if !IBDT_OPERATION_POOL
  GTEST_SKIP() << "under AddressSanitizer blocks go back to the heap";
#endif
  std::thread([] {  // a thread of its own: an empty list to start with
    OperationAllocator<Payload> allocator;
    auto first = std::allocate_shared<Payload>(allocator);
    first->values[0] = 7;
    const void* block = first.get();
    first.reset();
    EXPECT_EQ(operationBlocks().kept(), 1u);
    auto second = std::allocate_shared<Payload>(allocator);
    EXPECT_EQ(second.get(), block);
    EXPECT_EQ(operationBlocks().kept(), 0u);
    EXPECT_EQ(operationBlocks().made(), 2u);
  }).join();
}

TEST(OperationPool, KeepsOneSizeAndABoundedNumber) {
  std::thread([] {
    std::vector<std::shared_ptr<Payload>> many;
    for (size_t i = 0; i < OperationBlocks::kMaxKept + 10; ++i) {
      many.push_back(std::allocate_shared<Payload>(OperationAllocator<Payload>{}));
      many.back()->values[39] = static_cast<int64_t>(i);  // every block is usable memory
    }
    many.clear();
#if !IBDT_OPERATION_POOL
    EXPECT_EQ(operationBlocks().kept(), 0u);
#else
    EXPECT_EQ(operationBlocks().kept(), OperationBlocks::kMaxKept);  // the rest went to the heap
#endif
    // Another size is not pooled: it neither takes nor leaves a block.
    const size_t kept = operationBlocks().kept();
    auto other = std::allocate_shared<int64_t>(OperationAllocator<int64_t>{}, 5);
    EXPECT_EQ(*other, 5);
    other.reset();
    EXPECT_EQ(operationBlocks().kept(), kept);
  }).join();
}

}  // namespace
}  // namespace ibdt::messaging
