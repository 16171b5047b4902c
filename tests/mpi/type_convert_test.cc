// The MPI datatype bridge against the MPI library itself (run once per MPI,
// as a singleton): every combiner and nesting converts to an ibdt type with
// MPI's size, bounds and type map order, and IBDT_Pack/IBDT_Unpack give
// exactly MPI_Pack's/MPI_Unpack's bytes, for hand-written types and for
// thousands of random ones built through the MPI constructors; a freed type
// whose handle is reused is converted afresh. Bad arguments get MPI's error
// classes and write nothing.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <vector>

#include "ibdt_mpi.h"
#include "mpi/type_convert.h"
#include "mpi_type_generator.h"

namespace ibdt::mpi {
namespace {

using testing::MpiTypeGenerator;
using testing::TypedBuffer;

// Packs count x type with MPI and with ibdt (after `offset` leading bytes)
// and unpacks the packed bytes back with both; empty when all agree.
std::string comparePack(MPI_Datatype type, int count, uint32_t seed) {
  TypedBuffer in(type, count, seed);
  int size = 0, ourSize = 0;
  PMPI_Pack_size(count, type, MPI_COMM_WORLD, &size);
  if (IBDT_Pack_size(count, type, MPI_COMM_WORLD, &ourSize) != MPI_SUCCESS || ourSize > size) {
    return "IBDT_Pack_size " + std::to_string(ourSize) + " vs MPI " + std::to_string(size);
  }
  const int offset = 3;
  std::vector<char> theirs(static_cast<size_t>(size + offset), 'x'), ours = theirs;
  int theirPosition = offset, ourPosition = offset;
  PMPI_Pack(in.base(), count, type, theirs.data(), size + offset, &theirPosition, MPI_COMM_WORLD);
  if (int rc = IBDT_Pack(in.base(), count, type, ours.data(), size + offset, &ourPosition, MPI_COMM_WORLD);
      rc != MPI_SUCCESS) {
    return "IBDT_Pack failed with " + std::to_string(rc);
  }
  if (ourPosition != theirPosition) return "positions " + std::to_string(ourPosition) + " vs " + std::to_string(theirPosition);
  if (ours != theirs) return "packed bytes differ";
  TypedBuffer theirOut(type, count, seed + 1), ourOut(type, count, seed + 1);
  theirPosition = ourPosition = offset;
  PMPI_Unpack(theirs.data(), size + offset, &theirPosition, theirOut.base(), count, type, MPI_COMM_WORLD);
  if (IBDT_Unpack(ours.data(), size + offset, &ourPosition, ourOut.base(), count, type, MPI_COMM_WORLD) !=
      MPI_SUCCESS) {
    return "IBDT_Unpack failed";
  }
  if (ourPosition != theirPosition) return "unpack positions differ";
  if (ourOut.bytes() != theirOut.bytes()) return "unpacked bytes differ";
  return "";
}

// The conversion agrees with MPI on size, lb and extent, and packs MPI's bytes.
void expectSameAsMpi(MPI_Datatype type, const char* what, int count = 3) {
  SCOPED_TRACE(what);
  auto converted = convertType(type);
  ASSERT_TRUE(converted.isOk()) << converted.status().toString();
  MPI_Count size = 0, lb = 0, extent = 0;
  MPI_Type_size_x(type, &size);
  MPI_Type_get_extent_x(type, &lb, &extent);
  EXPECT_EQ(converted->size(), size);
  EXPECT_EQ(converted->lb(), lb);
  EXPECT_EQ(converted->extent(), extent);
  EXPECT_EQ(comparePack(type, count, 7), "");
}

// Commits `type`, checks it, frees it.
void checkAndFree(MPI_Datatype type, const char* what) {
  MPI_Type_commit(&type);
  expectSameAsMpi(type, what);
  MPI_Type_free(&type);
}

TEST(MpiTypeConvert, PredefinedTypesBySizeAndKind) {
  const MPI_Datatype types[] = {MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_PACKED, MPI_WCHAR,
                                MPI_SHORT, MPI_INT, MPI_LONG, MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG, MPI_INT8_T,
                                MPI_UINT64_T, MPI_AINT, MPI_OFFSET, MPI_COUNT, MPI_FLOAT, MPI_DOUBLE,
                                MPI_LONG_DOUBLE, MPI_C_BOOL, MPI_CXX_BOOL, MPI_C_FLOAT_COMPLEX,
                                MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX, MPI_FLOAT_INT, MPI_DOUBLE_INT,
                                MPI_LONG_INT, MPI_SHORT_INT, MPI_2INT, MPI_LONG_DOUBLE_INT, MPI_INTEGER,
                                MPI_REAL, MPI_DOUBLE_PRECISION, MPI_COMPLEX, MPI_LOGICAL, MPI_CHARACTER};
  int index = 0;
  for (MPI_Datatype type : types) {
    const std::string what = "predefined #" + std::to_string(index++);
    expectSameAsMpi(type, what.c_str());
  }
  EXPECT_EQ(convertType(MPI_DOUBLE)->size(), 8);
  EXPECT_EQ(convertType(MPI_DATATYPE_NULL).status().code(), Code::kInvalidArgument);
}

TEST(MpiTypeConvert, F90Types) {
  MPI_Datatype real = MPI_DATATYPE_NULL, complex = MPI_DATATYPE_NULL, integer = MPI_DATATYPE_NULL;
  if (MPI_Type_create_f90_real(15, MPI_UNDEFINED, &real) != MPI_SUCCESS ||
      MPI_Type_create_f90_complex(6, MPI_UNDEFINED, &complex) != MPI_SUCCESS ||
      MPI_Type_create_f90_integer(9, &integer) != MPI_SUCCESS) {
    GTEST_SKIP() << "this MPI has no F90 parameterised types";
  }
  expectSameAsMpi(real, "f90 real");
  expectSameAsMpi(complex, "f90 complex");
  expectSameAsMpi(integer, "f90 integer");
  MPI_Datatype vector;
  MPI_Type_vector(3, 1, 2, real, &vector);
  checkAndFree(vector, "vector of f90 real");
}

TEST(MpiTypeConvert, EveryCombiner) {
  MPI_Datatype t;
  MPI_Type_dup(MPI_INT, &t), checkAndFree(t, "dup");
  MPI_Type_contiguous(5, MPI_DOUBLE, &t), checkAndFree(t, "contiguous");
  MPI_Type_vector(4, 2, 3, MPI_INT, &t), checkAndFree(t, "vector");
  MPI_Type_vector(4, 1, -2, MPI_DOUBLE, &t), checkAndFree(t, "vector, negative stride");
  MPI_Type_create_hvector(3, 2, 20, MPI_SHORT, &t), checkAndFree(t, "hvector");
  const int blens[] = {2, 0, 3}, displs[] = {5, 1, -2};
  const MPI_Aint bytes[] = {40, 0, -24};
  MPI_Type_indexed(3, blens, displs, MPI_FLOAT, &t), checkAndFree(t, "indexed");
  MPI_Type_create_hindexed(3, blens, bytes, MPI_DOUBLE, &t), checkAndFree(t, "hindexed");
  MPI_Type_create_indexed_block(3, 2, displs, MPI_INT, &t), checkAndFree(t, "indexed_block");
  MPI_Type_create_hindexed_block(3, 1, bytes, MPI_LONG, &t), checkAndFree(t, "hindexed_block");
  const MPI_Datatype members[] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT};
  const MPI_Aint structDispls[] = {0, 8, 20};
  const int structBlens[] = {3, 1, 1};
  MPI_Type_create_struct(3, structBlens, structDispls, members, &t), checkAndFree(t, "struct, padded ub");
  MPI_Type_create_resized(MPI_INT, -8, 24, &t), checkAndFree(t, "resized");
  const int sizes[] = {6, 5, 4}, subsizes[] = {2, 3, 2}, starts[] = {1, 2, 0};
  MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &t), checkAndFree(t, "subarray C");
  MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_INT, &t);
  checkAndFree(t, "subarray Fortran");
  const int gsizes[] = {9, 7}, distribs[] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK};
  const int dargs[] = {2, MPI_DISTRIBUTE_DFLT_DARG}, psizes[] = {2, 3};
  for (int rank = 0; rank < 6; ++rank) {
    MPI_Type_create_darray(6, rank, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t);
    checkAndFree(t, "darray C");
    MPI_Type_create_darray(6, rank, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_FORTRAN, MPI_DOUBLE, &t);
    checkAndFree(t, "darray Fortran");
  }
}

