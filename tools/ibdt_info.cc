// ibdt-info — what this ibdt build and machine offer (cf. ucx_info, ompi_info):
// compiled-in components and the effective configuration. Later layers add
// their providers, devices and measured cost models here.
#include <cstdio>
#include <string>

#include "base/config.h"
#include "base/copy_bytes.h"
#include "bootstrap/backends.h"
#include "build_info.h"
#include "collectives/alltoall_rules.h"
#include "ibdt/fabric.h"
#include "datatype/block_copy.h"
#include "transport/fabric/shm/copy_distance.h"
#include "transport/messaging/cost_model.h"
#include "transport/messaging/tuning.h"
#include "transport/messaging/tuning_decisions.h"

namespace {

// The tuning file a Context over `provider` would load (IBDT_TUNE_FILE),
// and its fitted costs (docs/tuning.md).
void printTuning(const std::string& provider) {
  auto setting = ibdt::config::getString("IBDT_TUNE_FILE");
  if (!setting.isOk()) {
    std::printf("         tuning: %s\n", setting.status().toString().c_str());
    return;
  }
  auto loaded = ibdt::messaging::loadTuning(*setting, ibdt::messaging::currentHostKey(provider));
  std::printf("         tuning: %s\n", loaded.note.c_str());
  if (!loaded.tuning) return;
  for (int p = 0; p < ibdt::messaging::kTunedPathCount; ++p) {
    const auto& cost = loaded.tuning->paths[static_cast<size_t>(p)];
    if (!cost.measured) continue;
    std::printf("           %-17s %8.0f ns/message + %.4f ns/byte + %.2f ns/block\n",
                std::string(ibdt::messaging::tunedPathName(static_cast<ibdt::messaging::TunedPath>(p))).c_str(),
                cost.perMessageNs, cost.perByteNs, cost.perBlockNs);
  }
  const ibdt::messaging::TuningRounds& rounds = loaded.tuning->rounds;
  if (rounds.count > 0) {
    std::printf("           timed in %lld rounds; they disagreed on the fastest path at %zu of %lld layouts\n",
                static_cast<long long>(rounds.count), rounds.disagreements.size(),
                static_cast<long long>(rounds.layouts));
  }
  // ibdt-sim's rules in the same file (docs/simulator.md, "Rules for the selection").
  auto rules = ibdt::collectives::alltoallRules(*loaded.tuning);
  std::printf("           alltoall rules (ibdt-sim) from %s: %s\n", loaded.path.c_str(),
              rules.isOk() ? ibdt::collectives::rulesCoverage(*rules).describe().c_str()
                           : ("left out, " + rules.status().toString()).c_str());
  auto options = ibdt::messaging::optionsFromEnvironment();
  if (!options.isOk()) return;
  const int64_t exchange =
      options->exchangeZeroCopyForced
          ? options->exchangeZeroCopyMin
          : ibdt::messaging::tunedExchangeZeroCopyMin(*loaded.tuning, options->eagerLimit, options->exchangeZeroCopyMin);
  std::printf("           exchange zero-copy from %lld bytes (%s); all-to-all throttle by the model: %lld at 4 KiB, "
              "%lld at 64 KiB blocks\n",
              static_cast<long long>(exchange), options->exchangeZeroCopyForced ? "forced" : "model",
              static_cast<long long>(ibdt::messaging::tunedThrottle(*loaded.tuning, 4096, options->eagerLimit, 8)),
              static_cast<long long>(ibdt::messaging::tunedThrottle(*loaded.tuning, 65536, options->eagerLimit, 8)));
}

// From which block size the call mailbox lends dense blocks (single copy,
// collectives/mailbox_single_copy.h): forced, or this provider's transfer
// cost against two copies at this core's memcpy rate.
void printSingleCopy(const ibdt::fabric::Caps& caps) {
  auto options = ibdt::messaging::optionsFromEnvironment();
  if (!options.isOk()) return;
  ibdt::messaging::CostModel model;
  model.transfer = caps.transfer;
  model.pageSize = caps.pageSize;
  model.memcpyBytesPerNs = ibdt::messaging::measureMemcpyBytesPerNs();
  const bool forced = options->singleCopyReadMin >= 0;
  const int64_t from = forced ? options->singleCopyReadMin : ibdt::messaging::singleCopyReadCrossover(model);
  std::printf("         node-local single copy (call mailbox): %s (%s; memcpy %.1f B/ns; a node's ranks take the median of theirs)\n",
              from > 0 ? ("dense blocks from " + std::to_string(from) + " bytes").c_str() : "never",
              forced ? "forced" : "model", model.memcpyBytesPerNs);
}

// The fabric providers compiled in, whether they open here, and their caps
// and published cost models.
void printProviders() {
  std::printf("\nfabric providers:\n");
  for (const auto& info : ibdt::fabric::probeProviders()) {
    std::printf("  %-6s %s  %s\n", info.name.c_str(), info.available ? "available  " : "unavailable", info.detail.c_str());
    if (!info.available) continue;
    auto domain = ibdt::fabric::openDomain(info.name, {});
    if (!domain.isOk()) {
      std::printf("         open failed: %s\n", domain.status().toString().c_str());
      continue;
    }
    const ibdt::fabric::Caps& caps = (*domain)->caps();
    std::printf("         device %s: max_sge send/recv %u/%u, max_inline %u, max_msg %llu, sq/rq/cq depth %u/%u/%u, "
                "reads in flight %u, rdma_read %s, write_with_imm %s, pool buffer keys %s\n",
                caps.device.c_str(), caps.maxSendSge, caps.maxRecvSge, caps.maxInline,
                static_cast<unsigned long long>(caps.maxMessageSize), caps.maxSendQueueDepth, caps.maxRecvQueueDepth,
                caps.maxCompletionQueueDepth, caps.maxReadsInFlight, caps.rdmaRead ? "yes" : "no",
                caps.writeWithImm ? "yes" : "no",
                caps.cheapSubRegistration ? "per buffer (a registration each)"
                : caps.memoryWindows      ? "per buffer and peer (type-2 memory windows)"
                                          : "per chunk (no type-2 memory windows)");
    std::printf("         registration cost: %.0f ns + %.1f ns/page; transfer cost: %.0f ns/request + %.0f ns/sge + "
                "%.0f ns/remote page + %.1f B/ns (into allocated memory: %.0f ns/request + %.1f ns/sge + %.1f B/ns)%s\n",
                caps.registration.fixedNs, caps.registration.perPageNs, caps.transfer.perRequestNs,
                caps.transfer.perSgeNs, caps.transfer.perRemotePageNs, caps.transfer.bytesPerNs,
                caps.transfer.allocatedPerRequestNs, caps.transfer.allocatedPerSgeNs, caps.transfer.allocatedBytesPerNs,
                caps.transfer.initiatorCopies ? ", copied by the initiator" : "");
    printSingleCopy(caps);
    printTuning(info.name);
  }
}

// The large-block pack copy (datatype/block_copy.h): forced, or decided by
// each regime's first copies in the process — none have run here yet.
void printPackCopy() {
  auto plan = ibdt::datatype::blockCopyPlan();
  if (!plan.isOk()) {
    std::printf("pack copy (blocks >= 1 KiB): %s\n", plan.status().toString().c_str());
    return;
  }
  if (plan->forced) {
    std::printf("pack copy (blocks >= 1 KiB): %s (forced)\n",
                std::string(ibdt::datatype::blockKernelName(plan->pack.of(ibdt::datatype::CopyRegime::kShortInCache)))
                    .c_str());
    return;
  }
  std::printf("pack copy (blocks >= 1 KiB): measured by each process's first copies, per direction, for 1-4 KiB "
              "blocks, blocks from 4 KiB, copies from %lld KiB (beyond the core's cache: one call's chunks decide), "
              "and copies from %lld MiB (beyond the cache: blocks from 256 B, non-temporal stores among the "
              "kernels)\n",
              static_cast<long long>(plan->ownCacheAbove >> 10), static_cast<long long>(plan->streamAbove >> 20));
}

// Copy distances this CPU is slow at (base/slow_distances.h): memcpy's,
// measured here, and the cross-memory copy's, measured when the shm domain
// above opened.
void printCopyDistances() {
  std::printf("\nslow copy distances (destination - source mod 4096, copies >= 4 KiB take another route): "
              "memcpy %s; cross-memory %s\n",
              ibdt::memcpySlowDistances().describe().c_str(),
              ibdt::fabric::shm::crossMemorySlowDistances().describe().c_str());
}

}  // namespace

int main() {
  std::printf("ibdt %s\n", IBDT_VERSION_STRING);
  std::printf("components: verbs=%s pmix=%s mpi=%s\n", IBDT_BUILD_VERBS, IBDT_BUILD_PMIX, IBDT_BUILD_MPI);
  auto bootstrap = ibdt::bootstrap::detectedBackend();
  std::printf("bootstrap: %s\n", bootstrap.isOk() ? std::string(*bootstrap).c_str() : bootstrap.status().toString().c_str());
  printPackCopy();
  printProviders();
  printCopyDistances();
  std::printf("\nconfiguration (IBDT_* environment variables):\n");
  int status = 0;
  for (const auto& knob : ibdt::config::knobs()) {
    auto value = ibdt::config::getString(knob.name);
    const char* origin = ibdt::config::isSet(knob.name) ? "set" : "default";
    std::printf("  %-28s = %-12s (%s)  %s\n", knob.name, value.isOk() ? value->c_str() : "?", origin,
                knob.description);
  }
  std::string unknown = ibdt::config::unknownVariables();
  if (!unknown.empty()) {
    std::printf("\nwarning: unknown IBDT_* variables (typos?): %s\n", unknown.c_str());
    status = 1;
  }
  return status;
}
