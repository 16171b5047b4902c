// transport/fabric/shm/layout.h — the structures the shm provider places in
// shared memory, read and written by several processes at once.
//
// Two kinds of segment exist per process:
//   * the domain segment: a header, the registration table (checked by
//     peers on every one-sided access), the completion-queue doorbells
//     (futex words peers bump to wake a sleeping waiter) and the activity
//     summary (a bitmap, one bit per endpoint, that a peer sets after
//     pushing a notification so that progress visits only those endpoints;
//     docs/many-ranks.md);
//   * one endpoint segment per endpoint: its receive queue (produced by the
//     owner, consumed by the peer that executes a SEND) and its inbound
//     notification ring (produced by the peer, consumed by the owner).
// Every field another process reads is an atomic; indices live on their own
// cache lines so producer and consumer never share one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ibdt::fabric::shm {

constexpr size_t kCacheLine = 64;
// 4: a region entry names where its bytes lie inside the segment (segmentOffset)
// and which entry owns the segment (segmentOwner): per-buffer pool keys.
constexpr uint32_t kLayoutVersion = 4;
constexpr uint32_t kDomainMagic = 0x49424453;    // "IBDS"
constexpr uint32_t kEndpointMagic = 0x49424445;  // "IBDE"

// Capacity of a domain's registration table; the slot index is the low 16
// bits of lkey and the low 32 bits of rkey.
constexpr uint32_t kMaxRegions = 1u << 16;
constexpr uint32_t kMaxCompletionQueues = 1024;
// Endpoints of a domain with a bit in its activity summary (more are polled
// on every progress, as all were before the summary).
constexpr uint32_t kMaxActivitySlots = 8192;
constexpr uint32_t kNoActivitySlot = ~uint32_t{0};
constexpr uint32_t kMaxSge = 64;
// Bounce buffer per endpoint, used only when cross-memory attach is not
// permitted (chunks of a larger transfer go through it one at a time).
constexpr size_t kBounceSize = 256 * 1024;

// Reads a field that another process can rewrite at any moment exactly
// once: a plain read may be repeated by the compiler, so a bounds check and
// the use after it could see different values.
template <typename T>
T readOnce(const T& field) {
  return __atomic_load_n(&field, __ATOMIC_RELAXED);
}

// One registered region. `sequence` is a seqlock word: odd while the slot
// is free or being rewritten, even and equal to the rkey's generation while
// the registration is live, so a deregistered or reused slot fails every
// key issued before.
struct RegionEntry {
  std::atomic<uint32_t> sequence{1};
  std::atomic<uint32_t> access{0};
  std::atomic<uint64_t> address{0};
  std::atomic<uint64_t> length{0};
  // Provider-allocated memory: the memfd that peers map to access it with a
  // plain copy (fd number in the owner, inode to confirm the reopen).
  std::atomic<int32_t> segmentFd{-1};
  // The entry of the allocation that owns the segment (itself for
  // allocateMemory's own entry): a peer keeps its mapping while that lives.
  std::atomic<uint32_t> segmentOwner{0};
  std::atomic<uint64_t> segmentInode{0};
  // Where `address` lies in the segment: non-zero for a registration of part
  // of an allocation (a pool buffer), whose key reaches only that part.
  std::atomic<uint64_t> segmentOffset{0};
};

// A futex word per completion queue. After producing work for the queue's
// owner, peers bump `sequence` and wake it when `sleepers` is non-zero.
struct alignas(kCacheLine) Doorbell {
  std::atomic<uint32_t> sequence{0};
  std::atomic<uint32_t> sleepers{0};
};

struct DomainHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t pid;
  uint32_t regionCapacity;
  uint32_t doorbellCapacity;
  uint32_t activityCapacity;  // bits of the activity summary
  uint64_t regionsOffset;
  uint64_t doorbellsOffset;
  uint64_t activityOffset;  // kMaxActivitySlots / 64 words, cache-line aligned
};

// Producer and consumer indices of a single-producer single-consumer ring,
// each on its own cache line. Indices grow without wrapping; slot = index % capacity.
struct RingIndices {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};  // written by the producer
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};  // written by the consumer
};

// A receive work request as the peer sees it: where a SEND may scatter.
struct RecvSge {
  uint64_t address;
  uint32_t length;
  uint32_t regionIndex;  // slot in the owner's registration table (checked at post)
};

struct RecvSlot {
  uint32_t numSge;
  uint32_t reserved;
  RecvSge sge[1];  // numSge entries; the slot stride holds maxRecvSge of them
};

// What a notification asks of the owner.
enum class NotificationKind : uint8_t {
  kReceiveDone = 0,  // one of the owner's receives was consumed: complete it
  // Bounce path (cross-memory attach not permitted): the owner copies
  // between its own memory and the initiator's bounce buffer, then acks.
  kBounceWrite = 1,     // bounce -> [address, address + chunkLength)
  kBounceRead = 2,      // [address, address + chunkLength) -> bounce
  kBounceReceive = 3,   // bounce -> the next receive's buffers at message offset `address`
};

// What a peer tells the owner: a consumed receive, or a bounce request.
struct Notification {
  uint32_t byteLength;
  uint32_t immData;
  uint8_t opcode;  // fabric::Opcode of the receive completion
  uint8_t hasImm;
  uint8_t status;  // fabric::CompletionStatus
  uint8_t kind;    // NotificationKind
  uint32_t chunkLength;
  uint64_t address;
};

// One entry of the notification ring. The owner polls the entry at its tail
// rather than the ring's head index: one cache line to miss on per arrival
// instead of two (head, then entry).
struct NotificationSlot {
  std::atomic<uint64_t> sequence{0};  // ring index + 1 once `note` is complete
  Notification note;
};

enum class EndpointPhase : uint32_t { kCreated = 0, kConnected = 1, kError = 2, kClosed = 3 };

struct EndpointHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t pid;
  uint32_t endpointId;
  uint32_t recvDepth;
  uint32_t recvSlotSize;
  uint32_t sendDoorbell;  // index of the owner's send-queue CQ doorbell
  uint32_t recvDoorbell;  // index of the owner's receive-queue CQ doorbell
  uint64_t recvRingOffset;
  uint64_t notifyRingOffset;
  uint32_t notifyCapacity;  // recvDepth + 1: receives plus one bounce request
  uint32_t bounceSize;
  uint64_t bounceOffset;    // the owner's bounce buffer, filled/drained by the peer
  std::atomic<uint32_t> phase{0};  // EndpointPhase
  uint32_t activitySlot;  // the owner's bit in its domain's activity summary (kNoActivitySlot: none)
  // Non-zero while the owner polls this endpoint's notification ring on
  // every progress (a recently active endpoint, activity.h): the peer then
  // skips setting the activity bit, so a single-peer exchange pays no more
  // than it did before the summary. Read by the peer after a seq_cst fence.
  alignas(kCacheLine) std::atomic<uint32_t> polledDirectly{0};
  // Bounce requests of the owner that the peer carried out (peer writes).
  alignas(kCacheLine) std::atomic<uint64_t> bounceAcked{0};
  // recv ring: owner produces (head), peer consumes (tail).
  RingIndices recvRing;
  // notification ring: peer produces (head), owner consumes (tail); the
  // owner learns of new entries from their sequence (NotificationSlot).
  RingIndices notifyRing;
};

inline size_t recvSlotSize(uint32_t maxSge) {
  size_t bytes = offsetof(RecvSlot, sge) + sizeof(RecvSge) * (maxSge == 0 ? 1 : maxSge);
  return (bytes + 15) & ~size_t{15};
}

inline size_t roundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

}  // namespace ibdt::fabric::shm
