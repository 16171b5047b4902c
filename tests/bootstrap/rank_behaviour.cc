// rank_behaviour — a program for ibdt-run's failure tests: one chosen rank
// misbehaves, the others wait for it in a fence.
//   rank_behaviour echo                 print a line to stdout and stderr
//   rank_behaviour exit-code <r> <c>    rank r exits with code c, others fence
//   rank_behaviour segv <r>             rank r dies of SIGSEGV, others fence
//   rank_behaviour hang <r>             rank r sleeps forever, others fence
//   rank_behaviour stubborn <r>         rank r ignores SIGTERM and sleeps,
//                                       rank (r+1)%n exits 1
//   rank_behaviour missing-key          every rank gets a key nobody puts
//   rank_behaviour placement            print rank, size, node, local rank/size
//   rank_behaviour ready-then-hang      print "ready pid=<pid> socket=<store socket>",
//                                       then sleep forever
//   rank_behaviour stranger             rank 0 also connects to the job's socket
//                                       with a wrong token; then all fence
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bootstrap/launcher_store.h"
#include "ibdt/store.h"

using namespace std::chrono_literals;

namespace {

int fenceAndReport(ibdt::bootstrap::Store& store) {
  ibdt::Status status = store.fence(ibdt::Deadline::after(60s));
  if (!status.isOk()) {
    std::fprintf(stderr, "rank %d: fence failed: %s\n", store.rank(), status.toString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  int chosen = argc > 2 ? std::atoi(argv[2]) : 0;
  auto connected = ibdt::bootstrap::connectStore();
  if (!connected.isOk()) {
    std::fprintf(stderr, "connectStore: %s\n", connected.status().toString().c_str());
    return 2;
  }
  ibdt::bootstrap::Store& store = **connected;
  bool me = store.rank() == chosen;
  if (mode == "echo") {
    std::printf("hello from rank %d of %d\n", store.rank(), store.size());
    std::fprintf(stderr, "complaint from rank %d\n", store.rank());
    return 0;
  }
  if (mode == "placement") {
    std::printf("rank=%d size=%d node=%d nodes=%d local=%d/%d backend=%s\n", store.rank(), store.size(), store.nodeId(),
                store.numNodes(), store.localRank(), store.localSize(), std::string(store.backend()).c_str());
    return 0;
  }
  if (mode == "exit-code") {
    if (me) return argc > 3 ? std::atoi(argv[3]) : 3;
    return fenceAndReport(store);
  }
  if (mode == "segv") {
    if (me) {
      ::signal(SIGSEGV, SIG_DFL);
      ::raise(SIGSEGV);
    }
    return fenceAndReport(store);
  }
  if (mode == "hang") {
    if (me) {
      for (;;) ::pause();
    }
    return fenceAndReport(store);
  }
  if (mode == "stubborn") {
    if (me) {
      ::signal(SIGTERM, SIG_IGN);
      std::printf("ignoring SIGTERM\n");
      std::fflush(stdout);
      for (;;) ::pause();
    }
    if (store.rank() == (chosen + 1) % store.size()) {
      ::usleep(100'000);  // let the stubborn rank install its handler
      return 1;
    }
    return fenceAndReport(store);
  }
  if (mode == "ready-then-hang") {
    const char* socket = std::getenv("IBDT_RUN_SOCKET");
    std::printf("ready pid=%d socket=%s\n", static_cast<int>(::getpid()), socket != nullptr ? socket : "");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  if (mode == "stranger") {
    if (store.rank() == 0) {
      auto stranger = ibdt::bootstrap::LauncherStore::connect(std::getenv("IBDT_RUN_SOCKET"), "guessed-token", 0,
                                                              ibdt::Deadline::after(10s));
      std::printf("stranger: %s\n", stranger.status().toString().c_str());
      if (stranger.isOk()) return 1;
    }
    return fenceAndReport(store);
  }
  if (mode == "missing-key") {
    int peer = (store.rank() + 1) % store.size();
    auto value = store.get(peer, "nobody-puts-this", ibdt::Deadline::after(200ms));
    std::printf("rank %d: %s\n", store.rank(), value.status().toString().c_str());
    // Nobody leaves while a peer still waits (it would learn that we ended).
    if (fenceAndReport(store) != 0) return 1;
    return value.status().code() == ibdt::Code::kTimeout ? 0 : 1;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
