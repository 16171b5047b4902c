// The in-place alltoallv's index sets (see inplace_index_sets.h).
#include "collectives/inplace_index_sets.h"

#include <algorithm>
#include <cstring>

#include "collectives/inplace_copy.h"

namespace ibdt::collectives {

InPlaceIndexSets::InPlaceIndexSets(Layout layout)
    : base_(layout.base), rank_(layout.rank), elements_(std::move(layout.elements)), itemSize_(elements_.packedBytes()), size_(static_cast<int>(layout.sendcounts.size())),
      sendcount_(std::move(layout.sendcounts)), sdispl_(std::move(layout.sdispls)),
      recvcount_(std::move(layout.recvcounts)), rdispl_(std::move(layout.rdispls)),
      inlineSend_(std::move(layout.inlineSend)), inlineRecv_(std::move(layout.inlineRecv)) {
  inlineSend_.resize(static_cast<size_t>(size_), 0);
  inlineRecv_.resize(static_cast<size_t>(size_), 0);
}

Result<InPlaceIndexSets> InPlaceIndexSets::create(Layout layout, int64_t auxBytes, int64_t auxBuffers) {
  const int64_t itemSize = layout.elements.packedBytes();
  if (auxBytes < itemSize) {
    return makeError(Code::kInvalidArgument, "alltoallv in place: auxiliary memory of ", auxBytes,
                     " bytes holds no element of ", itemSize, " bytes (at least one is needed)");
  }
  // Inline blocks (inplace_control_messages.h) first: they leave and arrive
  // with phase 0's control, so neither the copy nor the auxiliary buffers
  // see them, and their bytes (both ways) come out of a while a holds them.
  std::vector<int64_t> sendcounts = layout.sendcounts;
  int64_t incoming = 0, inlineBytes = 0;
  for (size_t peer = 0; peer < sendcounts.size(); ++peer) {
    if (peer < layout.inlineSend.size() && layout.inlineSend[peer]) {
      inlineBytes += sendcounts[peer] * itemSize;
      sendcounts[peer] = 0;
    }
    if (peer < layout.inlineRecv.size() && layout.inlineRecv[peer]) {
      inlineBytes += layout.recvcounts[peer] * itemSize;
    } else {
      incoming += layout.recvcounts[peer];  // more than the incoming items could never be used
    }
  }
  auxBytes = std::max(itemSize, auxBytes - inlineBytes);
  // The copy path next (inplace_copy.h); the auxiliary buffers get the rest.
  InPlaceCopyChoice copies = chooseInPlaceCopies(sendcounts, itemSize, auxBytes);
  auxBytes = copies.auxBytes == 0 ? 0 : std::max(itemSize, std::min(copies.auxBytes, incoming * itemSize));
  // Streams (inplace_pair_stream.h) get up to 7/8 of what is left, a slice
  // of whole items per pair that may stream; the buffers keep the rest (at
  // least one item) for pairs whose partner cannot stream.
  const size_t size = layout.sendcounts.size();
  std::vector<int64_t> streamItems(size, 0), streamAt(size, 0);
  std::vector<size_t> lined;
  for (size_t peer = 0; peer < size; ++peer) {
    const bool elsewhere = copies.copied[peer] || (peer < layout.inlineSend.size() && layout.inlineSend[peer]) ||
                           (peer < layout.inlineRecv.size() && layout.inlineRecv[peer]);
    if (!elsewhere && layout.sendcounts[peer] > 0 && layout.sendcounts[peer] == layout.recvcounts[peer] &&
        layout.sdispls[peer] == layout.rdispls[peer] && static_cast<int>(peer) != layout.rank) {
      lined.push_back(peer);
    }
  }
  int64_t streamTotal = 0;
  const int64_t capacity = auxBytes / itemSize, linedCount = static_cast<int64_t>(lined.size());
  if (linedCount > 0 && capacity > linedCount) {
    const int64_t slice = std::max<int64_t>(1, (capacity - std::max<int64_t>(1, capacity / 8)) / linedCount);
    for (size_t peer : lined) {
      streamItems[peer] = std::min(slice, layout.sendcounts[peer]);
      streamAt[peer] = streamTotal;
      streamTotal += streamItems[peer];
    }
    auxBytes -= streamTotal * itemSize;
  }
  InPlaceIndexSets sets(std::move(layout));
  sets.streamItems_ = std::move(streamItems);
  sets.streamAt_ = std::move(streamAt);
  sets.streamData_.resize(static_cast<size_t>(streamTotal * itemSize));
  sets.copied_ = std::move(copies.copied);
  sets.copyAt_ = std::move(copies.at);
  sets.copy_.resize(static_cast<size_t>(copies.items * itemSize));
  // Whole items per buffer; fewer buffers when a / b would hold none; one
  // empty buffer when everything is copied (no item ever waits for one).
  const int64_t buffers = std::max<int64_t>(1, std::min(auxBuffers, auxBytes / itemSize));
  sets.aux_.resize(static_cast<size_t>(buffers));
  for (AuxBuffer& buffer : sets.aux_) {
    buffer.capacity = auxBytes / buffers / itemSize;
    buffer.data.resize(static_cast<size_t>(buffer.capacity * itemSize));
  }
  sets.sent_.resize(size);
  sets.placed_.resize(size);
  sets.occupied_.resize(size);
  sets.staged_.resize(size);
  sets.stagedFrom_.resize(size);
  sets.insideRecv_.resize(size);
  sets.pieces_.reserve(3 * size);
  sets.firstPiece_.reserve(size + 1);
  return sets;
}

// Sect. 3.2: each send set cut at the bounds of the receive sets, so that a
// piece lies inside one receive set or outside all.
void InPlaceIndexSets::split() {
  std::vector<int> byStart;  // non-empty receive sets by position
  for (int j = 0; j < size_; ++j) {
    if (counts(recvcount_, j) > 0) byStart.push_back(j);
  }
  std::sort(byStart.begin(), byStart.end(), [&](int a, int b) { return counts(rdispl_, a) < counts(rdispl_, b); });
  pieces_.clear();
  firstPiece_.clear();
  for (int i = 0; i < size_; ++i) {
    firstPiece_.push_back(pieces_.size());
    int64_t at = counts(sdispl_, i);
    // A copied block waits in the copy, an inline one in its control message.
    const bool elsewhere = copied_[index(i)] || inlineSend_[index(i)];
    const int64_t end = elsewhere ? at : at + counts(sendcount_, i);
    while (at < end) {
      // The last receive set starting at or before `at`, and the next one after.
      auto next = std::upper_bound(byStart.begin(), byStart.end(), at,
                                   [&](int64_t x, int j) { return x < counts(rdispl_, j); });
      int inside = -1;
      int64_t stop = end;
      if (next != byStart.begin()) {
        const int j = *(next - 1);
        if (at < counts(rdispl_, j) + counts(recvcount_, j)) {
          inside = j;
          stop = std::min(end, counts(rdispl_, j) + counts(recvcount_, j));
        }
      }
      if (inside < 0 && next != byStart.end()) stop = std::min(end, counts(rdispl_, *next));
      pieces_.push_back({i, at, stop - at, inside});
      at = stop;
    }
  }
  firstPiece_.push_back(pieces_.size());
  for (auto& inside : insideRecv_) inside.clear();
  for (size_t k = 0; k < pieces_.size(); ++k) {
    if (pieces_[k].recvSet >= 0) insideRecv_[index(pieces_[k].recvSet)].push_back(k);
  }
  for (auto& inside : insideRecv_) {
    std::sort(inside.begin(), inside.end(), [&](size_t a, size_t b) { return pieces_[a].at < pieces_[b].at; });
  }
}

void InPlaceIndexSets::reset() {
  for (int i = 0; i < size_; ++i) {  // before anything moves inside the buffer
    if (!copied_[index(i)]) continue;
    elements_.copy(item(sdispl_[index(i)]), false, copy_.data() + copyAt_[index(i)] * itemSize_, true,
                   sendcount_[index(i)]);
  }
  split();
  for (size_t i = 0; i < sent_.size(); ++i) {  // inline blocks leave with phase 0's control
    sent_[i] = inlineSend_[i] ? sendcount_[i] : 0;
    staged_[i] = inlineRecv_[i] ? recvcount_[i] : 0;
    stagedFrom_[i] = nullptr;
  }
  std::fill(placed_.begin(), placed_.end(), 0);
  for (AuxBuffer& buffer : aux_) {
    buffer.used = 0;
    buffer.owner = -1;
  }
  for (int j = 0; j < size_; ++j) compact(j);
  // This rank's block to itself where it is to arrive: already in place.
  if (rank_ >= 0 && !copied_[index(rank_)] && sendcount_[index(rank_)] == recvcount_[index(rank_)] &&
      sdispl_[index(rank_)] == rdispl_[index(rank_)]) {
    detach(rank_);
  }
}

// A detached pair's block to this rank covers its receive block exactly
// (streamItems_), so no other piece lies inside it and nothing moves.
void InPlaceIndexSets::detach(int peer) {
  const size_t i = index(peer);
  for (size_t k = firstPiece_[i]; k < firstPiece_[i + 1]; ++k) pieces_[k].length = 0;
  sent_[i] = sendcount_[i];
  placed_[i] = recvcount_[i];
  occupied_[i] = 0;
  AuxBuffer& buffer = auxOf(peer);
  if (buffer.owner == peer && buffer.used == 0) buffer.owner = -1;
}

bool InPlaceIndexSets::done() const {
  for (int peer = 0; peer < size_; ++peer) {
    if (remainingSend(peer) > 0 || remainingRecv(peer) > 0 || held(peer) > 0 || staged_[index(peer)] > 0) {
      return false;
    }
  }
  return true;
}

int64_t InPlaceIndexSets::held(int peer) const {
  const AuxBuffer& buffer = auxOf(peer);
  return buffer.owner == peer ? buffer.used : 0;
}

// Moves the waiting pieces inside R_j to its top, highest first (each moves
// up into free slots only: the placed prefix lies below every piece).
void InPlaceIndexSets::compact(int recvSet) {
  int64_t top = counts(rdispl_, recvSet) + counts(recvcount_, recvSet);
  const auto& inside = insideRecv_[index(recvSet)];
  for (auto k = inside.rbegin(); k != inside.rend(); ++k) {
    Piece& piece = pieces_[*k];
    if (piece.length == 0) continue;
    const int64_t to = top - piece.length;
    if (to != piece.at) elements_.copy(item(piece.at), false, item(to), false, piece.length);
    piece.at = to;
    top = to;
  }
  occupied_[index(recvSet)] = counts(rdispl_, recvSet) + counts(recvcount_, recvSet) - top;
}

// Moves held items of R_j from its auxiliary buffer into the free run.
void InPlaceIndexSets::place(int recvSet) {
  AuxBuffer& buffer = auxOf(recvSet);
  if (buffer.owner != recvSet || buffer.used == 0) return;
  const int64_t moved = fillFreeRun(index(recvSet), buffer.data.data(), buffer.used);
  std::memmove(buffer.data.data(), buffer.data.data() + moved * itemSize_,
               static_cast<size_t>((buffer.used - moved) * itemSize_));
  buffer.used -= moved;
  if (buffer.used == 0) buffer.owner = -1;
}

// Moves an arrived inline block of R_j from its control message into the
// free run (an inline block needs no auxiliary buffer, so nothing is held).
void InPlaceIndexSets::placeStaged(int recvSet) {
  const size_t j = index(recvSet);
  if (staged_[j] == 0 || stagedFrom_[j] == nullptr) return;
  staged_[j] -= fillFreeRun(j, stagedFrom_[j] + placed_[j] * itemSize_, staged_[j]);  // nothing else is placed
}

// Copies up to `items` from `from` into R_j's free run, right above its
// placed prefix; returns how many fitted.
int64_t InPlaceIndexSets::fillFreeRun(size_t j, const std::byte* from, int64_t items) {
  const int64_t moved = std::min(recvcount_[j] - placed_[j] - occupied_[j], items);
  if (moved <= 0) return 0;
  elements_.copy(from, true, item(rdispl_[j] + placed_[j]), false, moved);
  placed_[j] += moved;
  return moved;
}

void InPlaceIndexSets::requests(std::vector<PhaseCounts>& take, int first, bool phase0,
                                 const std::vector<PhaseCounts>& pending) {
  take.assign(index(size_), PhaseCounts{});
  for (int step = 0; step < size_; ++step) {
    const int j = (first + step) % size_;
    const PhaseCounts before = pending.empty() ? PhaseCounts{} : pending[index(j)];
    const int64_t left = remainingRecv(j) - before.total();
    if (left <= 0 || (phase0 && streamItems_[index(j)] > 0)) continue;
    PhaseCounts& counts = take[index(j)];
    // In place only right above the placed prefix, so only once nothing is
    // held (then the pending update places nothing in the free run).
    if (held(j) == 0 && before.aux == 0) {
      counts.inPlace =
          std::min(left, recvcount_[index(j)] - placed_[index(j)] - before.inPlace - occupied_[index(j)]);
    }
    AuxBuffer& buffer = auxOf(j);
    if (buffer.owner == -1 || buffer.owner == j) {  // a pending claim made it the claimant's
      counts.aux = std::min(left - counts.inPlace, buffer.capacity - buffer.used - before.aux);
      if (counts.aux > 0) buffer.owner = j;
    }
  }
}

void InPlaceIndexSets::claim(const std::vector<PhaseCounts>& take) {
  for (int j = 0; j < size_; ++j) {
    if (take[index(j)].aux > 0) auxOf(j).owner = j;
  }
}

std::byte* InPlaceIndexSets::inPlaceTarget(int peer) const { return item(rdispl_[index(peer)] + placed_[index(peer)]); }

std::byte* InPlaceIndexSets::auxTarget(int peer) const {
  const AuxBuffer& buffer = auxOf(peer);
  return const_cast<std::byte*>(buffer.data.data()) + buffer.used * itemSize_;
}

void InPlaceIndexSets::sendRuns(int peer, int64_t skip, int64_t count, std::vector<ItemRun>& runs) const {
  runs.clear();
  if (copied_[index(peer)]) {  // one run in the copy
    if (count > 0) {
      std::byte* copy = const_cast<std::byte*>(copy_.data());
      runs.push_back({copy + (copyAt_[index(peer)] + sent_[index(peer)] + skip) * itemSize_, count});
    }
    return;
  }
  for (size_t k = firstPiece_[index(peer)]; k < firstPiece_[index(peer) + 1] && count > 0; ++k) {
    const Piece& piece = pieces_[k];
    if (skip >= piece.length) {
      skip -= piece.length;
      continue;
    }
    const int64_t items = std::min(count, piece.length - skip);
    runs.push_back({item(piece.at + skip), items});
    count -= items;
    skip = 0;
  }
}

void InPlaceIndexSets::update(const std::vector<PhaseCounts>& sent, const std::vector<PhaseCounts>& received) {
  for (int i = 0; i < size_; ++i) {
    int64_t drop = sent[index(i)].total();
    sent_[index(i)] += drop;
    for (size_t k = firstPiece_[index(i)]; k < firstPiece_[index(i) + 1] && drop > 0; ++k) {
      const int64_t cut = std::min(drop, pieces_[k].length);
      pieces_[k].at += cut;
      pieces_[k].length -= cut;
      drop -= cut;
    }
  }
  for (int j = 0; j < size_; ++j) {
    placed_[index(j)] += received[index(j)].inPlace;
    if (received[index(j)].aux > 0) auxOf(j).used += received[index(j)].aux;
  }
  for (int j = 0; j < size_; ++j) {
    compact(j);
    place(j);
    placeStaged(j);
  }
}

int64_t InPlaceIndexSets::bytes() const {
  int64_t total = 0;
  for (const AuxBuffer& buffer : aux_) total += static_cast<int64_t>(buffer.data.capacity());
  total += static_cast<int64_t>(copy_.capacity() + streamData_.capacity()) + elements_.bytes();
  total += static_cast<int64_t>((streamItems_.capacity() + streamAt_.capacity()) * sizeof(int64_t));
  total += static_cast<int64_t>(pieces_.capacity() * sizeof(Piece) + firstPiece_.capacity() * sizeof(size_t));
  for (const auto& inside : insideRecv_) total += static_cast<int64_t>(inside.capacity() * sizeof(size_t));
  total += static_cast<int64_t>((sendcount_.size() * 4 + sent_.size() * 5) * sizeof(int64_t));
  return total;
}

}  // namespace ibdt::collectives
