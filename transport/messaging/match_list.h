// transport/messaging/match_list.h — MPI matching order for posted receives
// and unexpected messages.
//
// Both queues obey the same rule: an arriving message matches the earliest
// posted receive that accepts it, and a new receive matches the earliest
// unexpected message it accepts. With in-order delivery per endpoint this
// gives MPI's non-overtaking order per (source, tag, communicator).
// The list is intrusive (no allocation per element) so cancel is O(1).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ibdt/messaging.h"  // kAnySource, kAnyTag

namespace ibdt::messaging {

// Who sent a message, with which tag, on which communicator (context id).
struct Envelope {
  int32_t source = 0;
  int32_t tag = 0;
  uint32_t communicator = 0;
};

// What a receive accepts; kAnySource / kAnyTag are wildcards, the
// communicator must match exactly (libraries never see each other's messages).
struct MatchSpec {
  int32_t source = kAnySource;
  int32_t tag = kAnyTag;
  uint32_t communicator = 0;

  bool accepts(const Envelope& envelope) const {
    return communicator == envelope.communicator && (source == kAnySource || source == envelope.source) &&
           (tag == kAnyTag || tag == envelope.tag);
  }
};

// Base of every element that can sit in a MatchList.
class MatchListHook {
 public:
  bool linked() const { return owner_ != nullptr; }

 private:
  template <typename T>
  friend class MatchList;
  MatchListHook* prev_ = nullptr;
  MatchListHook* next_ = nullptr;
  const void* owner_ = nullptr;
};

// FIFO of T (which derives from MatchListHook) with "take the first element
// that satisfies a predicate".
template <typename T>
class MatchList {
 public:
  MatchList() = default;
  MatchList(const MatchList&) = delete;
  MatchList& operator=(const MatchList&) = delete;

  bool empty() const { return head_ == nullptr; }
  size_t size() const { return size_; }

  void pushBack(T* item) {
    MatchListHook* hook = item;
    hook->prev_ = tail_;
    hook->next_ = nullptr;
    hook->owner_ = this;
    if (tail_ != nullptr) tail_->next_ = hook;
    else head_ = hook;
    tail_ = hook;
    ++size_;
  }

  // Removes `item` if it is in this list; returns whether it was.
  bool remove(T* item) {
    MatchListHook* hook = item;
    if (hook->owner_ != this) return false;
    (hook->prev_ != nullptr ? hook->prev_->next_ : head_) = hook->next_;
    (hook->next_ != nullptr ? hook->next_->prev_ : tail_) = hook->prev_;
    hook->prev_ = hook->next_ = nullptr;
    hook->owner_ = nullptr;
    --size_;
    return true;
  }

  // Removes and returns the earliest element for which pred(element) holds.
  template <typename Pred>
  T* takeFirst(Pred&& pred) {
    for (MatchListHook* hook = head_; hook != nullptr; hook = hook->next_) {
      T* item = static_cast<T*>(hook);
      if (pred(*item)) {
        remove(item);
        return item;
      }
    }
    return nullptr;
  }

  template <typename Fn>
  void forEach(Fn&& fn) const {
    for (MatchListHook* hook = head_; hook != nullptr; hook = hook->next_) fn(*static_cast<T*>(hook));
  }

 private:
  MatchListHook* head_ = nullptr;
  MatchListHook* tail_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ibdt::messaging
