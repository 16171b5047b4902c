// The bridge's MPI_Wait/MPI_Test loops spin only as long as the most
// crowded of its Contexts allows (mpi/comm_state.h, bridgeWaitSpins): a
// Context set up later for a communicator with one local rank (4096
// spins) must not make waits on an oversubscribed one spin, holding the
// core its peers need (docs/mpi.md, "The persistent wait at 4 and 8
// ranks": 3.5 ms per 8-byte persistent alltoall at 4 ranks before). Here
// the crowded Context is told so by IBDT_MSG_SPIN=0, as `auto` decides on
// a node with more local ranks than cores.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <vector>

#include "mpi/comm_state.h"

namespace {

// An 8-byte alltoall on `comm` (one rank): sets up the bridge's state, its
// Context reading IBDT_MSG_SPIN; every byte checked.
void alltoallOn(MPI_Comm comm, char salt) {
  std::vector<char> send(8), recv(8, 0);
  for (int i = 0; i < 8; ++i) send[i] = static_cast<char>(salt + i);
  ASSERT_EQ(MPI_Alltoall(send.data(), 8, MPI_BYTE, recv.data(), 8, MPI_BYTE, comm), MPI_SUCCESS);
  EXPECT_EQ(recv, send);
}

TEST(MpiWaitSpins, LeastBudgetOfTheContextsSetUp) {
  MPI_Comm crowded, alone;
  MPI_Comm_dup(MPI_COMM_SELF, &crowded);
  MPI_Comm_dup(MPI_COMM_SELF, &alone);
  setenv("IBDT_MSG_SPIN", "0", 1);  // the budget of a Context sharing its core
  alltoallOn(crowded, 1);
  EXPECT_EQ(ibdt::mpi::bridgeWaitSpins(), 0u);
  unsetenv("IBDT_MSG_SPIN");  // auto: one local rank, a core of its own
  alltoallOn(alone, 2);
  EXPECT_EQ(ibdt::mpi::bridgeWaitSpins(), 0u) << "the Context set up last decided the bridge's spins";
  MPI_Comm_free(&alone);
  MPI_Comm_free(&crowded);
}

}  // namespace
