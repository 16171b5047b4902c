// The interposition test program's non-blocking and persistent alltoalls
// whose types ibdt takes directly on some ranks only (docs/mpi.md,
// "Non-blocking calls"): rank 0's send type runs backwards (negative
// extent: ibdt cannot lay it out, the bridge stages it through PMPI_Pack),
// the last rank's receive type too, and in place rank 0's type is strided
// (ibdt's in-place alltoallv moves it directly; it used to be staged), while
// every other rank passes MPI_INT. There is no vote in these calls, so a
// rank that handed its call to MPI left the others waiting in ibdt's
// exchange forever (bounded here by the launcher's --timeout). Every
// element and every gap of the receiving buffers is checked.
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "interpose_checks.h"

namespace interpose_test {
namespace {

enum class Layout { kInts, kBackwards, kStrided };

// `total` ints as one rank lays them out: the MPI type of one element, the
// address the call gets, and where element k lives. Strided leaves a gap
// after every element, which must keep its filler.
class Buffer {
 public:
  static constexpr int kFiller = -5;
  Buffer(Layout layout, int total)
      : layout_(layout),
        total_(std::max(total, 1)),
        ints_(static_cast<size_t>(total_) * (layout == Layout::kStrided ? 2 : 1), kFiller) {
    if (layout_ == Layout::kInts) return;
    const MPI_Aint extent = static_cast<MPI_Aint>(sizeof(int)) * (layout_ == Layout::kBackwards ? -1 : 2);
    MPI_Type_create_resized(MPI_INT, 0, extent, &type_);
    MPI_Type_commit(&type_);
  }
  ~Buffer() {
    if (type_ != MPI_INT) MPI_Type_free(&type_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  MPI_Datatype type() const { return type_; }
  void* origin() { return layout_ == Layout::kBackwards ? &ints_.back() : ints_.data(); }
  int& at(int k) {
    const size_t index = static_cast<size_t>(k);
    return layout_ == Layout::kBackwards ? ints_[ints_.size() - 1 - index]
           : layout_ == Layout::kStrided ? ints_[2 * index]
                                         : ints_[index];
  }
  bool gapsKept() const {
    for (size_t i = 1; layout_ == Layout::kStrided && i < ints_.size(); i += 2)
      if (ints_[i] != kFiller) return false;
    return true;
  }

 private:
  Layout layout_;
  int total_;
  std::vector<int> ints_;
  MPI_Datatype type_ = MPI_INT;
};

struct Blocks {  // counts and displacements (elements), blocks in peer order
  std::vector<int> counts, displs;
  int total = 0;
  template <typename Count>
  Blocks(int size, Count count) : counts(size), displs(size) {
    for (int peer = 0; peer < size; ++peer) {
      counts[peer] = count(peer);
      displs[peer] = total;
      total += counts[peer];
    }
  }
};

void fill(Buffer& buffer, const Blocks& blocks, int rank, int salt) {
  for (size_t to = 0; to < blocks.counts.size(); ++to)
    for (int i = 0; i < blocks.counts[to]; ++i)
      buffer.at(blocks.displs[to] + i) = value(rank, static_cast<int>(to), i) + salt;
}

void verify(Buffer& buffer, const Blocks& blocks, int rank, int salt, const std::string& what) {
  for (size_t from = 0; from < blocks.counts.size(); ++from)
    for (int i = 0; i < blocks.counts[from]; ++i)
      check(buffer.at(blocks.displs[from] + i) == value(static_cast<int>(from), rank, i) + salt,
            what + " from " + std::to_string(from));
  check(buffer.gapsKept(), what + ": a gap of the strided type was written");
}

// MPI_Ialltoallv: irregular counts (zeros included), then in place.
void ialltoallvMixed(MPI_Comm comm, int rank, int size) {
  const Blocks out(size, [&](int to) { return (rank * 5 + to * 3) % 4 * 37; });
  const Blocks in(size, [&](int from) { return (from * 5 + rank * 3) % 4 * 37; });
  Buffer send(rank == 0 ? Layout::kBackwards : Layout::kInts, out.total);
  Buffer recv(rank == size - 1 ? Layout::kBackwards : Layout::kInts, in.total);
  fill(send, out, rank, 11);
  MPI_Request request;
  check(MPI_Ialltoallv(send.origin(), out.counts.data(), out.displs.data(), send.type(), recv.origin(),
                       in.counts.data(), in.displs.data(), recv.type(), comm, &request) == MPI_SUCCESS,
        "mixed ialltoallv rc");
  check(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS, "mixed ialltoallv wait rc");
  verify(recv, in, rank, 11, "mixed ialltoallv");

  const Blocks both(size, [&](int peer) { return (rank + peer) % 3 * 5 + 1; });  // symmetric
  Buffer buffer(rank == 0 ? Layout::kStrided : Layout::kInts, both.total);
  fill(buffer, both, rank, 12);
  check(MPI_Ialltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, buffer.origin(), both.counts.data(),
                       both.displs.data(), buffer.type(), comm, &request) == MPI_SUCCESS,
        "mixed in-place ialltoallv rc");
  check(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS, "mixed in-place ialltoallv wait rc");
  verify(buffer, both, rank, 12, "mixed in-place ialltoallv");
}

// MPI_Ialltoall (`persistent`: MPI_Alltoall_init, started twice), then
// (`inPlace`) in place with rank 0's backwards type.
void ialltoallMixed(MPI_Comm comm, int rank, int size, bool persistent, bool inPlace) {
  const int n = 5;
  const Blocks blocks(size, [](int) { return n; });
  Buffer send(rank == 0 ? Layout::kBackwards : Layout::kInts, blocks.total);
  Buffer recv(rank == size - 1 ? Layout::kBackwards : Layout::kInts, blocks.total);
  const std::string what = persistent ? "mixed persistent alltoall" : "mixed ialltoall";
  MPI_Request request;
  if (persistent) {
    check(PERSISTENT_INIT(Alltoall)(send.origin(), n, send.type(), recv.origin(), n, recv.type(), comm, MPI_INFO_NULL,
                                    &request) == MPI_SUCCESS,
          what + " init rc");
  }
  for (int run = 0; run < (persistent ? 2 : 1); ++run) {
    fill(send, blocks, rank, 13 + run);
    if (persistent) {
      check(MPI_Start(&request) == MPI_SUCCESS, what + " start rc");
    } else {
      check(MPI_Ialltoall(send.origin(), n, send.type(), recv.origin(), n, recv.type(), comm, &request) == MPI_SUCCESS,
            what + " rc");
    }
    check(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS, what + " wait rc");
    verify(recv, blocks, rank, 13 + run, what);
  }
  if (persistent) check(MPI_Request_free(&request) == MPI_SUCCESS, what + " free rc");
  if (!inPlace) return;
  Buffer buffer(rank == 0 ? Layout::kBackwards : Layout::kInts, blocks.total);
  fill(buffer, blocks, rank, 15);
  check(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.origin(), n, buffer.type(), comm, &request) ==
            MPI_SUCCESS,
        "mixed in-place ialltoall rc");
  check(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS, "mixed in-place ialltoall wait rc");
  verify(buffer, blocks, rank, 15, "mixed in-place ialltoall");
}

}  // namespace

void mixedTypes(MPI_Comm comm, bool bridged) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ialltoallvMixed(comm, rank, size);
  // Open MPI 4.1's own in-place MPI_Ialltoall fails (MPI_ERR_INTERN) on a
  // negative-extent type: run that case through the bridge only.
  ialltoallMixed(comm, rank, size, false, bridged);
  ialltoallMixed(comm, rank, size, true, false);
}

}  // namespace interpose_test
