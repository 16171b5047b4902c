// One level of an MPI datatype -> the ibdt constructor with the same
// arguments, by MPI_Type_get_contents (MPI-3.1 section 4.1.13).
#include "mpi/type_convert.h"

#include <vector>

#include "mpi/predefined_types.h"

namespace ibdt::mpi {
namespace {

using datatype::Datatype;

// What MPI_Type_get_contents returned, with the derived inner handles freed
// at the end (the standard makes them new handles the caller owns).
struct Contents {
  std::vector<int> ints;
  std::vector<MPI_Aint> addrs;
  std::vector<MPI_Datatype> types;

  ~Contents() {
    for (MPI_Datatype& inner : types) {
      int ni = 0, na = 0, nt = 0, combiner = 0;
      PMPI_Type_get_envelope(inner, &ni, &na, &nt, &combiner);
      const bool predefined = combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
                              combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER;
      if (!predefined) PMPI_Type_free(&inner);
    }
  }
  std::vector<int64_t> intRange(size_t first, size_t count) const {
    return {ints.begin() + static_cast<ptrdiff_t>(first), ints.begin() + static_cast<ptrdiff_t>(first + count)};
  }
  std::vector<int64_t> addrRange(size_t first, size_t count) const {
    return {addrs.begin() + static_cast<ptrdiff_t>(first), addrs.begin() + static_cast<ptrdiff_t>(first + count)};
  }
};

Status readContents(MPI_Datatype type, int ni, int na, int nt, Contents& out) {
  out.ints.resize(static_cast<size_t>(ni));
  out.addrs.resize(static_cast<size_t>(na));
  std::vector<MPI_Datatype> types(static_cast<size_t>(nt));
  if (PMPI_Type_get_contents(type, ni, na, nt, out.ints.data(), out.addrs.data(), types.data()) != MPI_SUCCESS) {
    return makeError(Code::kInvalidArgument, "mpi: MPI_Type_get_contents failed");
  }
  out.types = std::move(types);
  return Status::ok();
}

Result<datatype::Order> orderOf(int order) {
  if (order == MPI_ORDER_C) return datatype::Order::kC;
  if (order == MPI_ORDER_FORTRAN) return datatype::Order::kFortran;
  return makeError(Code::kInvalidArgument, "mpi: unknown array order ", order);
}

Result<Datatype> subarrayOf(const Contents& c, const Datatype& old) {
  const size_t n = static_cast<size_t>(c.ints[0]);
  IBDT_ASSIGN_OR_RETURN(datatype::Order order, orderOf(c.ints[1 + 3 * n]));
  return Datatype::subarray(c.intRange(1, n), c.intRange(1 + n, n), c.intRange(1 + 2 * n, n), order, old);
}

Result<Datatype> darrayOf(const Contents& c, const Datatype& old) {
  const size_t n = static_cast<size_t>(c.ints[2]);
  std::vector<datatype::Distribution> distribs;
  std::vector<int64_t> dargs;
  for (size_t d = 0; d < n; ++d) {
    const int distrib = c.ints[3 + n + d];
    if (distrib == MPI_DISTRIBUTE_BLOCK) {
      distribs.push_back(datatype::Distribution::kBlock);
    } else if (distrib == MPI_DISTRIBUTE_CYCLIC) {
      distribs.push_back(datatype::Distribution::kCyclic);
    } else if (distrib == MPI_DISTRIBUTE_NONE) {
      distribs.push_back(datatype::Distribution::kNone);
    } else {
      return makeError(Code::kInvalidArgument, "mpi: unknown darray distribution ", distrib);
    }
    const int darg = c.ints[3 + 2 * n + d];
    dargs.push_back(darg == MPI_DISTRIBUTE_DFLT_DARG ? datatype::kDefaultDistArg : darg);
  }
  IBDT_ASSIGN_OR_RETURN(datatype::Order order, orderOf(c.ints[3 + 4 * n]));
  return Datatype::darray(c.ints[0], c.ints[1], c.intRange(3, n), distribs, dargs, c.intRange(3 + 3 * n, n), order,
                          old);
}

Result<Datatype> structOf(const Contents& c, const InnerConverter& inner) {
  const size_t n = static_cast<size_t>(c.ints[0]);
  std::vector<Datatype> members;
  for (MPI_Datatype member : c.types) {
    IBDT_ASSIGN_OR_RETURN(Datatype converted, inner(member));
    members.push_back(std::move(converted));
  }
  return Datatype::structType(c.intRange(1, n), c.addrRange(0, n), members);
}

// The constructor named by `combiner`, from its contents.
Result<Datatype> build(int combiner, const Contents& c, const InnerConverter& inner) {
  if (combiner == MPI_COMBINER_STRUCT) return structOf(c, inner);
  if (c.types.size() != 1) return makeError(Code::kUnsupported, "mpi: combiner ", combiner, " is not supported");
  IBDT_ASSIGN_OR_RETURN(Datatype old, inner(c.types[0]));
  const size_t n = c.ints.empty() ? 0 : static_cast<size_t>(c.ints[0]);
  switch (combiner) {
    case MPI_COMBINER_DUP: return Datatype::dup(old);
    case MPI_COMBINER_CONTIGUOUS: return Datatype::contiguous(c.ints[0], old);
    case MPI_COMBINER_VECTOR: return Datatype::vector(c.ints[0], c.ints[1], c.ints[2], old);
    case MPI_COMBINER_HVECTOR: return Datatype::hvector(c.ints[0], c.ints[1], c.addrs[0], old);
    case MPI_COMBINER_INDEXED: return Datatype::indexed(c.intRange(1, n), c.intRange(1 + n, n), old);
    case MPI_COMBINER_HINDEXED: return Datatype::hindexed(c.intRange(1, n), c.addrRange(0, n), old);
    case MPI_COMBINER_INDEXED_BLOCK: return Datatype::indexedBlock(c.ints[1], c.intRange(2, n), old);
    case MPI_COMBINER_HINDEXED_BLOCK: return Datatype::hindexedBlock(c.ints[1], c.addrRange(0, n), old);
    case MPI_COMBINER_RESIZED: return Datatype::resized(old, c.addrs[0], c.addrs[1]);
    case MPI_COMBINER_SUBARRAY: return subarrayOf(c, old);
    case MPI_COMBINER_DARRAY: return darrayOf(c, old);
    default: return makeError(Code::kUnsupported, "mpi: combiner ", combiner, " is not supported");
  }
}

// Makes `converted` agree with MPI's view of `type`: equal size, or the
// conversion is wrong; MPI's lb and extent where ibdt's bounds rule differs.
Result<Datatype> matchBounds(MPI_Datatype type, Datatype converted) {
  MPI_Count size = 0, lb = 0, extent = 0;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS) {
    return makeError(Code::kInvalidArgument, "mpi: MPI rejects the datatype handle");
  }
  if (converted.size() != size) {
    return makeError(Code::kInternal, "mpi: converted type has ", converted.size(), " bytes, MPI says ", size);
  }
  if (converted.lb() == lb && converted.extent() == extent) return converted;
  if (extent < 0) {
    // ibdt's resized takes extent >= 0; a negative extent stays as built
    // only when the conversion already produced it (checked above).
    return makeError(Code::kUnsupported, "mpi: negative extent ", extent, " that ibdt's bounds do not reproduce");
  }
  return Datatype::resized(converted, lb, extent);
}

}  // namespace

