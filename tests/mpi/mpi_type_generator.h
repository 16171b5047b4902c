// tests/mpi/mpi_type_generator.h — random MPI datatypes built through the
// MPI constructors from a seed (the same types on every run and rank), and
// a typed buffer that holds `count` of them with guard bytes around.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ibdt::mpi::testing {

struct MpiType {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::string description;
};

class MpiTypeGenerator {
 public:
  explicit MpiTypeGenerator(uint64_t seed) : rng_(seed) {}

  // A committed random type nested up to `depth` constructors; free it with
  // MPI_Type_free. Negative strides and displacements included.
  MpiType make(int depth) {
    MpiType t = build(depth);
    MPI_Type_commit(&t.type);
    return t;
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  MpiType leaf() {
    static const MPI_Datatype kinds[] = {MPI_CHAR, MPI_SHORT, MPI_INT, MPI_DOUBLE, MPI_FLOAT, MPI_LONG_LONG,
                                         MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_DOUBLE_INT, MPI_C_DOUBLE_COMPLEX};
    static const char* names[] = {"char", "short", "int", "double", "float", "long long", "uchar", "byte",
                                  "double_int", "dcomplex"};
    const int k = uniform(0, 9);
    MpiType t{MPI_DATATYPE_NULL, names[k]};
    MPI_Type_dup(kinds[k], &t.type);  // every level owns its handle
    return t;
  }

  MpiType build(int depth) {
    if (depth == 0 || uniform(0, 4) == 0) return leaf();
    MpiType inner = build(depth - 1);
    MpiType out;
    const int n = uniform(1, 4);
    std::vector<int> blens(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
    std::vector<MPI_Aint> bytes(static_cast<size_t>(n));
    MPI_Aint lb = 0, extent = 0;
    MPI_Type_get_extent(inner.type, &lb, &extent);
    for (int i = 0; i < n; ++i) {
      blens[static_cast<size_t>(i)] = uniform(0, 3);
      displs[static_cast<size_t>(i)] = uniform(-4, 12);
      bytes[static_cast<size_t>(i)] = uniform(-40, 200);
    }
    const std::string of = "(" + inner.description + ")";
    switch (uniform(0, 11)) {
      case 0: MPI_Type_contiguous(n, inner.type, &out.type); out.description = "contig" + of; break;
      // Strides never make blocks overlap: Open MPI 4.1 packs overlapping
      // negative-stride vectors against their type map (docs/mpi.md).
      case 1: {
        const int blocklen = uniform(1, 3), stride = uniform(blocklen, 5) * (uniform(0, 2) ? 1 : -1);
        MPI_Type_vector(n, blocklen, stride, inner.type, &out.type);
        out.description = "vector" + of;
        break;
      }
      case 2: {
        const int blocklen = uniform(1, 2);
        const MPI_Aint stride = (blocklen * std::max<MPI_Aint>(extent, 1) + uniform(0, 64)) * (uniform(0, 2) ? 1 : -1);
        MPI_Type_create_hvector(n, blocklen, stride, inner.type, &out.type);
        out.description = "hvector" + of;
        break;
      }
      case 3: MPI_Type_indexed(n, blens.data(), displs.data(), inner.type, &out.type); out.description = "indexed" + of; break;
      case 4: MPI_Type_create_hindexed(n, blens.data(), bytes.data(), inner.type, &out.type); out.description = "hindexed" + of; break;
      case 5: MPI_Type_create_indexed_block(n, uniform(0, 2), displs.data(), inner.type, &out.type); out.description = "indexed_block" + of; break;
      case 6: MPI_Type_create_hindexed_block(n, uniform(0, 2), bytes.data(), inner.type, &out.type); out.description = "hindexed_block" + of; break;
      case 7: {
        MpiType second = leaf();
        const MPI_Datatype types[] = {inner.type, second.type, inner.type, second.type};
        MPI_Type_create_struct(n, blens.data(), bytes.data(), types, &out.type);
        out.description = "struct" + of + "(" + second.description + ")";
        MPI_Type_free(&second.type);
        break;
      }
      case 8: MPI_Type_create_resized(inner.type, uniform(-16, 16), extent + uniform(0, 24), &out.type); out.description = "resized" + of; break;
      case 9: {
        const int sizes[] = {uniform(1, 4), uniform(1, 4)};
        const int subsizes[] = {uniform(1, sizes[0]), uniform(1, sizes[1])};
        const int starts[] = {uniform(0, sizes[0] - subsizes[0]), uniform(0, sizes[1] - subsizes[1])};
        MPI_Type_create_subarray(2, sizes, subsizes, starts, uniform(0, 1) ? MPI_ORDER_C : MPI_ORDER_FORTRAN,
                                 inner.type, &out.type);
        out.description = "subarray" + of;
        break;
      }
      case 10: {
        const int gsizes[] = {uniform(2, 6), uniform(1, 5)}, psizes[] = {2, 1};
        const int distribs[] = {uniform(0, 1) ? MPI_DISTRIBUTE_BLOCK : MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE};
        const int dargs[] = {distribs[0] == MPI_DISTRIBUTE_CYCLIC && uniform(0, 1) ? 1 : MPI_DISTRIBUTE_DFLT_DARG,
                             MPI_DISTRIBUTE_DFLT_DARG};
        // Of a leaf: Open MPI rejects darrays of some derived types MPICH takes.
        MpiType element = leaf();
        MPI_Type_create_darray(2, uniform(0, 1), 2, gsizes, distribs, dargs, psizes,
                               uniform(0, 1) ? MPI_ORDER_C : MPI_ORDER_FORTRAN, element.type, &out.type);
        out.description = "darray(" + element.description + ")";
        MPI_Type_free(&element.type);
        break;
      }
      default: MPI_Type_dup(inner.type, &out.type); out.description = "dup" + of; break;
    }
    MPI_Type_free(&inner.type);
    return out;
  }

  std::mt19937_64 rng_;
};

// Memory for `count` elements of `type`: the span MPI's true bounds give,
// filled with a pattern; base() is where element 0 starts.
class TypedBuffer {
 public:
  TypedBuffer(MPI_Datatype type, int count, uint32_t seed) {
    MPI_Aint lb = 0, extent = 0, trueLb = 0, trueExtent = 0;
    MPI_Type_get_extent(type, &lb, &extent);
    MPI_Type_get_true_extent(type, &trueLb, &trueExtent);
    const MPI_Aint last = (count - 1) * extent;
    lowest_ = std::min<MPI_Aint>(trueLb, trueLb + last) - kGuard;
    const MPI_Aint highest = std::max<MPI_Aint>(trueLb + trueExtent, trueLb + trueExtent + last) + kGuard;
    bytes_.resize(static_cast<size_t>(highest - lowest_));
    std::mt19937 rng(seed);
    for (auto& b : bytes_) b = static_cast<char>(rng());
  }
  char* base() { return bytes_.data() - lowest_; }
  const std::vector<char>& bytes() const { return bytes_; }

 private:
  static constexpr MPI_Aint kGuard = 16;
  MPI_Aint lowest_ = 0;
  std::vector<char> bytes_;
};

}  // namespace ibdt::mpi::testing