TEST(MpiTypeConvert, NestingAndResizedInsideStruct) {
  MPI_Datatype column, resized, face;
  MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &column);
  MPI_Type_create_resized(column, -16, 8, &resized);  // negative lb, columns interleave
  MPI_Type_contiguous(3, resized, &face);
  const MPI_Datatype members[] = {face, MPI_CHAR, resized};
  const int blens[] = {1, 2, 2};
  const MPI_Aint displs[] = {0, 300, -40};
  MPI_Datatype outer;
  MPI_Type_create_struct(3, blens, displs, members, &outer);
  MPI_Type_commit(&outer);
  expectSameAsMpi(outer, "struct of resized vectors");
  for (MPI_Datatype* t : {&column, &resized, &face, &outer}) MPI_Type_free(t);
}

TEST(MpiTypeConvert, NegativeExtentIsPackedByMpi) {
  MPI_Datatype negative;
  MPI_Type_create_resized(MPI_INT, 0, -8, &negative);
  MPI_Type_commit(&negative);
  EXPECT_FALSE(convertType(negative).isOk());
  EXPECT_EQ(comparePack(negative, 3, 11), "");  // handed to PMPI_Pack, same bytes
  MPI_Type_free(&negative);
}

// The signature of a type whose layout ibdt cannot express (the MPI bridge
// stages such a side of an alltoall through PMPI_Pack): a struct of an int
// and a double around contiguous(2) of a backwards vector of shorts.
TEST(MpiTypeConvert, SignatureOfNegativeExtentType) {
  MPI_Datatype shorts, backwards, pair, outer;
  MPI_Type_vector(3, 1, 2, MPI_SHORT, &shorts);
  MPI_Type_create_resized(shorts, 0, -12, &backwards);
  MPI_Type_contiguous(2, backwards, &pair);
  const int blocks[3] = {1, 1, 1};
  const MPI_Aint displs[3] = {0, 8, 40};
  const MPI_Datatype types[3] = {MPI_INT, pair, MPI_DOUBLE};
  MPI_Type_create_struct(3, blocks, displs, types, &outer);
  MPI_Type_commit(&outer);
  EXPECT_FALSE(convertType(outer).isOk());
  auto signature = signatureType(outer);
  ASSERT_TRUE(signature.isOk()) << signature.status().toString();
  EXPECT_EQ(signature->size(), 4 + 6 * 2 + 8);
  // Its basic types in order: int, six shorts, double.
  using ibdt::datatype::BasicKind;
  auto map = ibdt::datatype::typeMap(*signature);
  ASSERT_TRUE(map.isOk());
  ASSERT_EQ(map->size(), 8u);
  EXPECT_EQ(map->front().kind, BasicKind::kInt32);
  EXPECT_EQ(map->back().kind, BasicKind::kDouble);
  for (size_t i = 1; i < 7; ++i) EXPECT_EQ((*map)[i].kind, BasicKind::kInt16) << i;
  for (MPI_Datatype* t : {&shorts, &backwards, &pair, &outer}) MPI_Type_free(t);
}

