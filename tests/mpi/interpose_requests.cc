// The interposition test program's non-blocking and persistent cases
// (MPI_Ialltoall, MPI_Ialltoallv, MPI_Alltoall(v)_init / MPIX_Alltoall(v)_init),
// every byte checked; see alltoall_interpose_program.cc.
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <string>
#include <vector>

#include "interpose_checks.h"

namespace interpose_test {
namespace {

// The persistent alltoall (MPI 4's MPI_Alltoall_init; Open MPI 4.1 names
// it MPIX_Alltoall_init): two plans, one in place, each run three times
// with new values (MPI_Start + MPI_Wait, then MPI_Startall + MPI_Waitall,
// then MPI_Startall + an MPI_Testany loop), then freed.
int persistentInit(const void* send, int n, void* recv, MPI_Comm comm, MPI_Request* request) {
  return PERSISTENT_INIT(Alltoall)(send, n, MPI_INT, recv, n, MPI_INT, comm, MPI_INFO_NULL, request);
}

// Runs two persistent requests once: each by MPI_Start + MPI_Wait, or both
// by MPI_Startall and then MPI_Waitall or an MPI_Testany loop.
enum HowToRun { kStartWait, kStartallWaitall, kStartallTestany };
void runBoth(MPI_Request (&requests)[2], HowToRun how) {
  if (how == kStartWait) {
    for (MPI_Request& r : requests) {
      check(MPI_Start(&r) == MPI_SUCCESS, "start rc");
      check(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait rc");
    }
    return;
  }
  check(MPI_Startall(2, requests) == MPI_SUCCESS, "startall rc");
  if (how == kStartallWaitall) {
    check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall rc");
    return;
  }
  bool done[2] = {false, false};
  int index = 0, flag = 0;
  while (!(done[0] && done[1])) {
    MPI_Testany(2, requests, &index, &flag, MPI_STATUS_IGNORE);
    if (flag && index != MPI_UNDEFINED) done[index] = true;
    sched_yield();
  }
}

}  // namespace

void persistentAlltoall(MPI_Comm comm, bool testanyLoop) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = 700;
  std::vector<int> send(static_cast<size_t>(n) * size), recv(send.size()), both(send.size());
  MPI_Request requests[2];
  check(persistentInit(send.data(), n, recv.data(), comm, &requests[0]) == MPI_SUCCESS, "alltoall_init rc");
  check(persistentInit(MPI_IN_PLACE, n, both.data(), comm, &requests[1]) == MPI_SUCCESS, "in-place init rc");
  for (int run = 0; run < 3; ++run) {
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < n; ++i) {
        send[static_cast<size_t>(to) * n + i] = value(rank, to, i) + run;
        both[static_cast<size_t>(to) * n + i] = value(rank, to, i) - run;
      }
    std::fill(recv.begin(), recv.end(), -1);
    runBoth(requests, run == 0 ? kStartWait : run == 1 || !testanyLoop ? kStartallWaitall : kStartallTestany);
    for (int from = 0; from < size; ++from)
      for (int i = 0; i < n; ++i) {
        check(recv[static_cast<size_t>(from) * n + i] == value(from, rank, i) + run,
              "persistent run " + std::to_string(run) + " from " + std::to_string(from));
        check(both[static_cast<size_t>(from) * n + i] == value(from, rank, i) - run,
              "persistent in place run " + std::to_string(run) + " from " + std::to_string(from));
      }
  }
  for (MPI_Request& r : requests) check(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL, "free");
}

namespace {

int persistentInitV(const void* send, const int* sc, const int* sd, void* recv, const int* rc, const int* rd,
                    MPI_Comm comm, MPI_Request* request) {
  return PERSISTENT_INIT(Alltoallv)(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm, MPI_INFO_NULL, request);
}

// Counts and displacements: irregular (zeros included), blocks in reverse
// peer order with a one-int gap after each; `symmetric` for MPI_IN_PLACE.
struct Layout {
  std::vector<int> sc, sd, rc, rd;
  int sendInts = 0, recvInts = 0;
  Layout(int rank, int size, bool symmetric) : sc(size), sd(size), rc(size), rd(size) {
    auto ints = [&](int from, int to) { return symmetric ? (from + to) % 3 * 5 + 1 : (from * 5 + to * 3) % 4 * 37; };
    for (int peer = size - 1; peer >= 0; --peer) {
      sc[peer] = ints(rank, peer);
      sd[peer] = sendInts;
      sendInts += sc[peer] + 1;
      rc[peer] = ints(peer, rank);
      rd[peer] = symmetric ? sd[peer] : recvInts;
      recvInts += rc[peer] + 1;
    }
  }
};

}  // namespace

