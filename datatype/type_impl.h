// datatype/type_impl.h — the immutable description behind a Datatype handle.
//
// Every MPI constructor reduces to one of a few forms (derived constructors
// such as subarray or the bounded vector are compositions of these):
//   kBasic    one predefined element
//   kVector   count blocks of blocklen x child, block i at i*stride bytes
//   kIndexed  blocks of blocklens[i] (or blocklen) x child at displs[i] bytes
//   kStruct   blocks of blocklens[i] x children[i] at displs[i] bytes
//   kResized  child with explicit lb/extent
//   kLayout   a layout received on the wire (loop program only)
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "datatype/loop_program.h"
#include "ibdt/datatype.h"

namespace ibdt::datatype {

enum class Form : uint8_t { kBasic, kVector, kIndexed, kStruct, kResized, kLayout };

struct TypeImpl {
  TypeImpl();
  ~TypeImpl();
  TypeImpl(const TypeImpl&) = delete;
  TypeImpl& operator=(const TypeImpl&) = delete;

  Form form = Form::kBasic;
  BasicKind basic = BasicKind::kByte;  // kBasic
  int64_t count = 0;                   // kVector
  int64_t blocklen = 0;                // kVector, kIndexed with empty blocklens
  int64_t stride = 0;                  // kVector, bytes
  std::vector<int64_t> blocklens;      // kIndexed (optional), kStruct
  std::vector<int64_t> displs;         // kIndexed, kStruct, bytes
  std::vector<Datatype> children;      // one, or one per block for kStruct

  // MPI bounds (bytes) and packed size of one element.
  int64_t size = 0;
  int64_t lb = 0;
  int64_t ub = 0;
  int64_t trueLb = 0;
  int64_t trueUb = 0;
  bool hasBounds = false;       // type map non-empty or explicit bounds
  bool explicitBounds = false;  // resized somewhere inside (MPI's sticky LB/UB)
  int64_t alignment = 1;        // largest basic alignment inside

  // Signature of one element (see ibdt/datatype.h).
  Signature signature;
  int homogeneous = 0;  // BasicKind value when every element has one kind, else 0

  uint32_t id = 0;
  uint32_t version = 0;

  // Loop program, built once by commit() (kBasic and kLayout: at creation).
  mutable std::once_flag compileOnce;
  mutable std::atomic<bool> committed{false};
  mutable NodeRef program;
  mutable Status compileStatus;

  int64_t extent() const { return ub - lb; }
  int64_t blockLength(size_t i) const { return blocklens.empty() ? blocklen : blocklens[i]; }
  size_t blockCount() const { return form == Form::kVector ? static_cast<size_t>(count) : displs.size(); }
  const Datatype& child(size_t i) const { return children[form == Form::kStruct ? i : 0]; }
};

// Checks a handle before use: null, freed, and (when `needCommitted`)
// uncommitted handles give an error naming `what`.
Status checkHandle(const Datatype& type, const char* what, bool needCommitted);

// Compiles (or returns the cached) loop program of a committed type.
const NodeRef& programOf(const TypeImpl& impl);

// Computes bounds, size, alignment and signature of a new impl whose form
// fields are set, then wraps it in a handle with a fresh (id, version).
Result<Datatype> finishType(std::shared_ptr<TypeImpl> impl, const char* constructor);

// Builds a Datatype from a received layout (already validated).
Datatype makeLayoutType(NodeRef program, int64_t lb, int64_t ub, Signature signature, int homogeneous);

// Registry of ids: an id is reused only after its holder is destroyed, and
// then with a higher version.
void acquireId(uint32_t& id, uint32_t& version);
void releaseId(uint32_t id);

// Signature arithmetic (signature.cc).
Signature sigConcat(const Signature& a, const Signature& b);
Signature sigRepeat(const Signature& a, int64_t times);
Signature sigBasic(BasicKind kind);

int64_t basicAlignment(BasicKind kind);

}  // namespace ibdt::datatype
