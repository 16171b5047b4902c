// datatype/basic.cc — the predefined types.
#include <array>
#include <complex>
#include <cstddef>

#include "datatype/type_impl.h"

namespace ibdt::datatype {
namespace {

struct BasicInfo {
  const char* name;
  int64_t size;
  int64_t alignment;
};

template <typename T>
constexpr BasicInfo info(const char* name) {
  return {name, static_cast<int64_t>(sizeof(T)), static_cast<int64_t>(alignof(T))};
}

// Indexed by BasicKind value; entry 0 is unused.
constexpr std::array<BasicInfo, kBasicKindCount + 1> kBasics = {{
    {"invalid", 0, 1},
    info<std::byte>("byte"),
    info<char>("char"),
    info<bool>("bool"),
    info<int8_t>("int8"),
    info<int16_t>("int16"),
    info<int32_t>("int32"),
    info<int64_t>("int64"),
    info<uint8_t>("uint8"),
    info<uint16_t>("uint16"),
    info<uint32_t>("uint32"),
    info<uint64_t>("uint64"),
    info<float>("float"),
    info<double>("double"),
    info<long double>("long double"),
    info<std::complex<float>>("float complex"),
    info<std::complex<double>>("double complex"),
}};

bool validKind(BasicKind kind) {
  const int k = static_cast<int>(kind);
  return k >= 1 && k <= kBasicKindCount;
}

Datatype makeBasic(BasicKind kind) {
  auto impl = std::make_shared<TypeImpl>();
  const BasicInfo& b = kBasics[static_cast<size_t>(kind)];
  impl->form = Form::kBasic;
  impl->basic = kind;
  impl->size = b.size;
  impl->ub = b.size;
  impl->trueUb = b.size;
  impl->hasBounds = true;
  impl->alignment = b.alignment;
  impl->signature = sigBasic(kind);
  impl->homogeneous = static_cast<int>(kind);
  impl->program = makeRun(b.size, 0);
  std::call_once(impl->compileOnce, [] {});
  impl->committed.store(true, std::memory_order_release);
  return Datatype(std::shared_ptr<const TypeImpl>(std::move(impl)));
}

}  // namespace

Datatype Datatype::basic(BasicKind kind) {
  static const auto* all = [] {
    auto* types = new std::array<Datatype, kBasicKindCount + 1>();  // lives for the whole process
    for (int k = 1; k <= kBasicKindCount; ++k) (*types)[static_cast<size_t>(k)] = makeBasic(static_cast<BasicKind>(k));
    return types;
  }();
  return validKind(kind) ? (*all)[static_cast<size_t>(kind)] : Datatype();
}

const char* basicName(BasicKind kind) { return validKind(kind) ? kBasics[static_cast<size_t>(kind)].name : "invalid"; }
int64_t basicSize(BasicKind kind) { return validKind(kind) ? kBasics[static_cast<size_t>(kind)].size : 0; }
int64_t basicAlignment(BasicKind kind) {
  return validKind(kind) ? kBasics[static_cast<size_t>(kind)].alignment : 1;
}

}  // namespace ibdt::datatype