TEST(MpiTypeConvert, FreedHandleReusedIsConvertedAfresh) {
  for (int round = 0; round < 20; ++round) {
    MPI_Datatype t;
    MPI_Type_vector(2 + round, 1, 3 + round % 4, round % 2 ? MPI_INT : MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    auto converted = convertType(t);
    ASSERT_TRUE(converted.isOk());
    int size = 0;
    MPI_Type_size(t, &size);
    EXPECT_EQ(converted->size(), size) << "round " << round;
    EXPECT_EQ(comparePack(t, 2, static_cast<uint32_t>(round)), "") << "round " << round;
    MPI_Type_free(&t);
  }
}

// IBDT_Pack keeps each thread's last (handle, count) segment (mpi/type_convert.h):
// a changed count, another live type, or a type freed and recreated on the
// same handle between calls must each pack and unpack MPI's bytes.
TEST(MpiTypeConvert, RepeatedPacksFollowCountsAndFreedTypes) {
  MPI_Datatype a, other;
  MPI_Type_vector(4, 1, 3, MPI_INT, &a);
  MPI_Type_create_resized(MPI_DOUBLE, 0, 24, &other);
  MPI_Type_commit(&a);
  MPI_Type_commit(&other);
  const int counts[] = {3, 3, 5, 3, 1, 0, 3};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(comparePack(a, counts[i], static_cast<uint32_t>(i)), "") << "count " << counts[i];
    EXPECT_EQ(comparePack(a, counts[i], static_cast<uint32_t>(i + 50)), "") << "count " << counts[i] << " again";
    if (i % 2) {
      EXPECT_EQ(comparePack(other, counts[i], static_cast<uint32_t>(i)), "") << "the other type";
    }
  }
  int reused = 0;
  for (int round = 0; round < 10; ++round) {
    const MPI_Datatype freed = a;
    MPI_Type_free(&a);
    // Same count, another layout (block length and stride), often on the freed handle.
    MPI_Type_vector(4, 1 + round % 3, 5 + round, round % 2 ? MPI_INT : MPI_SHORT, &a);
    MPI_Type_commit(&a);
    reused += a == freed;
    EXPECT_EQ(comparePack(a, 3, static_cast<uint32_t>(round)), "") << "round " << round;
    EXPECT_EQ(comparePack(a, 3, static_cast<uint32_t>(round + 100)), "") << "round " << round << " again";
  }
  RecordProperty("handles_reused", reused);  // Open MPI reuses the handle: the case the check exists for
  MPI_Type_free(&a);
  MPI_Type_free(&other);
}

