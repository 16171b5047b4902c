#include "transport/messaging/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/fastest.h"

namespace ibdt::messaging {
namespace {

double ceilDiv(double a, double b) { return std::ceil(a / std::max(b, 1.0)); }

// Distinct pages `side` touches: each block starts somewhere in a page.
double pagesTouched(const SideLayout& side, size_t page) {
  if (side.contiguous) return ceilDiv(static_cast<double>(side.bytes), static_cast<double>(page)) + 1;
  double perBlock = side.meanBlock / static_cast<double>(page) + 1;
  return std::min(static_cast<double>(side.blocks) * perBlock,
                  static_cast<double>(side.blocks) + static_cast<double>(side.bytes) / static_cast<double>(page));
}

// Two pipelined stages over `segments` segments: the slower one dominates,
// the other adds its share of one segment.
double pipelined(double first, double second, double segments) {
  return std::max(first, second) + std::min(first, second) / std::max(segments, 1.0);
}

}  // namespace

double CostModel::packBelowBlock() const {
  return std::max(0.0, iovecNsPerBlock + transfer.allocatedPerSgeNs - packNsPerBlock) * packBytesPerNs;
}

SideLayout sideLayout(const datatype::Stats& stats) {
  return SideLayout{stats.size, stats.contiguous, std::max<int64_t>(1, stats.blockCount), stats.meanBlock};
}

int64_t segmentSizeFor(int64_t bytes, int64_t configured) {
  if (configured > 0) return configured;
  constexpr int64_t kMin = 16 << 10, kMax = 64 << 10;
  return std::clamp<int64_t>((bytes / 4 + 4095) / 4096 * 4096, kMin, kMax);
}

double estimateNs(Scheme scheme, const SideLayout& sender, const SideLayout& receiver, const CostModel& model,
                  int64_t segmentSize) {
  const fabric::TransferCost& t = model.transfer;
  const double n = static_cast<double>(std::min(sender.bytes, receiver.bytes));
  const double copy = n / model.memcpyBytesPerNs;
  const double wire = n / t.bytesPerNs;                 // into user memory
  const double staged = n / t.allocatedBytesPerNs;      // into allocated memory
  const double segments = ceilDiv(n, static_cast<double>(segmentSize));
  const double list = std::max<uint32_t>(1, model.listLength);
  const double sge = std::max<uint32_t>(1, model.maxSge);
  const double senderBlocks = sender.contiguous ? 1 : static_cast<double>(sender.blocks);
  const double receiverBlocks = receiver.contiguous ? 1 : static_cast<double>(receiver.blocks);
  const double unpack = copy;  // the receiver copies out of its staging buffer
  switch (scheme) {
    case Scheme::kContiguous:
      return t.perRequestNs + t.perSgeNs + t.perRemotePageNs * pagesTouched(receiver, model.pageSize) + wire;
    case Scheme::kMultiW: {
      double writes = receiver.contiguous ? ceilDiv(senderBlocks, sge) : receiverBlocks;
      return t.perRequestNs * ceilDiv(writes, list) + t.perSgeNs * (senderBlocks + receiverBlocks) +
             t.perRemotePageNs * pagesTouched(receiver, model.pageSize) + wire;
    }
    case Scheme::kPRrs: {
      double reads = ceilDiv(receiverBlocks, sge);
      double request = t.perRequestNs * ceilDiv(reads, list) + t.perSgeNs * receiverBlocks;
      if (sender.contiguous) return request + t.perRemotePageNs * pagesTouched(sender, model.pageSize) + wire;
      return copy + request + staged;  // pack all, then read from allocated memory
    }
    case Scheme::kRwgUp: {
      double writes = segments + ceilDiv(senderBlocks, sge);
      double send = t.allocatedPerRequestNs * writes + (t.allocatedPerSgeNs + model.iovecNsPerBlock) * senderBlocks +
                    (t.initiatorCopies ? staged : 0);
      double transport = t.initiatorCopies ? 0 : staged;
      return pipelined(send + transport, unpack, segments);
    }
    case Scheme::kBcSpup: {
      double send = copy + t.allocatedPerRequestNs * segments + (t.initiatorCopies ? staged : 0);
      double transport = t.initiatorCopies ? 0 : staged;
      return pipelined(pipelined(send, transport, segments), unpack, segments);
    }
    case Scheme::kGeneric:
      return copy + t.allocatedPerRequestNs + staged + copy;
    default:
      return 0;
  }
}

Status measureBlockCosts(CostModel& model) {
  constexpr int64_t kBlocks = 4096;
  IBDT_ASSIGN_OR_RETURN(auto type, datatype::Datatype::vector(kBlocks, 2, 4, datatype::Datatype::of<int32_t>()));
  IBDT_RETURN_IF_ERROR(type.commit());
  IBDT_ASSIGN_OR_RETURN(auto segment, datatype::Segment::create(type, 1));
  std::vector<uint8_t> user(static_cast<size_t>(kBlocks * 16), 1), packed(static_cast<size_t>(segment.size()));
  std::vector<datatype::Iovec> iovecs(64);
  auto base = reinterpret_cast<uint64_t>(user.data());
  Status failed;
  // Packing `from` through `segment` into `to`, timed.
  auto timedPack = [&](const datatype::Segment& of, const uint8_t* from, uint8_t* to) {
    return fastestNs(5, [&] {
      Status status = of.pack(from, 0, of.size(), to);
      if (!status.isOk()) failed = status;
    });
  };
  double listing = fastestNs(5, [&] {
    for (int64_t at = 0; at < segment.size() && failed.isOk();) {  // as a sender walks it: 64 iovecs at a time
      auto fill = segment.iovecs(base, at, segment.size(), iovecs.data(), iovecs.size());
      if (!fill.isOk()) failed = fill.status();
      else at += fill->bytes;
    }
  });
  double packing = timedPack(segment, user.data(), packed.data());
  IBDT_RETURN_IF_ERROR(failed);
  // Warm blocks of a typical size: the rate a sender packs what it just used.
  IBDT_ASSIGN_OR_RETURN(auto rows, datatype::Datatype::vector(128, 128, 1024, datatype::Datatype::of<int32_t>()));
  IBDT_RETURN_IF_ERROR(rows.commit());
  IBDT_ASSIGN_OR_RETURN(auto rowSegment, datatype::Segment::create(rows, 1));
  std::vector<uint8_t> matrix(static_cast<size_t>(128 * 4096), 3), out(static_cast<size_t>(rowSegment.size()));
  double warm = timedPack(rowSegment, matrix.data(), out.data());
  IBDT_RETURN_IF_ERROR(failed);
  model.packBytesPerNs = static_cast<double>(rowSegment.size()) / std::max(warm, 1.0);
  double copying = static_cast<double>(segment.size()) / model.packBytesPerNs;
  model.iovecNsPerBlock = listing / kBlocks;
  model.packNsPerBlock = std::max(0.0, packing - copying) / kBlocks;
  return Status::ok();
}

int64_t singleCopyReadCrossover(const CostModel& model) {
  const fabric::TransferCost& transfer = model.transfer;
  const double readPerByte =
      1 / transfer.bytesPerNs + transfer.perRemotePageNs / static_cast<double>(std::max<size_t>(1, model.pageSize));
  const double twoCopiesPerByte = 2 / model.memcpyBytesPerNs;
  if (readPerByte >= twoCopiesPerByte) return 0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(transfer.perRequestNs / (twoCopiesPerByte - readPerByte))));
}

double measureMemcpyBytesPerNs() {
  // Larger than the caches: rendezvous messages are copied from memory, not L2.
  constexpr size_t kBytes = 8u << 20;
  std::vector<uint8_t> from(kBytes, 1), to(kBytes, 0);
  double ns = fastestNs(3, [&] {
    std::memcpy(to.data(), from.data(), kBytes);
    asm volatile("" : : "r"(to.data()) : "memory");  // keep the copy from being optimised away
  });
  return ns > 0 ? kBytes / ns : 1;
}

}  // namespace ibdt::messaging