// The persistent alltoallv (MPI 4's MPI_Alltoallv_init, Open MPI 4.1's
// MPIX_Alltoallv_init): one plan and one in place, each started four times
// with new values (MPI_Start + MPI_Wait, then MPI_Startall + MPI_Waitall);
// after every run both buffers, gaps included, equal what the MPI library's
// own PMPI_Alltoallv makes of the same input, and the values their senders
// meant.
void persistentAlltoallv(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const Layout v(rank, size, false), w(rank, size, true);
  std::vector<int> send(static_cast<size_t>(v.sendInts)), recv(static_cast<size_t>(v.recvInts)), both(w.sendInts);
  MPI_Request requests[2];
  check(persistentInitV(send.data(), v.sc.data(), v.sd.data(), recv.data(), v.rc.data(), v.rd.data(), comm,
                        &requests[0]) == MPI_SUCCESS,
        "alltoallv_init rc");
  check(persistentInitV(MPI_IN_PLACE, nullptr, nullptr, both.data(), w.rc.data(), w.rd.data(), comm,
                        &requests[1]) == MPI_SUCCESS,
        "in-place alltoallv_init rc");
  for (int run = 0; run < 4; ++run) {
    std::fill(send.begin(), send.end(), -3);
    std::fill(both.begin(), both.end(), -4);
    for (int to = 0; to < size; ++to) {
      for (int i = 0; i < v.sc[to]; ++i) send[v.sd[to] + i] = value(rank, to, i) * 3 + run;
      for (int i = 0; i < w.sc[to]; ++i) both[w.sd[to] + i] = value(rank, to, i) - run;
    }
    std::vector<int> expectRecv(recv.size(), -1), expectBoth = both;
    PMPI_Alltoallv(send.data(), v.sc.data(), v.sd.data(), MPI_INT, expectRecv.data(), v.rc.data(), v.rd.data(),
                   MPI_INT, comm);
    PMPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_INT, expectBoth.data(), w.rc.data(), w.rd.data(), MPI_INT,
                   comm);
    std::fill(recv.begin(), recv.end(), -1);
    runBoth(requests, run == 0 ? kStartWait : kStartallWaitall);
    const std::string at = " run " + std::to_string(run);
    check(recv == expectRecv, "persistent alltoallv differs from PMPI_Alltoallv's" + at);
    check(both == expectBoth, "persistent in-place alltoallv differs from PMPI_Alltoallv's" + at);
    for (int from = 0; from < size; ++from) {
      for (int i = 0; i < v.rc[from]; ++i)
        check(recv[v.rd[from] + i] == value(from, rank, i) * 3 + run, "persistent alltoallv from " + std::to_string(from) + at);
      for (int i = 0; i < w.rc[from]; ++i)
        check(both[w.rd[from] + i] == value(from, rank, i) - run, "persistent in place from " + std::to_string(from) + at);
    }
  }
  for (MPI_Request& r : requests) check(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL, "free v");
}

namespace {

// MPI_Ialltoallv, four in flight (irregular counts, zeros included; in the
// third rank 0 sends 280 KiB to every peer, more than a mailbox row holds,
// so every rank runs it by messages; the fourth in place), by MPI_Waitall.
void ialltoallv(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  auto ints = [](int from, int to, int k) { return k == 2 && from == 0 ? 70000 : (from * 3 + to + k) % 5 * 40; };
  constexpr int kOutOfPlace = 3;
  std::vector<std::vector<int>> sc(kOutOfPlace, std::vector<int>(size)), sd = sc, rc = sc, rd = sc;
  std::vector<std::vector<int>> send(kOutOfPlace), recv(kOutOfPlace);
  MPI_Request requests[kOutOfPlace + 1];
  // The last call in flight is in place; its expected result is what the
  // MPI library's own PMPI_Alltoallv makes of the same buffer.
  const Layout w(rank, size, true);
  std::vector<int> both(static_cast<size_t>(w.sendInts), -4);
  for (int to = 0; to < size; ++to)
    for (int i = 0; i < w.sc[to]; ++i) both[w.sd[to] + i] = value(rank, to, i) + 7;
  std::vector<int> expectBoth = both;
  PMPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_INT, expectBoth.data(), w.rc.data(), w.rd.data(), MPI_INT,
                 comm);
  for (int k = 0; k < kOutOfPlace; ++k) {
    int sendTotal = 0, recvTotal = 0;
    for (int peer = 0; peer < size; ++peer) {
      sc[k][peer] = ints(rank, peer, k);
      sd[k][peer] = sendTotal;
      sendTotal += sc[k][peer];
      rc[k][peer] = ints(peer, rank, k);
      rd[k][peer] = recvTotal;
      recvTotal += rc[k][peer];
    }
    send[k].resize(static_cast<size_t>(sendTotal));
    recv[k].assign(static_cast<size_t>(recvTotal), -1);
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < sc[k][to]; ++i) send[k][sd[k][to] + i] = value(rank, to, i) + k;
    check(MPI_Ialltoallv(send[k].data(), sc[k].data(), sd[k].data(), MPI_INT, recv[k].data(), rc[k].data(),
                         rd[k].data(), MPI_INT, comm, &requests[k]) == MPI_SUCCESS,
          "ialltoallv rc");
  }
  check(MPI_Ialltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, both.data(), w.rc.data(), w.rd.data(),
                       MPI_INT, comm, &requests[kOutOfPlace]) == MPI_SUCCESS,
        "in-place ialltoallv rc");
  check(MPI_Waitall(kOutOfPlace + 1, requests, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "ialltoallv waitall rc");
  check(both == expectBoth, "in-place ialltoallv differs from PMPI_Alltoallv's");
  for (int from = 0; from < size; ++from)
    for (int i = 0; i < w.rc[from]; ++i)
      check(both[w.rd[from] + i] == value(from, rank, i) + 7, "in-place ialltoallv from " + std::to_string(from));
  for (int k = 0; k < kOutOfPlace; ++k)
    for (int from = 0; from < size; ++from)
      for (int i = 0; i < rc[k][from]; ++i)
        check(recv[k][rd[k][from] + i] == value(from, rank, i) + k, "ialltoallv from " + std::to_string(from));
}

}  // namespace