TEST(MpiTypeConvert, RandomTypesPackLikeMpi) {
  MpiTypeGenerator generator(20261124);
  for (int i = 0; i < 3000; ++i) {
    testing::MpiType random = generator.make(3);
    int size = 0;
    MPI_Type_size(random.type, &size);
    if (size == 0) {  // MPICH's MPI_Unpack divides by the size: check ibdt alone
      int position = 5;
      char out[8];
      EXPECT_EQ(IBDT_Pack(nullptr, 2, random.type, out, 8, &position, MPI_COMM_WORLD), MPI_SUCCESS);
      EXPECT_EQ(position, 5);
    } else if (size <= 1 << 20) {
      const std::string problem = comparePack(random.type, 1 + i % 3, static_cast<uint32_t>(i));
      ASSERT_EQ(problem, "") << "type #" << i << ": " << random.description;
    }
    MPI_Type_free(&random.type);
  }
}

TEST(MpiTypeConvert, AbsoluteAddressesFromMpiBottom) {
  double values[3] = {1.5, 2.5, 3.5};
  int index = 42;
  MPI_Aint addresses[2];
  MPI_Get_address(&values[0], &addresses[0]);
  MPI_Get_address(&index, &addresses[1]);
  const int blens[] = {3, 1};
  const MPI_Datatype members[] = {MPI_DOUBLE, MPI_INT};
  MPI_Datatype absolute;
  MPI_Type_create_struct(2, blens, addresses, members, &absolute);
  MPI_Type_commit(&absolute);
  // The expected bytes by hand: MPICH 4.0's MPI_Pack rejects MPI_BOTTOM.
  char expected[28], ours[28] = {};
  std::memcpy(expected, values, 24);
  std::memcpy(expected + 24, &index, 4);
  int ourPosition = 0;
  ASSERT_EQ(IBDT_Pack(MPI_BOTTOM, 1, absolute, ours, 28, &ourPosition, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(ourPosition, 28);
  EXPECT_EQ(std::memcmp(ours, expected, 28), 0);
  values[1] = 0;
  index = 0;
  ourPosition = 0;
  ASSERT_EQ(IBDT_Unpack(ours, 28, &ourPosition, MPI_BOTTOM, 1, absolute, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(values[1], 2.5);
  EXPECT_EQ(index, 42);
  MPI_Type_free(&absolute);
}

TEST(MpiTypeConvert, BadArgumentsGetMpiErrorsAndWriteNothing) {
  std::vector<char> out(16, 'z');
  const std::vector<char> untouched = out;
  double in[4] = {1, 2, 3, 4};
  int position = 0;
  EXPECT_EQ(IBDT_Pack(in, 4, MPI_DOUBLE, out.data(), 16, &position, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
  EXPECT_EQ(IBDT_Pack(in, -1, MPI_DOUBLE, out.data(), 16, &position, MPI_COMM_WORLD), MPI_ERR_COUNT);
  EXPECT_EQ(IBDT_Pack(in, 1, MPI_DATATYPE_NULL, out.data(), 16, &position, MPI_COMM_WORLD), MPI_ERR_TYPE);
  EXPECT_EQ(IBDT_Pack(in, 1, MPI_DOUBLE, out.data(), 16, &position, MPI_COMM_NULL), MPI_ERR_COMM);
  EXPECT_EQ(IBDT_Pack(in, 1, MPI_DOUBLE, out.data(), 16, nullptr, MPI_COMM_WORLD), MPI_ERR_ARG);
  position = 12;
  EXPECT_EQ(IBDT_Pack(in, 1, MPI_DOUBLE, out.data(), 16, &position, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
  EXPECT_EQ(position, 12);
  EXPECT_EQ(out, untouched);
  double back[4] = {};
  position = 0;
  EXPECT_EQ(IBDT_Unpack(out.data(), 16, &position, back, 3, MPI_DOUBLE, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
  EXPECT_EQ(position, 0);
  EXPECT_EQ(back[0], 0.0);
  int size = 0;
  EXPECT_EQ(IBDT_Pack_size(-2, MPI_INT, MPI_COMM_WORLD, &size), MPI_ERR_COUNT);
  EXPECT_EQ(IBDT_Pack_size(2, MPI_INT, MPI_COMM_WORLD, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(IBDT_Unpack(nullptr, 16, &position, back, 1, MPI_DOUBLE, MPI_COMM_WORLD), MPI_ERR_BUFFER);
  EXPECT_EQ(IBDT_Unpack(out.data(), 16, &position, back, -1, MPI_DOUBLE, MPI_COMM_WORLD), MPI_ERR_COUNT);
  EXPECT_EQ(IBDT_Pack(in, 1, MPI_DOUBLE, nullptr, 16, &position, MPI_COMM_WORLD), MPI_ERR_BUFFER);
}

}  // namespace
}  // namespace ibdt::mpi
