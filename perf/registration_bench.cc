// ibdt-bench registration — what registering memory costs on a provider, and
// what the memory layer saves:
//   * register + deregister of 1 ... 4096 pages, beside mlock + munlock of the
//     same pages (the kernel's page pinning alone) and the fitted cost model;
//   * a registration-cache hit (target < 100 ns) and miss, beside a direct
//     registration of the same buffer;
//   * optimistic group registration of the 128 x 4096-int column layouts,
//     beside block-by-block registration: regions and time;
//   * a staging-pool hand-out (get + give back) with the chunk's key and with
//     a key per buffer (docs/security.md), where the provider offers both:
//     a registration per buffer (shm) or a memory window bound on a peer's
//     endpoint and invalidated at give-back (verbs, with its completions
//     polled as the messaging layer would).
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "ibdt/fabric.h"
#include "perf/benchmarks.h"
#include "transport/memory/buffer_pool.h"
#include "transport/memory/group_registration.h"
#include "transport/memory/registration_cache.h"
#include "transport/memory/registration_cost.h"

namespace ibdt::perf {
namespace {

constexpr uint32_t kAccess = fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite;

class Scratch {
 public:
  explicit Scratch(size_t length) : length_(length) {
    void* memory = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = memory == MAP_FAILED ? nullptr : static_cast<uint8_t*>(memory);
    if (data_ != nullptr) std::memset(data_, 1, length);  // fault the pages in, as a used buffer would be
  }
  ~Scratch() {
    if (data_ != nullptr) munmap(data_, length_);
  }
  uint8_t* data() const { return data_; }

