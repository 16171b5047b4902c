// The conversion cache: a type attribute on derived MPI datatypes (dropped
// by its delete callback when the type is freed), a table for predefined ones.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "mpi/type_convert.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;
using datatype::Segment;

struct Cached {
  Datatype type;
  std::optional<Segment> lastSegment;  // of lastCount elements
  int64_t lastCount = -1;
};

// One lock for the whole cache: conversions are rare, and the attribute
// calls into MPI must not race with a conversion of the same type.
std::recursive_mutex& cacheMutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

// The types used last, looked up before asking MPI (an attribute lookup and
// an envelope query cost more than packing a small message). The delete
// callback clears a freed type's slot, so a reused handle never hits it.
struct RecentSlot {
  MPI_Datatype handle = MPI_DATATYPE_NULL;
  Cached* cached = nullptr;
};
constexpr size_t kRecentSlots = 16;
RecentSlot recent[kRecentSlots];

size_t recentSlot(MPI_Datatype type) {
  uintptr_t bits = 0;
  std::memcpy(&bits, &type, std::min(sizeof bits, sizeof type));
  return (bits ^ (bits >> 4) ^ (bits >> 12)) % kRecentSlots;
}

std::atomic<uint64_t> typesFreed{0};

int deleteCached(MPI_Datatype, int, void* attribute, void*) {
  std::lock_guard lock(cacheMutex());
  typesFreed.fetch_add(1, std::memory_order_relaxed);
  for (RecentSlot& slot : recent) {
    if (slot.cached == attribute) slot = RecentSlot{};
  }
  delete static_cast<Cached*>(attribute);
  return MPI_SUCCESS;
}

Result<int> typeKeyval() {
  static int keyval = MPI_KEYVAL_INVALID;
  if (keyval == MPI_KEYVAL_INVALID &&
      PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, deleteCached, &keyval, nullptr) != MPI_SUCCESS) {
    return makeError(Code::kResource, "mpi: MPI_Type_create_keyval failed");
  }
  return keyval;
}

bool isPredefined(MPI_Datatype type) {
  int ni = 0, na = 0, nt = 0, combiner = 0;
  PMPI_Type_get_envelope(type, &ni, &na, &nt, &combiner);
  return combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
         combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER;
}

Result<Cached*> lookupInMpi(MPI_Datatype type);

// The cache entry of `type`, converting it on a miss. Called with the lock held.
Result<Cached*> lookup(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return makeError(Code::kInvalidArgument, "mpi: MPI_DATATYPE_NULL");
  RecentSlot& slot = recent[recentSlot(type)];
  if (slot.cached != nullptr && slot.handle == type) return slot.cached;
  IBDT_ASSIGN_OR_RETURN(Cached * cached, lookupInMpi(type));
  slot = RecentSlot{type, cached};
  return cached;
}

Result<Cached*> lookupInMpi(MPI_Datatype type) {
  static std::map<MPI_Datatype, std::unique_ptr<Cached>> predefined;
  const bool named = isPredefined(type);
  if (named) {
    auto found = predefined.find(type);
    if (found != predefined.end()) return found->second.get();
  }
  IBDT_ASSIGN_OR_RETURN(int keyval, typeKeyval());
  if (!named) {
    void* attribute = nullptr;
    int present = 0;
    if (PMPI_Type_get_attr(type, keyval, &attribute, &present) != MPI_SUCCESS) {
      return makeError(Code::kInvalidArgument, "mpi: MPI_Type_get_attr rejects the datatype handle");
    }
    if (present) return static_cast<Cached*>(attribute);
  }
  auto inner = [](MPI_Datatype t) -> Result<Datatype> {
    IBDT_ASSIGN_OR_RETURN(Cached * cached, lookup(t));
    return cached->type;
  };
  IBDT_ASSIGN_OR_RETURN(Datatype converted, convertLevel(type, inner));
  IBDT_RETURN_IF_ERROR(converted.commit());
  auto entry = std::make_unique<Cached>(Cached{std::move(converted), std::nullopt, -1});
  Cached* raw = entry.get();
  if (named) {
    predefined.emplace(type, std::move(entry));
  } else if (PMPI_Type_set_attr(type, keyval, raw) == MPI_SUCCESS) {
    entry.release();  // owned by the attribute now
  } else {
    return makeError(Code::kResource, "mpi: MPI_Type_set_attr failed");
  }
  return raw;
}

}  // namespace

Result<Datatype> convertType(MPI_Datatype type) {
  std::lock_guard lock(cacheMutex());
  IBDT_ASSIGN_OR_RETURN(Cached * cached, lookup(type));
  return cached->type;
}

uint64_t convertedTypesFreed() { return typesFreed.load(std::memory_order_relaxed); }

Result<const Segment*> segmentOf(MPI_Datatype type, int64_t count) {
  // The thread's previous segment (see the header): read before the lookup,
  // so a type freed meanwhile leaves a stale count and the next call misses.
  struct Last {
    MPI_Datatype handle = MPI_DATATYPE_NULL;
    int64_t count = -1;
    uint64_t typesFreed = 0;
    std::optional<Segment> segment;  // holds its program: a freed type's entry may go
  };
  thread_local Last last;
  const uint64_t freed = convertedTypesFreed();
  if (last.segment && last.handle == type && last.count == count && last.typesFreed == freed) return &*last.segment;
  std::lock_guard lock(cacheMutex());
  IBDT_ASSIGN_OR_RETURN(Cached * cached, lookup(type));
  if (cached->lastCount != count || !cached->lastSegment) {
    IBDT_ASSIGN_OR_RETURN(Segment segment, Segment::create(cached->type, count));
    cached->lastSegment = std::move(segment);
    cached->lastCount = count;
  }
  last = Last{type, count, freed, *cached->lastSegment};
  return &*last.segment;
}

}  // namespace ibdt::mpi
