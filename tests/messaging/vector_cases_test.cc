// perf/vector_cases.h: the data check every `ibdt-bench vector` row (ibdt and
// MPI) runs before timing must catch a wrong sent column and a write outside
// the columns.
#include "perf/vector_cases.h"

#include <gtest/gtest.h>

namespace ibdt::perf {
namespace {

// What a correct transfer of x columns from rank 0 leaves in rank 1's array.
std::vector<int32_t> received(int64_t x) {
  std::vector<int32_t> sender, receiver;
  fillVectorPattern(sender, 0);
  fillVectorPattern(receiver, 1);
  for (int64_t r = 0; r < kVectorRows; ++r) {
    for (int64_t c = 0; c < x; ++c) receiver[r * kVectorColumns + c] = sender[r * kVectorColumns + c];
  }
  return receiver;
}

TEST(VectorCases, ACorrectTransferPasses) {
  for (int64_t x : vectorColumnCounts(false)) EXPECT_EQ(checkVectorColumns(received(x), x, 0, 1), "") << x;
}

TEST(VectorCases, AWrongSentIntIsNamed) {
  std::vector<int32_t> array = received(16);
  array[5 * kVectorColumns + 15] += 1;
  const std::string error = checkVectorColumns(array, 16, 0, 1);
  EXPECT_NE(error.find("row 5, column 15"), std::string::npos) << error;
  EXPECT_NE(error.find("sent column"), std::string::npos) << error;
}

TEST(VectorCases, AWriteOutsideTheColumnsIsCaught) {
  std::vector<int32_t> array = received(16);
  array[127 * kVectorColumns + 16] = 0;  // the int just past the last block
  const std::string error = checkVectorColumns(array, 16, 0, 1);
  EXPECT_NE(error.find("row 127, column 16"), std::string::npos) << error;
  EXPECT_NE(error.find("untouched"), std::string::npos) << error;
}

TEST(VectorCases, ContiguousCheck) {
  std::vector<int32_t> packed;
  fillContigPattern(packed, 256, 0);
  EXPECT_EQ(checkContig(packed, 256, 0), "");
  EXPECT_NE(checkContig(packed, 256, 1), "");  // the other rank's values
  packed[kVectorRows * 256 - 1] ^= 1;
  EXPECT_NE(checkContig(packed, 256, 0).find("int 32767"), std::string::npos);
}

}  // namespace
}  // namespace ibdt::perf