 private:
  uint8_t* data_ = nullptr;
  size_t length_;
};

double micros(const Summary& s) { return s.median * 1e6; }
double nanos(const Summary& s) { return s.median * 1e9; }

template <typename Fn>
Summary time(const CommonOptions& common, int inner, Fn&& fn) {
  return summarize(measure(common.warmup, common.reps, inner, std::forward<Fn>(fn)));
}

bool ok(const Status& status, const char* what) {
  if (status.isOk()) return true;
  reportFailure(strCat("registration: ", what, ": ", status.toString()));
  return false;
}

void registrationCost(fabric::Domain& domain, const CommonOptions& common) {
  size_t page = domain.caps().pageSize;
  Report report("registration: register + deregister vs mlock + munlock (" + domain.caps().provider + ")",
                {"pages", "register_us", "min_us", "max_us", "ns_per_page", "mlock_us"});
  report.setFileStem("registration-cost");
  std::vector<size_t> sizes = common.quick ? std::vector<size_t>{1, 64} : std::vector<size_t>{1, 4, 16, 64, 256, 1024, 4096};
  Scratch scratch(sizes.back() * page);
  if (scratch.data() == nullptr) return reportFailure("registration: mmap of the scratch buffer failed");
  for (size_t pages : sizes) {
    Status failure;
    Summary reg = time(common, 1, [&] {
      auto region = domain.registerMemory(scratch.data(), pages * page, kAccess);
      if (!region.isOk()) failure = region.status();
    });
    if (!ok(failure, "registerMemory")) return;
    bool locked = true;
    Summary lock = time(common, 1, [&] {
      locked = mlock(scratch.data(), pages * page) == 0 && munlock(scratch.data(), pages * page) == 0 && locked;
    });
    nlohmann::json row = {{"pages", pages},
                          {"register_us", micros(reg)},
                          {"min_us", reg.min * 1e6},
                          {"max_us", reg.max * 1e6},
                          {"ns_per_page", nanos(reg) / static_cast<double>(pages)}};
    row["mlock_us"] = locked ? nlohmann::json(micros(lock)) : nlohmann::json("n/a (RLIMIT_MEMLOCK)");
    report.add(row);
  }
  auto fitted = memory::measureRegistrationCost(domain, common.quick ? 64 : 256, common.quick ? 3 : 9);
  if (!ok(fitted.status(), "measureRegistrationCost")) return;
  report.note("fitted model", strCat(fitted->fixedNs, " ns + ", fitted->perPageNs, " ns/page"));
  const auto& published = domain.caps().registration;
  report.note("published model (caps)", strCat(published.fixedNs, " ns + ", published.perPageNs, " ns/page"));
  report.print(common);
}

void cacheCost(fabric::Domain& domain, const CommonOptions& common) {
  size_t page = domain.caps().pageSize;
  Report report("registration: cache hit and miss vs direct registration (" + domain.caps().provider + ")",
                {"bytes", "hit_ns", "hit_min_ns", "miss_us", "direct_us"});
  report.setFileStem("registration-cache");
  memory::CacheOptions options;
  options.mode = memory::CacheOptions::Mode::kOn;
  auto cache = memory::RegistrationCache::create(domain, options);
  if (!ok(cache.status(), "creating the cache")) return;
  options.maxRegions = 1;  // every acquire of a new buffer evicts the last: all misses
  auto missCache = memory::RegistrationCache::create(domain, options);
  if (!ok(missCache.status(), "creating the cache")) return;
  std::vector<size_t> sizes = common.quick ? std::vector<size_t>{page} : std::vector<size_t>{page, 64 * page, 1024 * page};
  int inner = common.quick ? 1000 : 20000;
  for (size_t bytes : sizes) {
    Scratch a(bytes);
    Scratch b(bytes);
    Status failure;
    Summary hit = time(common, inner, [&] {
      auto ref = (*cache)->acquire(a.data() + 64, bytes - 128, kAccess);  // inside the cached range
      if (!ref.isOk()) failure = ref.status();
    });
    bool flip = false;
    Summary miss = time(common, 1, [&] {
      flip = !flip;
      auto ref = (*missCache)->acquire((flip ? a : b).data(), bytes, kAccess);
      if (!ref.isOk()) failure = ref.status();
    });
    Summary direct = time(common, 1, [&] {
      auto region = domain.registerMemory(a.data(), bytes, kAccess);
      if (!region.isOk()) failure = region.status();
    });
    if (!ok(failure, "acquire")) return;
    report.add({{"bytes", bytes},
                {"hit_ns", nanos(hit)},
                {"hit_min_ns", hit.min * 1e9},
                {"miss_us", micros(miss)},
                {"direct_us", micros(direct)}});
    if (nanos(hit) >= 100) report.note("over target", strCat("hit of ", bytes, " B costs ", nanos(hit), " ns (target < 100 ns)"));
  }
  auto counters = (*cache)->counters();
  report.note("hits/misses", strCat(counters.hits, "/", counters.misses));
  report.print(common);
}

void groupRegistration(fabric::Domain& domain, const CommonOptions& common) {
  Report report("registration: OGR vs block-by-block, 128 x 4096-int columns (" + domain.caps().provider + ")",
                {"columns", "ogr_regions", "block_regions", "ogr_us", "block_us"});
  report.setFileStem("registration-ogr");
  auto cost = memory::registrationCostOf(domain);
  if (!ok(cost.status(), "registration cost model")) return;
  memory::CacheOptions off;
  off.mode = memory::CacheOptions::Mode::kOff;  // time real registrations, not cache hits
  auto cache = memory::RegistrationCache::create(domain, off);
  if (!ok(cache.status(), "creating the cache")) return;
  Scratch array(128 * 4096 * sizeof(int));
  auto* ints = reinterpret_cast<int*>(array.data());
  memory::GroupPlanOptions grouped{*cost, domain.caps().pageSize, 0};
  memory::GroupPlanOptions single{{0, 1}, domain.caps().pageSize, 0};  // never span a gap
  for (size_t columns = 1; columns <= 2048; columns *= common.quick ? 16 : 2) {
    std::vector<memory::Block> blocks;
    for (size_t row = 0; row < 128; ++row) blocks.push_back({ints + row * 4096, columns * sizeof(int)});
    Status failure;
    size_t ogrRegions = 0;
    size_t blockRegions = 0;
    auto run = [&](const memory::GroupPlanOptions& plan, size_t& regions) {
      return time(common, 1, [&] {
        auto result = memory::registerGroups(**cache, blocks, kAccess, plan);
        if (!result.isOk()) failure = result.status();
        else regions = result->regions.size();
      });
    };
    Summary ogr = run(grouped, ogrRegions);
    Summary perBlock = run(single, blockRegions);
    if (!ok(failure, "registerGroups")) return;
    if (ogrRegions * 10 > blocks.size()) {
      reportFailure(strCat("registration: OGR used ", ogrRegions, " regions for ", blocks.size(), " blocks of ", columns,
                           " columns (expected at least 10x fewer)"));
    }
    report.add({{"columns", columns},
                {"ogr_regions", ogrRegions},
                {"block_regions", blockRegions},
                {"ogr_us", micros(ogr)},
                {"block_us", micros(perBlock)}});
  }
  report.note("cost model", strCat(cost->fixedNs, " ns + ", cost->perPageNs, " ns/page"));
  report.print(common);
}

// Two endpoints of `domain` connected to each other: where pool keys are
// memory windows, the peer a hand-out's key is bound for.
struct LoopbackPair {
  std::unique_ptr<fabric::CompletionQueue> queue;
  std::unique_ptr<fabric::Endpoint> a, b;