// MPI_Ialltoall completed by each member of the wait and test families:
// three calls in flight at once (sizes from eager to rendezvous, one in
// place) with a point-to-point ring exchange mixed into the same request
// array, completed by MPI_Waitall, MPI_Wait, MPI_Waitany, MPI_Waitsome or a
// loop of MPI_Test / MPI_Testall / MPI_Testany / MPI_Testsome.
void ialltoall(MPI_Comm comm, int how) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int sizes[3] = {2, 300, 9000};
  std::vector<std::vector<int>> send(3), recv(3);
  std::vector<MPI_Request> requests(5, MPI_REQUEST_NULL);
  for (int k = 0; k < 3; ++k) {
    const int n = sizes[k];
    send[k].resize(static_cast<size_t>(n) * size);
    recv[k].assign(send[k].size(), -1);
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < n; ++i) send[k][static_cast<size_t>(to) * n + i] = value(rank, to, i) + k + how;
    const bool inPlace = k == 1;
    if (inPlace) recv[k] = send[k];
    check(MPI_Ialltoall(inPlace ? MPI_IN_PLACE : send[k].data(), n, MPI_INT, recv[k].data(), n, MPI_INT, comm,
                        &requests[static_cast<size_t>(k)]) == MPI_SUCCESS,
          "ialltoall rc");
  }
  int ringIn = -1, ringOut = rank;
  MPI_Irecv(&ringIn, 1, MPI_INT, (rank + size - 1) % size, 77, comm, &requests[3]);
  MPI_Isend(&ringOut, 1, MPI_INT, (rank + 1) % size, 77, comm, &requests[4]);
  auto allNull = [&] {
    for (MPI_Request r : requests)
      if (r != MPI_REQUEST_NULL) return false;
    return true;
  };
  int flag = 0, index = 0, outcount = 0;
  std::vector<int> indices(requests.size());
  switch (how % 5) {
    case 0: check(MPI_Waitall(5, requests.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall rc"); break;
    case 1:
      for (MPI_Request& r : requests) check(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait rc");
      break;
    case 2:
      while (!allNull()) check(MPI_Waitany(5, requests.data(), &index, MPI_STATUS_IGNORE) == MPI_SUCCESS, "waitany");
      break;
    case 3:
      while (!allNull())
        check(MPI_Waitsome(5, requests.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS,
              "waitsome");
      break;
    default:  // the test forms, in turn, until everything completed
      for (int spin = 0; !allNull(); ++spin) {
        if (spin % 4 == 0) MPI_Test(&requests[static_cast<size_t>(spin / 4 % 5)], &flag, MPI_STATUS_IGNORE);
        if (spin % 4 == 1) MPI_Testall(5, requests.data(), &flag, MPI_STATUSES_IGNORE);
        if (spin % 4 == 2) MPI_Testany(5, requests.data(), &index, &flag, MPI_STATUS_IGNORE);
        if (spin % 4 == 3) MPI_Testsome(5, requests.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE);
        sched_yield();  // the ranks oversubscribe the cores
      }
  }
  check(allNull(), "requests left after completion");
  if (how == 0) ialltoallv(comm);
  check(ringIn == (rank + size - 1) % size, "ring message mixed with the ialltoalls");
  for (int k = 0; k < 3; ++k)
    for (int from = 0; from < size; ++from)
      for (int i = 0; i < sizes[k]; ++i)
        check(recv[k][static_cast<size_t>(from) * sizes[k] + i] == value(from, rank, i) + k + how,
              "ialltoall " + std::to_string(k) + " way " + std::to_string(how) + " from " + std::to_string(from));
}

// An MPI_Waitall of an ibdt MPI_Ialltoall and a point-to-point MPI_Irecv
// whose sender needs the waiting rank's MPI progress: in each pair of ranks
// the even one waits on both; the odd one first sends a rendezvous-sized
// message by a blocking MPI_Send (done only once the even rank's MPI matched
// it) and only then progresses its side of the alltoall (64 KiB per pair, so
// the even rank's alltoall cannot finish without it). A wait that drove
// ibdt alone until its run completed would never return.
void ialltoallBesidePeerSend(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = 16384, big = 1 << 20;  // ints: 64 KiB per pair; a 4 MiB message
  std::vector<int> send(static_cast<size_t>(n) * size), recv(send.size(), -1), message(big, -1);
  for (int to = 0; to < size; ++to)
    for (int i = 0; i < n; ++i) send[static_cast<size_t>(to) * n + i] = value(rank, to, i) + 5;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  check(MPI_Ialltoall(send.data(), n, MPI_INT, recv.data(), n, MPI_INT, comm, &requests[0]) == MPI_SUCCESS,
        "ialltoall beside a send rc");
  const bool paired = (rank ^ 1) < size;
  if (paired && rank % 2 == 0) {
    MPI_Irecv(message.data(), big, MPI_INT, rank + 1, 78, comm, &requests[1]);
    check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "waitall beside a send rc");
    for (int i = 0; i < big; ++i) check(message[static_cast<size_t>(i)] == value(rank + 1, rank, i), "the big message");
  } else {
    if (paired) {
      for (int i = 0; i < big; ++i) message[static_cast<size_t>(i)] = value(rank, rank - 1, i);
      check(MPI_Send(message.data(), big, MPI_INT, rank - 1, 78, comm) == MPI_SUCCESS, "send rc");
    }
    check(MPI_Wait(&requests[0], MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait beside a send rc");
  }
  for (int from = 0; from < size; ++from)
    for (int i = 0; i < n; ++i)
      check(recv[static_cast<size_t>(from) * n + i] == value(from, rank, i) + 5,
            "ialltoall beside a send from " + std::to_string(from));
}

}  // namespace interpose_test

namespace interpose_test {

// MPI_Request_get_status polled until the alltoall completes, on an
// MPI_Ialltoall and on a started persistent alltoall: the bridge must
// progress its runs there too (else the loop never ends), and the request
// stays for the wait to free (non-blocking) or to deactivate (persistent);
// an inactive persistent request reads as complete.
void requestGetStatus(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = 3000;
  std::vector<int> send(static_cast<size_t>(n) * size), recv(send.size());
  auto fill = [&](int salt) {
    for (int to = 0; to < size; ++to)
      for (int i = 0; i < n; ++i) send[static_cast<size_t>(to) * n + i] = value(rank, to, i) + salt;
    std::fill(recv.begin(), recv.end(), -1);
  };
  auto pollUntilComplete = [](MPI_Request request, const char* what) {
    int flag = 0;
    while (!flag) {
      check(MPI_Request_get_status(request, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS, what);
      if (!flag) sched_yield();
    }
  };
  auto received = [&](int salt, const std::string& what) {
    int wrong = 0;
    for (int from = 0; from < size; ++from)
      for (int i = 0; i < n; ++i) wrong += recv[static_cast<size_t>(from) * n + i] != value(from, rank, i) + salt;
    check(wrong == 0, what + ": " + std::to_string(wrong) + " ints wrong");
  };
  MPI_Request request = MPI_REQUEST_NULL;
  fill(5);
  check(MPI_Ialltoall(send.data(), n, MPI_INT, recv.data(), n, MPI_INT, comm, &request) == MPI_SUCCESS,
        "get_status ialltoall rc");
  pollUntilComplete(request, "get_status of an ialltoall");
  check(request != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
  check(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS && request == MPI_REQUEST_NULL, "wait after get_status");
  received(5, "ialltoall completed through MPI_Request_get_status");

  check(persistentInit(send.data(), n, recv.data(), comm, &request) == MPI_SUCCESS, "get_status init rc");
  for (int run = 0; run < 2; ++run) {
    fill(6 + run);
    check(MPI_Start(&request) == MPI_SUCCESS, "get_status start rc");
    pollUntilComplete(request, "get_status of a persistent alltoall");
    check(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS && request != MPI_REQUEST_NULL, "persistent wait");
    received(6 + run, "persistent alltoall completed through MPI_Request_get_status");
    pollUntilComplete(request, "get_status of an inactive persistent alltoall");
  }
  check(MPI_Request_free(&request) == MPI_SUCCESS && request == MPI_REQUEST_NULL, "get_status free");
}

}  // namespace interpose_test