Result<Datatype> convertLevel(MPI_Datatype type, const InnerConverter& inner) {
  if (type == MPI_DATATYPE_NULL) return makeError(Code::kInvalidArgument, "mpi: MPI_DATATYPE_NULL");
  int ni = 0, na = 0, nt = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nt, &combiner) != MPI_SUCCESS) {
    return makeError(Code::kInvalidArgument, "mpi: MPI_Type_get_envelope rejects the datatype handle");
  }
  if (combiner == MPI_COMBINER_NAMED) return predefinedType(type);
  if (combiner == MPI_COMBINER_F90_REAL || combiner == MPI_COMBINER_F90_COMPLEX ||
      combiner == MPI_COMBINER_F90_INTEGER) {
    return f90Type(type, combiner);
  }
  Contents contents;
  IBDT_RETURN_IF_ERROR(readContents(type, ni, na, nt, contents));
  IBDT_ASSIGN_OR_RETURN(Datatype built, build(combiner, contents, inner));
  return matchBounds(type, std::move(built));
}

Result<Datatype> signatureType(MPI_Datatype type) {
  Result<Datatype> converted = convertType(type);
  if (converted.isOk() || type == MPI_DATATYPE_NULL) return converted;
  int ni = 0, na = 0, nt = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nt, &combiner) != MPI_SUCCESS || combiner == MPI_COMBINER_NAMED ||
      combiner == MPI_COMBINER_F90_REAL || combiner == MPI_COMBINER_F90_COMPLEX ||
      combiner == MPI_COMBINER_F90_INTEGER) {
    return converted;  // no basic type of that kind and size: no signature either
  }
  Contents contents;
  IBDT_RETURN_IF_ERROR(readContents(type, ni, na, nt, contents));
  // Resizing never changes a signature; any other level is rebuilt on its
  // inner types' signatures (the bounds are irrelevant here).
  if (combiner == MPI_COMBINER_RESIZED) return signatureType(contents.types[0]);
  IBDT_ASSIGN_OR_RETURN(Datatype built, build(combiner, contents, signatureType));
  MPI_Count size = 0;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || built.size() != size) {
    return makeError(Code::kInternal, "mpi: the signature of a datatype has ", built.size(), " bytes, MPI says ",
                     size);
  }
  return built;
}

}  // namespace ibdt::mpi
