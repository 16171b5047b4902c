// MPI predefined datatypes -> ibdt basic types, by kind and reported size.
#include "mpi/predefined_types.h"

#include <cstddef>
#include <vector>

namespace ibdt::mpi {
namespace {

using datatype::BasicKind;
using datatype::Datatype;

enum class Kind { kSigned, kUnsigned, kFloating, kComplex, kChar, kByte, kBool, kLogical };

struct Named {
  MPI_Datatype handle;
  Kind kind;
};

// Every predefined name both Open MPI 4.1 and MPICH 4.0 declare. Built at
// run time: Open MPI's handles are addresses, not constants.
const std::vector<Named>& namedTypes() {
  static const std::vector<Named> table = {
      {MPI_CHAR, Kind::kChar}, {MPI_SIGNED_CHAR, Kind::kSigned}, {MPI_UNSIGNED_CHAR, Kind::kUnsigned},
      {MPI_BYTE, Kind::kByte}, {MPI_PACKED, Kind::kByte}, {MPI_WCHAR, Kind::kSigned},
      {MPI_SHORT, Kind::kSigned}, {MPI_UNSIGNED_SHORT, Kind::kUnsigned}, {MPI_INT, Kind::kSigned},
      {MPI_UNSIGNED, Kind::kUnsigned}, {MPI_LONG, Kind::kSigned}, {MPI_UNSIGNED_LONG, Kind::kUnsigned},
      {MPI_LONG_LONG_INT, Kind::kSigned}, {MPI_LONG_LONG, Kind::kSigned},
      {MPI_UNSIGNED_LONG_LONG, Kind::kUnsigned}, {MPI_INT8_T, Kind::kSigned}, {MPI_INT16_T, Kind::kSigned},
      {MPI_INT32_T, Kind::kSigned}, {MPI_INT64_T, Kind::kSigned}, {MPI_UINT8_T, Kind::kUnsigned},
      {MPI_UINT16_T, Kind::kUnsigned}, {MPI_UINT32_T, Kind::kUnsigned}, {MPI_UINT64_T, Kind::kUnsigned},
      {MPI_AINT, Kind::kSigned}, {MPI_OFFSET, Kind::kSigned}, {MPI_COUNT, Kind::kSigned},
      {MPI_FLOAT, Kind::kFloating}, {MPI_DOUBLE, Kind::kFloating}, {MPI_LONG_DOUBLE, Kind::kFloating},
      {MPI_C_BOOL, Kind::kBool}, {MPI_CXX_BOOL, Kind::kBool},
      {MPI_C_COMPLEX, Kind::kComplex}, {MPI_C_FLOAT_COMPLEX, Kind::kComplex},
      {MPI_C_DOUBLE_COMPLEX, Kind::kComplex}, {MPI_C_LONG_DOUBLE_COMPLEX, Kind::kComplex},
      {MPI_CXX_FLOAT_COMPLEX, Kind::kComplex}, {MPI_CXX_DOUBLE_COMPLEX, Kind::kComplex},
      {MPI_CXX_LONG_DOUBLE_COMPLEX, Kind::kComplex},
      // Fortran: present as handles even when Fortran support was not built
      // (then MPI_DATATYPE_NULL or size 0, skipped below).
      {MPI_CHARACTER, Kind::kChar}, {MPI_LOGICAL, Kind::kLogical}, {MPI_INTEGER, Kind::kSigned},
      {MPI_REAL, Kind::kFloating}, {MPI_DOUBLE_PRECISION, Kind::kFloating}, {MPI_COMPLEX, Kind::kComplex},
      {MPI_DOUBLE_COMPLEX, Kind::kComplex}, {MPI_INTEGER1, Kind::kSigned}, {MPI_INTEGER2, Kind::kSigned},
      {MPI_INTEGER4, Kind::kSigned}, {MPI_INTEGER8, Kind::kSigned}, {MPI_REAL4, Kind::kFloating},
      {MPI_REAL8, Kind::kFloating}, {MPI_COMPLEX8, Kind::kComplex}, {MPI_COMPLEX16, Kind::kComplex},
  };
  return table;
}

Result<BasicKind> sizedKind(Kind kind, int size) {
  auto bySize = [size](BasicKind k1, BasicKind k2, BasicKind k4, BasicKind k8) -> Result<BasicKind> {
    switch (size) {
      case 1: return k1;
      case 2: return k2;
      case 4: return k4;
      case 8: return k8;
      default: return makeError(Code::kUnsupported, "mpi: no ", size, "-byte integer basic type");
    }
  };
  switch (kind) {
    case Kind::kSigned:
      return bySize(BasicKind::kInt8, BasicKind::kInt16, BasicKind::kInt32, BasicKind::kInt64);
    case Kind::kUnsigned:
      return bySize(BasicKind::kUint8, BasicKind::kUint16, BasicKind::kUint32, BasicKind::kUint64);
    case Kind::kLogical:
    case Kind::kBool:
      if (size == 1) return BasicKind::kBool;
      return bySize(BasicKind::kInt8, BasicKind::kInt16, BasicKind::kInt32, BasicKind::kInt64);
    case Kind::kChar:
      if (size == 1) return BasicKind::kChar;
      break;
    case Kind::kByte:
      if (size == 1) return BasicKind::kByte;
      break;
    case Kind::kFloating:
      if (size == 4) return BasicKind::kFloat;
      if (size == 8) return BasicKind::kDouble;
      if (size == static_cast<int>(sizeof(long double))) return BasicKind::kLongDouble;
      break;
    case Kind::kComplex:
      if (size == 8) return BasicKind::kFloatComplex;
      if (size == 16) return BasicKind::kDoubleComplex;
      break;
  }
  return makeError(Code::kUnsupported, "mpi: no basic type of ", size, " bytes for this kind");
}

// A scalar of `kind` and `size` bytes; complex long double is two long doubles.
Result<Datatype> sizedType(Kind kind, int size) {
  if (kind == Kind::kComplex && size == 2 * static_cast<int>(sizeof(long double))) {
    return Datatype::contiguous(2, Datatype::basic(BasicKind::kLongDouble));
  }
  IBDT_ASSIGN_OR_RETURN(BasicKind basic, sizedKind(kind, size));
  return Datatype::basic(basic);
}

// The MINLOC/MAXLOC pairs: struct {value; int index;} with C layout.
template <typename Value>
Result<Datatype> pairType() {
  struct Pair {
    Value value;
    int index;
  };
  const int64_t blocklens[] = {1, 1};
  const int64_t displs[] = {offsetof(Pair, value), offsetof(Pair, index)};
  const Datatype types[] = {Datatype::of<Value>(), Datatype::of<int32_t>()};
  IBDT_ASSIGN_OR_RETURN(Datatype pair, Datatype::structType(blocklens, displs, types));
  return Datatype::resized(pair, 0, sizeof(Pair));
}

Result<Datatype> pairTypeOf(MPI_Datatype type) {
  if (type == MPI_FLOAT_INT) return pairType<float>();
  if (type == MPI_DOUBLE_INT) return pairType<double>();
  if (type == MPI_LONG_INT) return pairType<int64_t>();
  if (type == MPI_SHORT_INT) return pairType<int16_t>();
  if (type == MPI_LONG_DOUBLE_INT) return pairType<long double>();
  if (type == MPI_2INT) return Datatype::contiguous(2, Datatype::of<int32_t>());
  return makeError(Code::kUnsupported, "mpi: named datatype not known to ibdt");
}

}  // namespace

Result<Datatype> predefinedType(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return makeError(Code::kInvalidArgument, "mpi: MPI_DATATYPE_NULL");
  for (const Named& named : namedTypes()) {
    if (named.handle != type) continue;
    int size = 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0) break;
    return sizedType(named.kind, size);
  }
  return pairTypeOf(type);
}

Result<Datatype> f90Type(MPI_Datatype type, int combiner) {
  int size = 0;
  if (PMPI_Type_size(type, &size) != MPI_SUCCESS) return makeError(Code::kInvalidArgument, "mpi: bad F90 type");
  if (combiner == MPI_COMBINER_F90_REAL) return sizedType(Kind::kFloating, size);
  if (combiner == MPI_COMBINER_F90_COMPLEX) return sizedType(Kind::kComplex, size);
  return sizedType(Kind::kSigned, size);
}

}  // namespace ibdt::mpi
