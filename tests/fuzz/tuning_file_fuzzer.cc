// tests/fuzz/tuning_file_fuzzer.cc — the per-host tuning file
// (transport/messaging/tuning_file.cc) is read from the user's cache
// directory, which anything running as the user can write: any text must
// parse or give kInvalidArgument, never throw or crash, and what parses
// must survive serialize -> parse unchanged (so what ibdt-tune writes is
// what a Context reads).
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "transport/messaging/tuning.h"

using ibdt::Code;
using namespace ibdt::messaging;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tuning = parseTuning(text);
  if (!tuning.isOk()) {
    IBDT_FUZZ_CHECK(tuning.status().code() == Code::kInvalidArgument, "parse failed with %s",
                    tuning.status().toString().c_str());
    return 0;
  }
  std::string written = serializeTuning(*tuning);
  auto reread = parseTuning(written);
  IBDT_FUZZ_CHECK(reread.isOk(), "a parsed file does not parse once written: %s", reread.status().toString().c_str());
  IBDT_FUZZ_CHECK(serializeTuning(*reread) == written, "serialize -> parse -> serialize changed the file");
  IBDT_FUZZ_CHECK(
      reread->key == tuning->key && reread->minBytes == tuning->minBytes && reread->maxBytes == tuning->maxBytes,
      "the host key or measured range changed");
  return 0;
}
