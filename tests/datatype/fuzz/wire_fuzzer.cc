// tests/datatype/fuzz/wire_fuzzer.cc — libFuzzer target for the datatype wire
// decoder: any input must decode to a usable layout or give an error, never
// crash, read out of bounds or allocate without bound.
//
//   CXX=clang++ cmake -S . -B build/fuzz -DIBDT_BUILD_FUZZERS=ON
//   cmake --build build/fuzz --target datatype_wire_fuzzer
//   build/fuzz/bin/datatype_wire_fuzzer -max_total_time=60 -rss_limit_mb=512
// With an empty corpus the target seeds itself with blobs of a few types.
#include <cstddef>
#include <cstdint>

#include "../wire_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ibdt::datatype::testing::exerciseBlob({data, size});
  return 0;
}

// From an empty corpus most random bytes fail the magic check, so tiny
// inputs are replaced by a real blob before libFuzzer mutates them.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize, unsigned int seed);
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize, unsigned int seed) {
  using ibdt::datatype::Datatype;
  if (size < 5 && maxSize >= 64) {  // start from a real layout
    const int64_t bl[] = {2, 1, 3}, d[] = {0, 5, 9 + static_cast<int64_t>(seed % 7)};
    auto t = Datatype::indexed(bl, d, Datatype::of<int32_t>());
    if (t.isOk() && t->commit().isOk()) {
      auto blob = ibdt::datatype::serialize(*t);
      if (blob.isOk() && blob->size() <= maxSize) {
        for (size_t i = 0; i < blob->size(); ++i) data[i] = (*blob)[i];
        return blob->size();
      }
    }
  }
  return LLVMFuzzerMutate(data, size, maxSize);
}
