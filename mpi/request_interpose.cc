// The MPI_Wait and MPI_Test families, MPI_Request_get_status, MPI_Start(all)
// and MPI_Request_free, wrapped so that ibdt's non-blocking runs (mpi/nonblocking.h) and
// persistent plans (mpi/persistent.h) progress while the program waits or
// tests: each test first polls every ibdt run in flight once (completing the
// generalized requests of those done), then asks MPI about MPI's requests,
// with the bridge's persistent handles hidden, and reports those itself; a
// blocking wait loops over the test form, polling ibdt between tries as
// ibdt's own waits do (WaitPacer). With no ibdt run in flight and no
// persistent handle of the bridge, every wrapper is MPI's own call at once.
#include <mpi.h>

#include <vector>

#include "base/backoff.h"
#include "mpi/comm_state.h"
#include "mpi/nonblocking.h"
#include "mpi/persistent.h"

namespace ibdt::mpi {
namespace {

bool bridgeActive() { return nonblockingActive() || anyPersistentHandles(); }

// Polls every ibdt run in flight once; true when one completed.
// `progressed`: set when a run moved (a round completed or was posted).
bool progress(bool& progressed) {
  bool completed = false;
  if (nonblockingActive()) completed = progressNonblocking(progressed);
  if (anyPersistentRunning()) completed = progressPersistent(progressed) || completed;
  return completed;
}

bool progress() {
  bool progressed = false;
  return progress(progressed);
}

// The pause between two tries of a blocking wait (docs/mpi.md, "Non-blocking
// calls"): polls ibdt with the backoff of ibdt's own waits (spin, yield,
// nap; reset, as theirs, whenever a run moves: a round completed or was
// posted) and returns when a run completed (its
// request may end the wait) or when MPI's turn came: every kPollsPerTry
// polls while spinning, after every yield or nap (each costs more than MPI's
// test). MPI is so asked at a bounded rate and still progresses the
// program's own requests and what a peer needs of this rank; a timed
// transport wait between tries overslept on a loaded machine.
class WaitPacer {
 public:
  static constexpr int kPollsPerTry = 32;

  WaitPacer() : backoff_(bridgeWaitSpins()) {}

  void pause() {
    for (int polls = 0; polls < kPollsPerTry; ++polls) {
      bool progressed = false;
      if (progress(progressed)) {
        backoff_.reset();
        return;
      }
      if (progressed) {  // without this, a run of several rounds fell into 50 us naps between them
        backoff_.reset();
        continue;
      }
      const bool spinning = backoff_.spinning();
      backoff_.pause();
      if (!spinning) return;
    }
  }

 private:
  Backoff backoff_;
};

// The status of a completed persistent alltoall: empty, as MPI's own.
void emptyStatus(MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS;
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
}

MPI_Status* statusAt(MPI_Status statuses[], int i) {
  return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
}

// What MPI sees of `requests`: the bridge's persistent handles as null.
std::vector<MPI_Request> visible(int count, const MPI_Request requests[], bool& running) {
  std::vector<MPI_Request> copy(requests, requests + count);
  running = false;
  for (MPI_Request& r : copy) {
    const HandleState state = handleState(r);
    if (state == HandleState::kNotOurs) continue;
    running = running || state == HandleState::kRunning;
    r = MPI_REQUEST_NULL;
  }
  return copy;
}

// MPI's changes to the visible copy (completed requests set to null) back
// into the program's array, the bridge's handles left as they are.
void writeBack(int count, MPI_Request requests[], const std::vector<MPI_Request>& copy) {
  for (int i = 0; i < count; ++i) {
    if (handleState(requests[i]) == HandleState::kNotOurs) requests[i] = copy[static_cast<size_t>(i)];
  }
}

int testOne(MPI_Request* request, int* flag, MPI_Status* status) {
  progress();
  switch (handleState(*request)) {
    case HandleState::kNotOurs: return PMPI_Test(request, flag, status);
    case HandleState::kRunning: *flag = 0; return MPI_SUCCESS;
    default: markReported(*request); *flag = 1; emptyStatus(status); return MPI_SUCCESS;
  }
}

int testAll(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  progress();
  bool running = false;
  std::vector<MPI_Request> copy = visible(count, requests, running);
  *flag = 0;
  if (running) return MPI_SUCCESS;
  const int rc = PMPI_Testall(count, copy.data(), flag, statuses);
  if (rc != MPI_SUCCESS || !*flag) return rc;
  writeBack(count, requests, copy);
  for (int i = 0; i < count; ++i) {
    if (handleState(requests[i]) == HandleState::kNotOurs) continue;
    markReported(requests[i]);
    emptyStatus(statusAt(statuses, i));
  }
  return rc;
}

int testAny(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  progress();
  for (int i = 0; i < count; ++i) {  // a completed persistent alltoall first
    if (handleState(requests[i]) == HandleState::kComplete) {
      markReported(requests[i]);
      *index = i;
      *flag = 1;
      emptyStatus(status);
      return MPI_SUCCESS;
    }
  }
  bool running = false;
  std::vector<MPI_Request> copy = visible(count, requests, running);
  const int rc = PMPI_Testany(count, copy.data(), index, flag, status);
  writeBack(count, requests, copy);
  if (running && *flag && *index == MPI_UNDEFINED) *flag = 0;  // one of ours is still active
  return rc;
}

int testSome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  progress();
  bool running = false;
  std::vector<MPI_Request> copy = visible(incount, requests, running);
  const int rc = PMPI_Testsome(incount, copy.data(), outcount, indices, statuses);
  if (rc != MPI_SUCCESS) return rc;
  writeBack(incount, requests, copy);
  if (*outcount == MPI_UNDEFINED) *outcount = 0;
  bool any = *outcount > 0 || running;
  for (int i = 0; i < incount; ++i) {
    if (handleState(requests[i]) != HandleState::kComplete) continue;
    markReported(requests[i]);
    emptyStatus(statusAt(statuses, *outcount));
    indices[(*outcount)++] = i;
    any = true;
  }
  if (!any) *outcount = MPI_UNDEFINED;  // no active request at all
  return rc;
}

}  // namespace
}  // namespace ibdt::mpi

