#include "transport/fabric/verbs/verbs_calibration.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/log.h"

namespace ibdt::fabric::verbs {
namespace {

constexpr int kRepetitions = 7;

double medianRegistrationNs(ibv_pd* pd, void* memory, size_t bytes) {
  std::array<double, kRepetitions> samples{};
  for (double& sample : samples) {
    auto start = std::chrono::steady_clock::now();
    ibv_mr* mr = ibv_reg_mr(pd, memory, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (mr == nullptr) return -1;
    ibv_dereg_mr(mr);
    sample = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  }
  std::sort(samples.begin(), samples.end());
  return samples[kRepetitions / 2];
}

}  // namespace

uint32_t probeMaxInline(ibv_context* context, ibv_pd* pd) {
  ibv_cq* cq = ibv_create_cq(context, 1, nullptr, nullptr, 0);
  if (cq == nullptr) return 0;
  uint32_t granted = 0;
  for (uint32_t ask = 1024; ask >= 16 && granted == 0; ask /= 2) {
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 1;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = ask;
    if (ibv_qp* qp = ibv_create_qp(pd, &init); qp != nullptr) {
      granted = init.cap.max_inline_data;
      ibv_destroy_qp(qp);
    }
  }
  ibv_destroy_cq(cq);
  return granted;
}

RegistrationCost measureRegistrationCost(ibv_pd* pd, size_t pageSize) {
  RegistrationCost cost;
  size_t bytes = kManyPages * pageSize;
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return cost;
  std::memset(memory, 1, bytes);  // registered buffers are normally resident
  double one = medianRegistrationNs(pd, memory, pageSize);
  double many = medianRegistrationNs(pd, memory, bytes);
  munmap(memory, bytes);
  if (one < 0 || many < 0) {
    IBDT_LOG(kWarn, "verbs: registration cost could not be measured (ibv_reg_mr failed); using 0");
    return cost;
  }
  cost.perPageNs = std::max(0.0, (many - one) / static_cast<double>(kManyPages - 1));
  cost.fixedNs = std::max(0.0, one - cost.perPageNs);
  return cost;
}

TransferCost nominalTransferCost(const ibv_port_attr& port) {
  double lanes = 1;
  switch (port.active_width) {
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: lanes = 1; break;
  }
  double laneGbps = 2.5;
  switch (port.active_speed) {
    case 2: laneGbps = 5; break;
    case 4: laneGbps = 10; break;
    case 8: laneGbps = 10; break;
    case 16: laneGbps = 14; break;
    case 32: laneGbps = 25; break;
    case 64: laneGbps = 50; break;
    case 128: laneGbps = 100; break;
    default: laneGbps = 2.5; break;
  }
  TransferCost cost;
  cost.bytesPerNs = lanes * laneGbps / 8;  // Gbit/s -> bytes per ns
  cost.perRequestNs = 1000;  // doorbell, DMA of the WQE, wire round trip of a small RC request
  cost.perSgeNs = 5;         // one more DMA descriptor read by the HCA
  cost.perRemotePageNs = 0;  // the target HCA translates pages itself: no per-page cost
  cost.allocatedPerRequestNs = cost.perRequestNs;  // staging memory is just registered memory here
  cost.allocatedBytesPerNs = cost.bytesPerNs;
  cost.allocatedPerSgeNs = cost.perSgeNs;
  cost.initiatorCopies = false;  // the HCA's DMA engine moves the bytes
  return cost;
}

}  // namespace ibdt::fabric::verbs
