// User buffers used in place whose blocks lie in separate mappings with
// unmapped pages between them (a struct over separately allocated arrays):
// the sender's gather registers them by Optimistic Group Registration, a
// receiver that cannot offer one rkey unpacks instead. Over the real shm
// provider, which refuses to register unmapped pages as ibv_reg_mr does;
// one process sending to itself.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "ibdt/messaging.h"
#include "messaging/scheme_names.h"

namespace ibdt::messaging {
namespace {

using datatype::Datatype;

constexpr size_t kPiece = 64 << 10;

// Two 64 KiB pieces with 64 KiB of unmapped address space between them.
class GappedBuffer {
 public:
  GappedBuffer() {
    void* memory = mmap(nullptr, 3 * kPiece, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(memory, MAP_FAILED);
    base_ = static_cast<uint8_t*>(memory);
    EXPECT_EQ(munmap(base_ + kPiece, kPiece), 0);
  }
  ~GappedBuffer() {
    munmap(base_, kPiece);
    munmap(base_ + 2 * kPiece, kPiece);
  }
  uint8_t* data() const { return base_; }
  // 32 KiB from the start of each piece.
  static Datatype type() {
    std::vector<int64_t> lengths = {32 << 10, 32 << 10}, displacements = {0, 2 * kPiece};
    auto type = Datatype::hindexed(lengths, displacements, Datatype::of<uint8_t>());
    EXPECT_TRUE(type.isOk() && type->commit().isOk());
    return *type;
  }
  uint8_t& at(size_t packed) { return packed < (32 << 10) ? base_[packed] : base_[2 * kPiece + packed - (32 << 10)]; }

 private:
  uint8_t* base_ = nullptr;
};

struct SelfContext {
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<Context> context;
};

SelfContext selfContext(Scheme forced) {
  SelfContext self;
  auto domain = fabric::openDomain("shm", {"user-registration-" + std::to_string(getpid()), ""});
  EXPECT_TRUE(domain.isOk()) << domain.status().toString();
  self.domain = std::move(domain).value();
  Options options;
  options.eagerLimit = 1024;
  // kPipelined: no scheme forced, the eager fragments carry everything;
  // otherwise the rendezvous schemes do.
  options.forcedScheme = forced == Scheme::kPipelined ? Scheme::kAuto : forced;
  options.pipelineLimit = forced == Scheme::kPipelined ? int64_t{1} << 30 : 0;
  Bootstrap bootstrap;
  bootstrap.allgather = [](std::span<const uint8_t> value) -> Result<std::vector<std::vector<uint8_t>>> {
    return std::vector<std::vector<uint8_t>>{std::vector<uint8_t>(value.begin(), value.end())};
  };
  auto context = Context::create(*self.domain, bootstrap, options);
  EXPECT_TRUE(context.isOk()) << context.status().toString();
  self.context = std::move(context).value();
  return self;
}

class GappedUserBuffers : public ::testing::TestWithParam<Scheme> {};

TEST_P(GappedUserBuffers, SenderGathersAcrossTheGap) {
  SelfContext self = selfContext(GetParam());
  GappedBuffer send;
  for (size_t i = 0; i < kPiece; ++i) send.at(i) = static_cast<uint8_t>(i * 7 + 1);
  std::vector<uint8_t> got(kPiece + 16, 0xEE);
  auto recv = self.context->irecv(got.data(), kPiece, Datatype::of<uint8_t>(), 0, 1);
  ASSERT_TRUE(recv.isOk());
  Status sent = self.context->send(send.data(), 1, GappedBuffer::type(), 0, 1);
  ASSERT_TRUE(sent.isOk()) << sent.toString();
  RecvInfo info;
  Status status = self.context->wait(*recv, &info, Deadline::after(std::chrono::seconds(60)));
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_EQ(info.bytes, static_cast<int64_t>(kPiece));
  for (size_t i = 0; i < kPiece; ++i) ASSERT_EQ(got[i], static_cast<uint8_t>(i * 7 + 1)) << "byte " << i;
  for (size_t i = kPiece; i < got.size(); ++i) ASSERT_EQ(got[i], 0xEE) << "written beyond the receive buffer";
}

TEST_P(GappedUserBuffers, ReceiverWithoutOneRegionUnpacks) {
  SelfContext self = selfContext(GetParam());
  GappedBuffer receive;
  std::memset(receive.data(), 0xEE, kPiece);
  std::memset(receive.data() + 2 * kPiece, 0xEE, kPiece);
  std::vector<uint8_t> source(kPiece);
  for (size_t i = 0; i < kPiece; ++i) source[i] = static_cast<uint8_t>(i * 13 + 5);
  auto recv = self.context->irecv(receive.data(), 1, GappedBuffer::type(), 0, 2);
  ASSERT_TRUE(recv.isOk());
  Status sent = self.context->send(source.data(), kPiece, Datatype::of<uint8_t>(), 0, 2);
  ASSERT_TRUE(sent.isOk()) << sent.toString();
  RecvInfo info;
  Status status = self.context->wait(*recv, &info, Deadline::after(std::chrono::seconds(60)));
  ASSERT_TRUE(status.isOk()) << status.toString();
  if (GetParam() == Scheme::kPipelined) EXPECT_EQ(info.scheme, Scheme::kPipelined);
  else EXPECT_TRUE(info.scheme == Scheme::kBcSpup || info.scheme == Scheme::kRwgUp || info.scheme == Scheme::kGeneric)
      << schemeName(info.scheme);
  for (size_t i = 0; i < kPiece; ++i) ASSERT_EQ(receive.at(i), static_cast<uint8_t>(i * 13 + 5)) << "byte " << i;
  // The rest of each piece is untouched.
  for (size_t i = 32 << 10; i < kPiece; ++i) {
    ASSERT_EQ(receive.data()[i], 0xEE);
    ASSERT_EQ(receive.data()[2 * kPiece + i], 0xEE);
  }
}

// Two 32 KiB blocks 1 GiB apart in ONE mapping, as a release build's heap
// keeps separately allocated buffers: the span registers, so only the bound
// of memory/peer_span.h keeps the peer's key off the memory in between.
class DistantBlocks {
 public:
  static constexpr size_t kGap = size_t{1} << 30;
  DistantBlocks() {
    void* memory = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    EXPECT_NE(memory, MAP_FAILED);
    base_ = static_cast<uint8_t*>(memory);
    std::memset(base_, 0xEE, kPiece);
    std::memset(base_ + kPiece + kGap, 0xEE, kPiece);
    for (size_t page : kSecretPages) std::memset(base_ + kPiece + page, kSecret, 4096);
  }
  ~DistantBlocks() { munmap(base_, kBytes); }
  uint8_t* data() const { return base_; }
  static Datatype type() {
    std::vector<int64_t> lengths = {32 << 10, 32 << 10};
    std::vector<int64_t> displacements = {0, static_cast<int64_t>(kPiece + kGap)};
    auto type = Datatype::hindexed(lengths, displacements, Datatype::of<uint8_t>());
    EXPECT_TRUE(type.isOk() && type->commit().isOk());
    return *type;
  }
  uint8_t at(size_t packed) const {
    return packed < (32 << 10) ? base_[packed] : base_[kPiece + kGap + packed - (32 << 10)];
  }
  // The gap's pages this test wrote (first, middle, last) still hold the secret.
  bool secretIntact() const {
    for (size_t page : kSecretPages) {
      for (size_t i = 0; i < 4096; ++i) {
        if (base_[kPiece + page + i] != kSecret) return false;
      }
    }
    return true;
  }

