// tests/collectives/collectives_mp.h — the fixture of the multi-process
// collective tests: a Context over the default provider and the world
// Communicator with the node map from the job's Store, closed at the end so
// no rank tears down while a peer still exchanges with it.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "ibdt/collectives.h"
#include "ibdt/messaging.h"
#include "ibdt/store.h"
#include "messaging/mp_support.h"
#include "support/mp_test.h"

namespace ibdt::collectives::testing {

class CollectivesMp : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(messaging::testing::mpDomain());
    auto context = messaging::Context::create(*messaging::testing::mpDomain(), test::mpStore(), {}, test::mpDeadline());
    ASSERT_TRUE(context.isOk()) << context.status().toString();
    context_ = std::move(*context);
    auto comm = Communicator::create(*context_, test::mpStore(), test::mpDeadline());
    ASSERT_TRUE(comm.isOk()) << comm.status().toString();
    comm_ = std::move(*comm);
  }
  void TearDown() override {
    if (context_) {
      EXPECT_TRUE(context_->close(test::mpDeadline()).isOk());
    }
  }

  std::unique_ptr<messaging::Context> context_;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace ibdt::collectives::testing
