// Repeated MPI_Ialltoall + MPI_Wait with the same arguments, the bridge
// preloaded: after warm-up the calls must allocate no more than the same
// number of blocking MPI_Alltoall calls on the bridge's cached plan plus
// MPI's own generalized requests (MPI_Grequest_start allocates in Open MPI)
// do — i.e. the non-blocking path reuses the plan it built (docs/mpi.md,
// "Non-blocking calls") — give or take the messages that arrive before
// their receive is posted: messaging keeps each such message (a few
// allocations), in either path, as often as the timing makes it happen.
// Before the plans were reused, each call allocated ~29 times at 2 ranks.
// The same for MPI_Ialltoallv against the blocking MPI_Alltoallv, and for a
// staged MPI_Ialltoall (its send type runs backwards) against the blocking
// MPI_Alltoall plus MPI's own PMPI_Pack of its blocks; before their plans
// were kept (mpi/tagged_plans.h) both built one per call. Every received byte is checked on every call, with
// values that change per call, and between the steady-state rounds the
// arguments change (another receive buffer, another count) to show the
// reused plans follow them.
//
// Allocations are counted by this program's own malloc family (it wraps
// glibc's __libc_* functions), on the main thread only: MPI's progress
// threads (PMIx) allocate at their own pace.
#include <mpi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* ptr, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* ptr);
}

namespace {

thread_local bool countingThread = false;  // set on the main thread around the counted calls
unsigned long allocations = 0;

void counted() {
  if (countingThread) ++allocations;
}

}  // namespace

extern "C" {
void* malloc(size_t size) {
  counted();
  return __libc_malloc(size);
}
void* calloc(size_t count, size_t size) {
  counted();
  return __libc_calloc(count, size);
}
void* realloc(void* ptr, size_t size) {
  counted();
  return __libc_realloc(ptr, size);
}
void* memalign(size_t alignment, size_t size) {
  counted();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  counted();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  counted();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* ptr) { __libc_free(ptr); }
}

namespace {

int rank = 0, size = 1, failures = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  if (++failures <= 10) std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
}

unsigned char byteOf(int from, int to, int i, int call) {
  return static_cast<unsigned char>(from * 131 + to * 37 + i * 7 + call * 11);
}

// kStaged: MPI_Ialltoall whose send type runs backwards (a negative
// extent: no ibdt layout, so the bridge stages it through PMPI_Pack).
enum Way { kNonblocking, kBlocking, kNonblockingV, kBlockingV, kStaged };

// Block j, byte i of a send buffer of `n` bytes in `way`'s layout: the
// staged call's type walks the buffer backwards from its last byte.
size_t sendIndex(Way way, size_t n, int to, int i, int bytes) {
  const size_t dense = static_cast<size_t>(to) * bytes + i;
  return way == kStaged ? n - 1 - dense : dense;
}

// One byte, its extent -1: a block of `count` runs backwards.
MPI_Datatype backwardsByte() {
  static MPI_Datatype type = [] {
    MPI_Datatype t;
    MPI_Type_create_resized(MPI_BYTE, 0, -1, &t);
    MPI_Type_commit(&t);
    return t;
  }();
  return type;
}

// The alltoallv calls' counts and displacements (every block `bytes`),
// filled before the counted calls.
std::vector<int> vcounts, vdispls;

void fillCounts(int bytes) {
  vcounts.assign(static_cast<size_t>(size), bytes);
  vdispls.clear();
  for (int j = 0; j < size; ++j) vdispls.push_back(j * bytes);
}

