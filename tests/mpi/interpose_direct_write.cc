// tests/mpi/interpose_direct_write.cc — the blocking MPI_Alltoall on blocks
// large enough that ibdt's choice is direct-write (64 KiB per pair), whose
// plans every rank builds together once per block size and then runs with
// no agreement per call (mpi/direct_write_call.h): each rank changes its
// buffers and its types' layouts on a schedule of its own (dense ints, a
// contiguous type of the whole block, strided types with gaps, a type
// going backwards), some ranks repeating their previous call's arguments
// exactly while others change theirs, across two block sizes. After every
// call the whole receive buffer, gaps included, must equal what the MPI
// library's own PMPI_Alltoall writes for the same arguments.
#include <cstring>
#include <string>
#include <vector>

#include "interpose_checks.h"

namespace interpose_test {
namespace {

enum Layout { kInts, kWholeBlock, kStrided, kBackwards, kLayouts };

// The MPI arguments of one side: `n` ints per pair laid out as `layout`.
struct Side {
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int spanInts = 0;  // ints of buffer the p blocks occupy
  int offsetInts = 0;  // where the buffer argument points (backwards: the last int)
};

struct Types {
  MPI_Datatype whole = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL, backwards = MPI_DATATYPE_NULL;
  Types(int n) {
    MPI_Type_contiguous(n, MPI_INT, &whole);
    MPI_Type_commit(&whole);
    MPI_Datatype everyOther;
    MPI_Type_vector(n, 1, 2, MPI_INT, &everyOther);  // one int, one gap
    MPI_Type_create_resized(everyOther, 0, static_cast<MPI_Aint>(2 * n * sizeof(int)), &strided);
    MPI_Type_commit(&strided);
    MPI_Type_free(&everyOther);
    MPI_Type_create_resized(MPI_INT, 0, -static_cast<MPI_Aint>(sizeof(int)), &backwards);
    MPI_Type_commit(&backwards);
  }
  ~Types() {
    MPI_Type_free(&whole);
    MPI_Type_free(&strided);
    MPI_Type_free(&backwards);
  }
  Side side(Layout layout, int n, int p) const {
    switch (layout) {
      case kWholeBlock: return {1, whole, n * p, 0};
      case kStrided: return {1, strided, 2 * n * p, 0};
      case kBackwards: return {n, backwards, n * p, n * p - 1};
      default: return {n, MPI_INT, n * p, 0};
    }
  }
};

// One call on this rank's choice of buffers and layouts, checked against PMPI_Alltoall.
void oneCall(MPI_Comm comm, const Types& types, int n, int call, Layout sendLayout, Layout recvLayout,
             std::vector<int>& send, std::vector<int>& recv) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const Side s = types.side(sendLayout, n, size), r = types.side(recvLayout, n, size);
  send.resize(static_cast<size_t>(s.spanInts));
  recv.resize(static_cast<size_t>(r.spanInts));
  for (int i = 0; i < s.spanInts; ++i) send[static_cast<size_t>(i)] = value(rank, i % size, i) + call;
  std::vector<int> reference(recv.size(), -7);
  std::fill(recv.begin(), recv.end(), -7);
  const std::string what = "direct-write call " + std::to_string(call) + " (" + std::to_string(n) +
                           " ints, send layout " + std::to_string(sendLayout) + ", receive layout " +
                           std::to_string(recvLayout) + ")";
  check(PMPI_Alltoall(send.data() + s.offsetInts, s.count, s.type, reference.data() + r.offsetInts, r.count, r.type,
                      comm) == MPI_SUCCESS,
        what + ": PMPI_Alltoall rc");
  check(MPI_Alltoall(send.data() + s.offsetInts, s.count, s.type, recv.data() + r.offsetInts, r.count, r.type,
                     comm) == MPI_SUCCESS,
        what + ": rc");
  check(std::memcmp(recv.data(), reference.data(), recv.size() * sizeof(int)) == 0,
        what + ": the receive buffer differs from PMPI_Alltoall's");
}

}  // namespace

void directWriteAlltoall(MPI_Comm comm) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  for (int n : {16384, 20000}) {  // 64 KiB and 80000 B per pair: two plans
    Types types(n);
    std::vector<int> send[2], recv[2];
    for (int call = 0; call < 12; ++call) {
      // Rank r changes its arguments every r + 1 calls: in most calls some
      // ranks repeat theirs exactly while others move buffers or layouts.
      const int step = call / (rank + 1);
      const auto sendLayout = static_cast<Layout>((step + rank) % kLayouts);
      const auto recvLayout = static_cast<Layout>((step / 2 + rank) % kLayouts);
      const int set = step % 2;
      oneCall(comm, types, n, call, sendLayout, recvLayout, send[set], recv[set]);
    }
  }
}

}  // namespace interpose_test
