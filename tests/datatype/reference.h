// tests/datatype/reference.h — an independent model of MPI datatypes for
// testing the engine: each type is its explicit type map, built by the
// textbook definition of each constructor, and packed entry by entry.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ibdt/datatype.h"

namespace ibdt::datatype::testing {

struct RefEntry {
  int64_t disp;
  BasicKind kind;
  int64_t size() const { return basicSize(kind); }
};

struct Ref {
  std::vector<RefEntry> map;
  int64_t lb = 0;
  int64_t ub = 0;
  bool hasBounds = false;
  bool sticky = false;  // explicit bounds somewhere (resized)
  int64_t align = 1;

  int64_t extent() const { return ub - lb; }
  int64_t size() const;
  int64_t trueLb() const;
  int64_t trueUb() const;
};

// Reference constructors (same arguments as the engine's, bytes for h*).
Ref refBasic(BasicKind kind);
Ref refHvector(int64_t count, int64_t blocklen, int64_t stride, const Ref& old);
Ref refHindexed(const std::vector<int64_t>& blens, const std::vector<int64_t>& displs, const Ref& old);
Ref refStruct(const std::vector<int64_t>& blens, const std::vector<int64_t>& displs, const std::vector<Ref>& types);
Ref refResized(const Ref& old, int64_t lb, int64_t extent);
Ref refSubarray(const std::vector<int64_t>& sizes, const std::vector<int64_t>& subsizes,
                const std::vector<int64_t>& starts, Order order, const Ref& old);
Ref refDarray(int64_t size, int64_t rank, const std::vector<int64_t>& gsizes, const std::vector<Distribution>& dists,
              const std::vector<int64_t>& dargs, const std::vector<int64_t>& psizes, Order order, const Ref& old);
Ref refBounded(int64_t bound, int64_t blocklen, int64_t stride, const Ref& old);
Ref refCircular(int64_t total, int64_t start, int64_t bound, int64_t blocklen, int64_t stride, const Ref& old);
Ref refBucket(int64_t maxBucket, const std::vector<int64_t>& counts, const Ref& old);

// Byte offsets (relative to the base) of every packed byte of count elements.
std::vector<int64_t> refByteOffsets(const Ref& ref, int64_t count);
// Runs of count elements, adjacent runs merged.
std::vector<Block> refRuns(const Ref& ref, int64_t count);

// A random type: the engine's and the reference's, built from the same choices.
struct RandomType {
  Datatype type;
  Ref ref;
  std::string description;
};

class TypeGenerator {
 public:
  explicit TypeGenerator(uint64_t seed) : rng_(seed) {}
  // A random type nested up to `depth` constructors deep, keeping the type map
  // at most ~maxEntries entries.
  RandomType make(int depth, int64_t maxEntries = 2048);
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  std::mt19937_64& rng() { return rng_; }
  int64_t small(int64_t hi);  // in [1, hi], sometimes 0
  // Constructor calls that failed although their arguments were valid.
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  RandomType leaf();
  std::mt19937_64 rng_;
  std::vector<std::string> errors_;
};

}  // namespace ibdt::datatype::testing