void start(Way way, std::vector<unsigned char>& send, std::vector<unsigned char>& recv, int bytes) {
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  switch (way) {
    case kBlocking:
      check(MPI_Alltoall(send.data(), bytes, MPI_BYTE, recv.data(), bytes, MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS,
            "MPI_Alltoall rc");
      return;
    case kBlockingV:
      check(MPI_Alltoallv(send.data(), vcounts.data(), vdispls.data(), MPI_BYTE, recv.data(), vcounts.data(),
                          vdispls.data(), MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS,
            "MPI_Alltoallv rc");
      return;
    case kNonblocking:
      rc = MPI_Ialltoall(send.data(), bytes, MPI_BYTE, recv.data(), bytes, MPI_BYTE, MPI_COMM_WORLD, &request);
      break;
    case kNonblockingV:
      rc = MPI_Ialltoallv(send.data(), vcounts.data(), vdispls.data(), MPI_BYTE, recv.data(), vcounts.data(),
                          vdispls.data(), MPI_BYTE, MPI_COMM_WORLD, &request);
      break;
    case kStaged:
      rc = MPI_Ialltoall(send.data() + send.size() - 1, bytes, backwardsByte(), recv.data(), bytes, MPI_BYTE,
                         MPI_COMM_WORLD, &request);
      break;
  }
  check(rc == MPI_SUCCESS, "non-blocking call rc (way " + std::to_string(way) + ")");
  check(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS && request == MPI_REQUEST_NULL, "MPI_Wait");
}

// `calls` alltoalls of `bytes` per pair from `send` into `recv`, each
// checked whole; returns the allocations of this thread during the calls
// alone (filling and checking the buffers allocate nothing).
unsigned long run(Way way, std::vector<unsigned char>& send, std::vector<unsigned char>& recv, int bytes, int calls,
                  int& call) {
  unsigned long counted = 0;
  for (int c = 0; c < calls; ++c, ++call) {
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < bytes; ++i) send[sendIndex(way, send.size(), to, i, bytes)] = byteOf(rank, to, i, call);
    std::memset(recv.data(), 0xee, recv.size());
    const unsigned long before = allocations;
    countingThread = true;
    start(way, send, recv, bytes);
    countingThread = false;
    counted += allocations - before;
    int wrong = 0;
    for (int from = 0; from < size; ++from)
      for (int i = 0; i < bytes; ++i)
        wrong += recv[static_cast<size_t>(from) * bytes + i] != byteOf(from, rank, i, call);
    for (size_t i = static_cast<size_t>(size) * bytes; i < recv.size(); ++i) wrong += recv[i] != 0xee;
    check(wrong == 0, std::to_string(wrong) + " bytes wrong in call " + std::to_string(call) + " of " +
                          std::to_string(bytes) + " B per pair (way " + std::to_string(way) + ")");
  }
  return counted;
}

int queryNothing(void*, MPI_Status* status) {
  MPI_Status_set_elements(status, MPI_BYTE, 0);
  MPI_Status_set_cancelled(status, 0);
  return MPI_SUCCESS;
}
int freeNothing(void*) { return MPI_SUCCESS; }
int cancelNothing(void*, int) { return MPI_SUCCESS; }

// What `calls` generalized requests cost MPI itself (the bridge's
// MPI_Ialltoall returns one per call).
unsigned long grequestAllocations(int calls) {
  const unsigned long before = allocations;
  countingThread = true;
  for (int c = 0; c < calls; ++c) {
    MPI_Request request;
    PMPI_Grequest_start(queryNothing, freeNothing, cancelNothing, nullptr, &request);
    PMPI_Grequest_complete(request);
    PMPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  countingThread = false;
  return allocations - before;
}

// What the staged call's packing costs MPI itself: `calls` calls of `size`
// PMPI_Pack (one per block, as the bridge packs a staged side).
unsigned long packAllocations(std::vector<unsigned char>& send, int bytes, int calls) {
  std::vector<unsigned char> packed(static_cast<size_t>(bytes));
  const unsigned long before = allocations;
  countingThread = true;
  for (int c = 0; c < calls; ++c) {
    for (int j = 0; j < size; ++j) {
      int position = 0;
      PMPI_Pack(send.data() + send.size() - 1 - static_cast<size_t>(j) * bytes, bytes, backwardsByte(),
                packed.data(), bytes, &position, MPI_COMM_WORLD);
    }
  }
  countingThread = false;
  return allocations - before;
}

}  // namespace

int main(int argc, char** argv) {
  // Both paths on one algorithm: the blocking call would otherwise take a
  // direct-write plan for large blocks (built by every rank together, after
  // a vote), which the non-blocking call cannot (docs/mpi.md).
  setenv("IBDT_ALLTOALL_ALGORITHM", "pairwise", 1);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const bool report = argc > 1 && !std::strcmp(argv[1], "--report");  // print the counts (rank 0)
  // Warm-up: more calls than the bridge's reserved tags (13), one plan each.
  const int kWarmup = 20, kCalls = 40;
  const unsigned long kAllocationsPerEarlyMessage = 4;
  int call = 0;
  // 8 B (eager) and 64 KiB (rendezvous) per pair; the receive buffer then
  // moves and the count changes, so both the caches' keys and their reuse
  // are exercised. The slack after each receive area must stay untouched.
  std::vector<unsigned char> send, recvA, recvB;
  int round = 0;
  for (int bytes : {8, 65536, 65536, 4000}) {
    send.assign(static_cast<size_t>(bytes) * size, 0);
    std::vector<unsigned char>& recv = round++ % 2 == 0 ? recvA : recvB;
    recv.assign(static_cast<size_t>(bytes) * size + 64, 0);
    fillCounts(bytes);
    for (Way way : {kNonblocking, kBlocking, kNonblockingV, kBlockingV, kStaged})
      run(way, send, recv, bytes, kWarmup, call);
    const unsigned long grequests = grequestAllocations(kCalls);
    const unsigned long packs = packAllocations(send, bytes, kCalls);
    const unsigned long blocking = run(kBlocking, send, recv, bytes, kCalls, call);
    const unsigned long nonblocking = run(kNonblocking, send, recv, bytes, kCalls, call);
    const unsigned long blockingV = run(kBlockingV, send, recv, bytes, kCalls, call);
    const unsigned long nonblockingV = run(kNonblockingV, send, recv, bytes, kCalls, call);
    const unsigned long staged = run(kStaged, send, recv, bytes, kCalls, call);
    if (report && rank == 0)
      std::printf("%6d B: %d calls allocate: MPI_Ialltoall+MPI_Wait %lu, MPI_Alltoall %lu, "
                  "MPI_Ialltoallv+MPI_Wait %lu, MPI_Alltoallv %lu, staged MPI_Ialltoall+MPI_Wait %lu, "
                  "generalized requests %lu, PMPI_Pack %lu\n",
                  bytes, kCalls, nonblocking, blocking, nonblockingV, blockingV, staged, grequests, packs);
    const unsigned long unexpectedArrivals = kAllocationsPerEarlyMessage * kCalls * static_cast<unsigned long>(size - 1);
    auto within = [&](const char* what, unsigned long counted, const char* against, unsigned long bound) {
      check(counted <= bound + grequests + unexpectedArrivals,
            std::to_string(kCalls) + " " + what + " of " + std::to_string(bytes) + " B allocated " +
                std::to_string(counted) + " times, " + against + " " + std::to_string(bound) +
                " and MPI's generalized requests " + std::to_string(grequests) + " (early messages allowed for: " +
                std::to_string(unexpectedArrivals) + ")");
    };
    within("MPI_Ialltoall+MPI_Wait", nonblocking, "the blocking calls", blocking);
    within("MPI_Ialltoallv+MPI_Wait", nonblockingV, "the blocking MPI_Alltoallv", blockingV);
    within("staged MPI_Ialltoall+MPI_Wait", staged, "the blocking MPI_Alltoall and MPI's PMPI_Pack", blocking + packs);
  }
  int failed = 0;
  MPI_Allreduce(&failures, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("ialltoall steady state: %d failure(s) across ranks\n", failed);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