using namespace ibdt::mpi;

extern "C" int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return bridgeActive() ? testOne(request, flag, status) : PMPI_Test(request, flag, status);
}

extern "C" int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return bridgeActive() ? testAll(count, requests, flag, statuses) : PMPI_Testall(count, requests, flag, statuses);
}

extern "C" int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  return bridgeActive() ? testAny(count, requests, index, flag, status)
                        : PMPI_Testany(count, requests, index, flag, status);
}

extern "C" int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                            MPI_Status statuses[]) {
  return bridgeActive() ? testSome(incount, requests, outcount, indices, statuses)
                        : PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

extern "C" int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  int flag = 0;
  WaitPacer pacer;
  while (bridgeActive()) {
    if (int rc = testOne(request, &flag, status); rc != MPI_SUCCESS || flag) return rc;
    pacer.pause();
  }
  return PMPI_Wait(request, status);
}

extern "C" int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  int flag = 0;
  WaitPacer pacer;
  while (bridgeActive()) {
    if (int rc = testAll(count, requests, &flag, statuses); rc != MPI_SUCCESS || flag) return rc;
    pacer.pause();
  }
  return PMPI_Waitall(count, requests, statuses);
}

extern "C" int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  int flag = 0;
  WaitPacer pacer;
  while (bridgeActive()) {
    if (int rc = testAny(count, requests, index, &flag, status); rc != MPI_SUCCESS || flag) return rc;
    pacer.pause();
  }
  return PMPI_Waitany(count, requests, index, status);
}

extern "C" int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                            MPI_Status statuses[]) {
  WaitPacer pacer;
  while (bridgeActive()) {
    const int rc = testSome(incount, requests, outcount, indices, statuses);
    if (rc != MPI_SUCCESS || *outcount != 0) return rc;  // some completed, or none active (MPI_UNDEFINED)
    pacer.pause();
  }
  return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}

extern "C" int MPI_Start(MPI_Request* request) {
  if (!isPersistentAlltoall(*request)) return PMPI_Start(request);
  return startPersistentAlltoall(*request).isOk() ? MPI_SUCCESS : MPI_ERR_REQUEST;
}

extern "C" int MPI_Startall(int count, MPI_Request requests[]) {
  if (!anyPersistentHandles()) return PMPI_Startall(count, requests);
  std::vector<MPI_Request> others;  // MPI's own, started together
  std::vector<int> where;
  for (int i = 0; i < count; ++i) {
    if (isPersistentAlltoall(requests[i])) {
      if (!startPersistentAlltoall(requests[i]).isOk()) return MPI_ERR_REQUEST;
    } else {
      others.push_back(requests[i]);
      where.push_back(i);
    }
  }
  if (others.empty()) return MPI_SUCCESS;
  const int rc = PMPI_Startall(static_cast<int>(others.size()), others.data());
  for (size_t k = 0; k < where.size(); ++k) requests[where[k]] = others[k];
  return rc;
}

extern "C" int MPI_Request_free(MPI_Request* request) {
  if (isPersistentAlltoall(*request)) freePersistentAlltoall(*request);
  return PMPI_Request_free(request);
}

// Progresses ibdt's runs as the test forms do (a program may poll it
// instead of testing); frees nothing and deactivates nothing: the
// completion is still reported by the wait or test that follows.
extern "C" int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  if (!bridgeActive()) return PMPI_Request_get_status(request, flag, status);
  progress();
  switch (handleState(request)) {
    case HandleState::kNotOurs: return PMPI_Request_get_status(request, flag, status);
    case HandleState::kRunning: *flag = 0; return MPI_SUCCESS;
    default: *flag = 1; emptyStatus(status); return MPI_SUCCESS;  // complete, or inactive (as MPI reports it)
  }
}
