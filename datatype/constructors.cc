// datatype/constructors.cc — the MPI type constructors.
#include <utility>

#include "base/checked_math.h"
#include "datatype/type_impl.h"

namespace ibdt::datatype {
namespace {

Status checkCount(const char* what, const char* name, int64_t value) {
  if (value < 0) return makeError(Code::kInvalidArgument, what, ": negative ", name, " ", value);
  return Status::ok();
}

Status checkCounts(const char* what, const char* name, std::span<const int64_t> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0) {
      return makeError(Code::kInvalidArgument, what, ": negative ", name, "[", i, "] = ", values[i]);
    }
  }
  return Status::ok();
}

// Displacements given in multiples of the old type's extent, as bytes.
Result<std::vector<int64_t>> scaled(const char* what, std::span<const int64_t> values, int64_t unit) {
  std::vector<int64_t> bytes(values.size());
  Checked m;
  for (size_t i = 0; i < values.size(); ++i) bytes[i] = m.mul(values[i], unit);
  if (m.overflow) return makeError(Code::kOverflow, what, ": displacement x extent exceeds 64 bits");
  return bytes;
}

std::shared_ptr<TypeImpl> newImpl(Form form, const Datatype& old) {
  auto impl = std::make_shared<TypeImpl>();
  impl->form = form;
  impl->children = {old};
  return impl;
}

Result<Datatype> makeIndexed(const char* what, std::vector<int64_t> blocklens, int64_t blocklen,
                             std::vector<int64_t> displsBytes, const Datatype& old) {
  auto impl = newImpl(Form::kIndexed, old);
  impl->blocklens = std::move(blocklens);
  impl->blocklen = blocklen;
  impl->displs = std::move(displsBytes);
  return finishType(std::move(impl), what);
}

}  // namespace

Result<Datatype> Datatype::contiguous(int64_t count, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkCount("contiguous", "count", count));
  IBDT_RETURN_IF_ERROR(checkHandle(old, "contiguous", false));
  return hvector(1, count, 0, old);
}

Result<Datatype> Datatype::vector(int64_t count, int64_t blocklen, int64_t stride, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "vector", false));
  Checked m;
  const int64_t strideBytes = m.mul(stride, old.extent());
  if (m.overflow) return makeError(Code::kOverflow, "vector: stride ", stride, " x extent ", old.extent(), " exceeds 64 bits");
  return hvector(count, blocklen, strideBytes, old);
}

Result<Datatype> Datatype::hvector(int64_t count, int64_t blocklen, int64_t strideBytes, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkCount("vector", "count", count));
  IBDT_RETURN_IF_ERROR(checkCount("vector", "block length", blocklen));
  IBDT_RETURN_IF_ERROR(checkHandle(old, "vector", false));
  auto impl = newImpl(Form::kVector, old);
  impl->count = count;
  impl->blocklen = blocklen;
  impl->stride = strideBytes;
  return finishType(std::move(impl), "vector");
}

Result<Datatype> Datatype::indexed(std::span<const int64_t> blocklens, std::span<const int64_t> displs,
                                   const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "indexed", false));
  IBDT_ASSIGN_OR_RETURN(auto bytes, scaled("indexed", displs, old.extent()));
  return hindexed(blocklens, bytes, old);
}

Result<Datatype> Datatype::hindexed(std::span<const int64_t> blocklens, std::span<const int64_t> displsBytes,
                                    const Datatype& old) {
  if (blocklens.size() != displsBytes.size()) {
    return makeError(Code::kInvalidArgument, "indexed: ", blocklens.size(), " block lengths but ",
                     displsBytes.size(), " displacements");
  }
  IBDT_RETURN_IF_ERROR(checkCounts("indexed", "block length", blocklens));
  IBDT_RETURN_IF_ERROR(checkHandle(old, "indexed", false));
  return makeIndexed("indexed", {blocklens.begin(), blocklens.end()}, 0, {displsBytes.begin(), displsBytes.end()},
                     old);
}

Result<Datatype> Datatype::indexedBlock(int64_t blocklen, std::span<const int64_t> displs, const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "indexed_block", false));
  IBDT_ASSIGN_OR_RETURN(auto bytes, scaled("indexed_block", displs, old.extent()));
  return hindexedBlock(blocklen, bytes, old);
}

Result<Datatype> Datatype::hindexedBlock(int64_t blocklen, std::span<const int64_t> displsBytes,
                                         const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkCount("indexed_block", "block length", blocklen));
  IBDT_RETURN_IF_ERROR(checkHandle(old, "indexed_block", false));
  return makeIndexed("indexed_block", {}, blocklen, {displsBytes.begin(), displsBytes.end()}, old);
}

Result<Datatype> Datatype::structType(std::span<const int64_t> blocklens, std::span<const int64_t> displsBytes,
                                      std::span<const Datatype> types) {
  if (blocklens.size() != displsBytes.size() || blocklens.size() != types.size()) {
    return makeError(Code::kInvalidArgument, "struct: ", blocklens.size(), " block lengths, ", displsBytes.size(),
                     " displacements and ", types.size(), " types");
  }
  IBDT_RETURN_IF_ERROR(checkCounts("struct", "block length", blocklens));
  auto impl = std::make_shared<TypeImpl>();
  impl->form = Form::kStruct;
  impl->blocklens.assign(blocklens.begin(), blocklens.end());
  impl->displs.assign(displsBytes.begin(), displsBytes.end());
  impl->children.assign(types.begin(), types.end());
  return finishType(std::move(impl), "struct");
}

Result<Datatype> Datatype::resized(const Datatype& old, int64_t lb, int64_t extent) {
  IBDT_RETURN_IF_ERROR(checkCount("resized", "extent", extent));
  IBDT_RETURN_IF_ERROR(checkHandle(old, "resized", false));
  Checked m;
  auto impl = newImpl(Form::kResized, old);
  impl->lb = lb;
  impl->ub = m.add(lb, extent);
  if (m.overflow) return makeError(Code::kOverflow, "resized: lb ", lb, " + extent ", extent, " exceeds 64 bits");
  return finishType(std::move(impl), "resized");
}

Result<Datatype> Datatype::dup(const Datatype& old) {
  IBDT_RETURN_IF_ERROR(checkHandle(old, "dup", false));
  // A dup is a new handle (own id) with the same type map and bounds: a
  // one-block struct keeps everything, including MPI's sticky bounds.
  auto impl = newImpl(Form::kIndexed, old);
  impl->blocklen = 1;
  impl->displs = {0};
  impl->explicitBounds = old.impl()->explicitBounds;
  auto result = finishType(std::move(impl), "dup");
  if (result.isOk() && old.committed()) IBDT_RETURN_IF_ERROR(result->commit());
  return result;
}

}  // namespace ibdt::datatype
