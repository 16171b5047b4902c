// main() of multi-process gtests (see mp_test.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "support/mp_test.h"

namespace ibdt::test {
namespace {

std::unique_ptr<bootstrap::Store> gStore;

// Keeps the ranks in lockstep: after every test all ranks learn whether it
// passed everywhere, and stop together when it did not.
class RankSync : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    uint8_t failed = info.result()->Failed() ? 1 : 0;
    auto all = gStore->allgather(std::span<const uint8_t>(&failed, 1), Deadline::after(std::chrono::minutes(5)));
    std::string name = std::string(info.test_suite_name()) + "." + info.name();
    if (!all.isOk()) {
      std::fprintf(stderr, "[ibdt-mp] rank %d: exchanging the result of %s failed: %s\n", gStore->rank(), name.c_str(),
                   all.status().toString().c_str());
      std::fflush(nullptr);
      std::_Exit(1);
    }
    std::string failedRanks;
    for (size_t rank = 0; rank < all->size(); ++rank) {
      if ((*all)[rank] != bootstrap::Bytes{0}) failedRanks += (failedRanks.empty() ? "" : ",") + std::to_string(rank);
    }
    if (failedRanks.empty()) return;
    std::fprintf(stderr, "[ibdt-mp] rank %d: %s failed on rank(s) %s; stopping the job\n", gStore->rank(),
                 name.c_str(), failedRanks.c_str());
    std::fflush(nullptr);
    std::_Exit(1);
  }
};

// For ranks other than 0: only failures, each tagged with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[ibdt-mp] rank %d: %s:%d: failure\n%s\n", gStore->rank(),
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(), result.message());
  }
};

}  // namespace

bootstrap::Store& mpStore() { return *gStore; }

}  // namespace ibdt::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto store = ibdt::bootstrap::connectStore();
  if (!store.isOk()) {
    std::fprintf(stderr, "[ibdt-mp] cannot join the job: %s\n", store.status().toString().c_str());
    return 1;
  }
  ibdt::test::gStore = std::move(*store);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (ibdt::test::gStore->rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ibdt::test::FailurePrinter);
  }
  listeners.Append(new ibdt::test::RankSync);
  int result = RUN_ALL_TESTS();
  // Nobody leaves while a peer may still read its keys.
  if (auto done = ibdt::test::gStore->barrier(ibdt::Deadline::after(std::chrono::minutes(5))); !done.isOk()) {
    std::fprintf(stderr, "[ibdt-mp] rank %d: final barrier: %s\n", ibdt::test::gStore->rank(), done.toString().c_str());
    result = 1;
  }
  ibdt::test::gStore.reset();
  return result;
}
