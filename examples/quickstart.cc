// The README's C++ example as a program: every rank sends one column of a
// 128 x 4096 int matrix to the next rank as a derived type, then runs an
// all-to-all as a persistent plan several times, and checks every value it
// received. Run it under any launcher: `ibdt-run -n 4 ibdt-quickstart`,
// `mpirun -n 4 ibdt-quickstart`, `srun --mpi=pmix -n 4 ibdt-quickstart`.
#include <ibdt/collectives.h>
#include <ibdt/fabric.h>
#include <ibdt/messaging.h>
#include <ibdt/store.h>

#include <chrono>
#include <cstdio>
#include <vector>

using namespace ibdt;
using datatype::Datatype;

namespace {

constexpr int kRows = 128, kColumns = 4096, kPerPeer = 1000, kSteps = 5;

int32_t matrixValue(int rank, int row, int column) { return rank * 1000003 + row * kColumns + column; }
int32_t alltoallValue(int step, int from, int to, int i) { return ((step * 31 + from) * 131 + to) * 7919 + i; }

int fail(const char* what, const Status& status) {
  std::fprintf(stderr, "quickstart: %s: %s\n", what, status.toString().c_str());
  return 1;
}

int run() {
  auto store = bootstrap::connectStore();  // ibdt-run, PMIx, PMI-1 or singleton
  if (!store.isOk()) return fail("connectStore", store.status());
  const Deadline deadline = Deadline::after(std::chrono::seconds(60));
  auto domain = fabric::openDomain("auto", {.jobTag = (*store)->jobId()});  // verbs if an RDMA port is up, else shm
  if (!domain.isOk()) return fail("openDomain", domain.status());
  auto options = messaging::optionsFromEnvironment();  // IBDT_MSG_*
  if (!options.isOk()) return fail("options", options.status());
  auto ctx = messaging::Context::create(**domain, **store, *options, deadline);
  if (!ctx.isOk()) return fail("Context::create", ctx.status());
  const int rank = (*ctx)->rank(), size = (*ctx)->size();

  // Point to point: column `rank` of this rank's matrix goes to the next
  // rank, which receives it into the same column of its own matrix.
  std::vector<int32_t> matrix(size_t{kRows} * kColumns), received(matrix.size(), -1);
  for (int row = 0; row < kRows; ++row) {
    for (int column = 0; column < kColumns; ++column) matrix[row * kColumns + column] = matrixValue(rank, row, column);
  }
  auto column = Datatype::vector(kRows, 1, kColumns, Datatype::of<int32_t>());
  if (!column.isOk()) return fail("vector", column.status());
  if (Status s = column->commit(); !s.isOk()) return fail("commit", s);
  const int next = (rank + 1) % size, previous = (rank - 1 + size) % size;
  auto recv = (*ctx)->irecv(received.data() + previous, 1, *column, messaging::kAnySource, /*tag=*/7);
  auto send = (*ctx)->isend(matrix.data() + rank, 1, *column, next, /*tag=*/7);
  if (!recv.isOk() || !send.isOk()) return fail("isend/irecv", recv.isOk() ? send.status() : recv.status());
  if (Status s = (*ctx)->wait(*send, nullptr, deadline); !s.isOk()) return fail("send", s);
  if (Status s = (*ctx)->wait(*recv, nullptr, deadline); !s.isOk()) return fail("receive", s);
  for (int row = 0; row < kRows; ++row) {
    const int32_t got = received[row * kColumns + previous], want = matrixValue(previous, row, previous);
    if (got != want) return std::fprintf(stderr, "quickstart: column row %d: %d, expected %d\n", row, got, want), 1;
  }

  // All-to-all as a persistent plan: checked and compiled once, started many times.
  auto comm = collectives::Communicator::create(**ctx, **store, deadline);
  if (!comm.isOk()) return fail("Communicator::create", comm.status());
  std::vector<int32_t> out(size_t(size) * kPerPeer), in(out.size());
  const Datatype int32 = Datatype::of<int32_t>();
  auto plan = collectives::alltoallInit(**comm, out.data(), kPerPeer, int32, in.data(), kPerPeer, int32);
  if (!plan.isOk()) return fail("alltoallInit", plan.status());
  for (int step = 0; step < kSteps; ++step) {
    for (int to = 0; to < size; ++to) {
      for (int i = 0; i < kPerPeer; ++i) out[to * kPerPeer + i] = alltoallValue(step, rank, to, i);
    }
    if (Status s = plan->start(); !s.isOk()) return fail("start", s);
    if (Status s = plan->wait(deadline); !s.isOk()) return fail("alltoall", s);
    for (int from = 0; from < size; ++from) {
      for (int i = 0; i < kPerPeer; ++i) {
        if (in[from * kPerPeer + i] != alltoallValue(step, from, rank, i)) {
          return std::fprintf(stderr, "quickstart: step %d, block from %d, element %d wrong\n", step, from, i), 1;
        }
      }
    }
  }
  if (Status s = (*ctx)->close(deadline); !s.isOk()) return fail("close", s);
  if (rank == 0) std::printf("quickstart: %d ranks ok (column exchange, %d all-to-alls with %s)\n", size, kSteps,
                             std::string(plan->algorithm()).c_str());
  return 0;
}

}  // namespace

int main() { return run(); }