 private:
  static constexpr size_t kBytes = kPiece + kGap + kPiece;
  static constexpr uint8_t kSecret = 0x5C;
  static constexpr size_t kSecretPages[] = {0, kGap / 2, kGap - 4096};
  uint8_t* base_ = nullptr;
};

class DistantUserBlocks : public ::testing::TestWithParam<Scheme> {};

TEST_P(DistantUserBlocks, ReceiverUnpacksInsteadOfKeyingTheGap) {
  SelfContext self = selfContext(GetParam());
  DistantBlocks receive;
  std::vector<uint8_t> source(kPiece);
  for (size_t i = 0; i < kPiece; ++i) source[i] = static_cast<uint8_t>(i * 29 + 3);
  auto recv = self.context->irecv(receive.data(), 1, DistantBlocks::type(), 0, 3);
  ASSERT_TRUE(recv.isOk());
  Status sent = self.context->send(source.data(), kPiece, Datatype::of<uint8_t>(), 0, 3);
  ASSERT_TRUE(sent.isOk()) << sent.toString();
  RecvInfo info;
  Status status = self.context->wait(*recv, &info, Deadline::after(std::chrono::seconds(60)));
  ASSERT_TRUE(status.isOk()) << status.toString();
  EXPECT_TRUE(info.scheme == Scheme::kBcSpup || info.scheme == Scheme::kRwgUp || info.scheme == Scheme::kGeneric)
      << schemeName(info.scheme);
  EXPECT_EQ(self.context->counters().layoutsSent, 0u) << "a zero-copy reply went out";
  for (size_t i = 0; i < kPiece; ++i) ASSERT_EQ(receive.at(i), static_cast<uint8_t>(i * 29 + 3)) << "byte " << i;
  for (size_t i = 32 << 10; i < kPiece; ++i) ASSERT_EQ(receive.data()[i], 0xEE) << "after the first block";
  EXPECT_TRUE(receive.secretIntact());
}

// Multi-W and P-RRS ask for the zero-copy reply; auto may too.
INSTANTIATE_TEST_SUITE_P(Schemes, DistantUserBlocks, ::testing::Values(Scheme::kAuto, Scheme::kMultiW, Scheme::kPRrs),
                         [](const auto& param) { return testing::schemeTestName(param.param); });

INSTANTIATE_TEST_SUITE_P(Schemes, GappedUserBuffers,
                         ::testing::Values(Scheme::kAuto, Scheme::kRwgUp, Scheme::kMultiW, Scheme::kPRrs,
                                           Scheme::kPipelined),
                         [](const auto& param) { return testing::schemeTestName(param.param); });

}  // namespace
}  // namespace ibdt::messaging
