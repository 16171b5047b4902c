#include "collectives/alltoall_data.h"

#include <algorithm>
#include <stdexcept>

namespace ibdt::collectives::testing {

namespace ref = datatype::testing;

Side sideOf(const Datatype& type, const ref::Ref& model, int64_t count) {
  return Side{type, count, ref::refByteOffsets(model, count)};
}

Side byteSide(int64_t count) {
  return sideOf(Datatype::basic(datatype::BasicKind::kByte), ref::refBasic(datatype::BasicKind::kByte), count);
}

Side vectorSide(int64_t count) {
  auto type = Datatype::vector(4, 3, 5, Datatype::of<int32_t>());
  if (!type.isOk() || !type->commit().isOk()) throw std::runtime_error("vector(4, 3, 5, int32) failed");
  ref::Ref model = ref::refHvector(4, 3, 5 * 4, ref::refBasic(datatype::BasicKind::kInt32));
  return sideOf(*type, model, count);
}

Side denseSide(const Datatype& type, int64_t count) {
  auto map = datatype::typeMap(type);
  if (!map.isOk()) throw std::runtime_error("typeMap: " + map.status().toString());
  std::vector<int64_t> blocklens, displs;
  std::vector<Datatype> kinds;
  std::vector<ref::Ref> refKinds;
  int64_t at = 0;
  for (const datatype::TypeMapEntry& entry : *map) {
    blocklens.push_back(1);
    displs.push_back(at);
    kinds.push_back(Datatype::basic(entry.kind));
    refKinds.push_back(ref::refBasic(entry.kind));
    at += datatype::basicSize(entry.kind);
  }
  auto packed = Datatype::structType(blocklens, displs, kinds);
  if (!packed.isOk()) throw std::runtime_error("struct: " + packed.status().toString());
  auto dense = Datatype::resized(*packed, 0, at);
  if (!dense.isOk() || !dense->commit().isOk()) throw std::runtime_error("resized dense type failed");
  ref::Ref model = ref::refResized(ref::refStruct(blocklens, displs, refKinds), 0, at);
  return sideOf(*dense, model, count);
}

int64_t AlltoallBuffers::lowest(const Side& side) {
  return side.offsets.empty() ? 0 : std::min<int64_t>(0, *std::min_element(side.offsets.begin(), side.offsets.end()));
}

int64_t AlltoallBuffers::span(const Side& side, int size) {
  int64_t highest = 0;
  for (int64_t offset : side.offsets) highest = std::max(highest, offset + 1);
  return highest + (size - 1) * side.stride() - lowest(side);
}

AlltoallBuffers::AlltoallBuffers(Side send, Side recv, int size, int rank)
    : sendSide_(std::move(send)), recvSide_(std::move(recv)), size_(size), rank_(rank) {
  sendBase_ = kGuardBytes - lowest(sendSide_);
  send_ = sendImage(rank);
  sendExpected_ = send_;
  recvBase_ = kGuardBytes - lowest(recvSide_);
  recv_.assign(static_cast<size_t>(span(recvSide_, size) + 2 * kGuardBytes), kGuard);
}

// Later bytes win where a send type's map overlaps itself, as in memory.
std::vector<uint8_t> AlltoallBuffers::sendImage(int rank) const {
  std::vector<uint8_t> image(static_cast<size_t>(span(sendSide_, size_) + 2 * kGuardBytes), kSendGap);
  for (int to = 0; to < size_; ++to) {
    for (int64_t k = 0; k < sendSide_.bytes(); ++k) {
      image[static_cast<size_t>(sendBase_ + to * sendSide_.stride() + sendSide_.offsets[static_cast<size_t>(k)])] =
          static_cast<uint8_t>(pattern(rank, to, k) + run_ * 31);
    }
  }
  return image;
}

void AlltoallBuffers::clearReceive() { std::fill(recv_.begin(), recv_.end(), kGuard); }

void AlltoallBuffers::loadInPlace() {
  clearReceive();
  for (int to = 0; to < size_; ++to) {
    for (size_t k = 0; k < recvSide_.offsets.size(); ++k) {
      recv_[static_cast<size_t>(recvBase_ + to * recvSide_.stride() + recvSide_.offsets[k])] =
          send_[static_cast<size_t>(sendBase_ + to * sendSide_.stride() + sendSide_.offsets[k])];
    }
  }
}

void AlltoallBuffers::refill(int run) {
  run_ = run;
  sendExpected_ = sendImage(rank_);
  std::copy(sendExpected_.begin(), sendExpected_.end(), send_.begin());
}

std::string AlltoallBuffers::check(const std::vector<int>& skip) const {
  if (send_ != sendExpected_) return "rank " + std::to_string(rank_) + ": the send buffer changed";
  std::vector<uint8_t> expected(recv_.size(), kGuard);
  std::vector<bool> skipped(recv_.size(), false);
  for (int from = 0; from < size_; ++from) {
    const bool skipThis = std::find(skip.begin(), skip.end(), from) != skip.end();
    const std::vector<uint8_t> sent = sendImage(from);  // what `from` packs for this rank
    for (int64_t k = 0; k < recvSide_.bytes(); ++k) {
      const size_t at =
          static_cast<size_t>(recvBase_ + from * recvSide_.stride() + recvSide_.offsets[static_cast<size_t>(k)]);
      expected[at] =
          sent[static_cast<size_t>(sendBase_ + rank_ * sendSide_.stride() + sendSide_.offsets[static_cast<size_t>(k)])];
      skipped[at] = skipThis;
    }
  }
  for (size_t i = 0; i < recv_.size(); ++i) {
    if (skipped[i] || recv_[i] == expected[i]) continue;
    return "rank " + std::to_string(rank_) + ": receive byte " + std::to_string(static_cast<int64_t>(i) - recvBase_) +
           " (from the base) is " + std::to_string(recv_[i]) + ", expected " + std::to_string(expected[i]) +
           (expected[i] == kGuard ? " (a gap or guard byte: must be untouched)" : "");
  }
  return "";
}

namespace {
std::string startWaitCheck(Plan& plan, AlltoallBuffers& buffers, Deadline deadline) {
  if (Status status = plan.start(); !status.isOk()) return "start: " + status.toString();
  if (Status status = plan.wait(deadline); !status.isOk()) return "wait: " + status.toString();
  return buffers.check();
}
}  // namespace

std::string runChecked(Plan& plan, AlltoallBuffers& buffers, int run, Deadline deadline) {
  buffers.refill(run);
  buffers.clearReceive();
  return startWaitCheck(plan, buffers, deadline);
}

std::string runRebound(Plan& plan, AlltoallBuffers (&sets)[2], int rank, int run, Deadline deadline) {
  AlltoallBuffers& send = sets[(run + rank) % 2];
  AlltoallBuffers& recv = sets[(run / 2 + rank / 2) % 2];
  for (AlltoallBuffers& set : sets) set.refill(run);
  recv.clearReceive();
  if (Status moved = plan.rebind(send.sendbuf(), recv.recvbuf()); !moved.isOk()) return moved.toString();
  return startWaitCheck(plan, recv, deadline);
}

std::string runInPlaceChecked(Plan& plan, AlltoallBuffers& buffers, int run, Deadline deadline) {
  buffers.refill(run);
  buffers.loadInPlace();
  return startWaitCheck(plan, buffers, deadline);
}

}  // namespace ibdt::collectives::testing