  static Result<LoopbackPair> open(fabric::Domain& domain) {
    LoopbackPair pair;
    IBDT_ASSIGN_OR_RETURN(pair.queue, domain.createCompletionQueue(1024));
    IBDT_ASSIGN_OR_RETURN(pair.a, domain.createEndpoint(*pair.queue, *pair.queue, {}));
    IBDT_ASSIGN_OR_RETURN(pair.b, domain.createEndpoint(*pair.queue, *pair.queue, {}));
    IBDT_RETURN_IF_ERROR(pair.a->connect(pair.b->address()));
    IBDT_RETURN_IF_ERROR(pair.b->connect(pair.a->address()));
    return pair;
  }
};

// What a key per pool buffer adds to the staging hot path: a hand-out
// registers its buffer, or binds a window over it, and the give-back
// deregisters or invalidates it.
void poolHandOut(fabric::Domain& domain, const CommonOptions& common) {
  Report report("registration: pool get + give back, chunk key vs a key per buffer (" + domain.caps().provider + ")",
                {"bytes", "chunk_key_ns", "chunk_key_min_ns", "buffer_key_ns", "buffer_key_min_ns"});
  report.setFileStem("registration-pool");
  memory::PoolOptions shared;
  shared.perBufferKeys = false;
  auto chunkKeys = memory::BufferPool::create(domain, shared);
  auto bufferKeys = memory::BufferPool::create(domain, memory::PoolOptions());
  if (!ok(chunkKeys.status(), "creating a pool") || !ok(bufferKeys.status(), "creating a pool")) return;
  if (!(*bufferKeys)->perBufferKeys()) {
    report.note("per-buffer keys",
                "not offered by this provider (neither Caps::cheapSubRegistration nor Caps::memoryWindows)");
    report.print(common);
    return;
  }
  LoopbackPair pair;
  fabric::Endpoint* keyFor = nullptr;
  if (domain.caps().memoryWindows && !domain.caps().cheapSubRegistration) {
    auto opened = LoopbackPair::open(domain);
    if (!ok(opened.status(), "connecting a loopback pair for the windows")) return;
    pair = std::move(opened).value();
    keyFor = pair.b.get();
    report.note("per-buffer keys", "type-2 memory windows: bind + invalidate on a loopback QP, completions polled");
  }
  fabric::Completion drained[16];
  int inner = common.quick ? 2000 : 20000;
  for (size_t bytes : {domain.caps().pageSize, size_t{64} << 10}) {
    Status failure;
    auto handOut = [&](memory::BufferPool& pool) {
      return time(common, inner, [&] {
        {
          auto buffer = pool.get(bytes, keyFor);  // given back at the end of the scope
          if (!buffer.isOk()) failure = buffer.status();
        }
        if (pair.queue) pair.queue->poll(drained);  // retires the window requests, as messaging's progress does
      });
    };
    Summary chunk = handOut(**chunkKeys);
    Summary perBuffer = handOut(**bufferKeys);
    if (!ok(failure, "pool get")) return;
    report.add({{"bytes", bytes},
                {"chunk_key_ns", nanos(chunk)},
                {"chunk_key_min_ns", chunk.min * 1e9},
                {"buffer_key_ns", nanos(perBuffer)},
                {"buffer_key_min_ns", perBuffer.min * 1e9}});
  }
  report.print(common);
}

void run(const CommonOptions& common) {
  fabric::DomainOptions options;
  options.jobTag = strCat("bench-registration-", getpid());
  auto domain = fabric::openDomain("auto", options);
  if (!ok(domain.status(), "opening the provider")) return;
  registrationCost(**domain, common);
  cacheCost(**domain, common);
  groupRegistration(**domain, common);
  poolHandOut(**domain, common);
}

}  // namespace

void addRegistrationBenchmark(CLI::App& app, const CommonOptions& common) {
  app.add_subcommand("registration", "memory registration cost, registration-cache hit/miss, group registration")
      ->callback([&common] { run(common); });
}

}  // namespace ibdt::perf
