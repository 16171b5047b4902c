// datatype/signature.cc — type signatures as polynomial hashes modulo the
// Mersenne prime 2^61-1 (not 2^64: power-of-two moduli collide on
// Thue-Morse-like sequences), and the send/receive match check.
//
// H(s_0 .. s_{n-1}) = sum s_i * B^(n-1-i). Concatenation and repetition have
// closed forms, so signatures of huge regular types cost O(depth * log n).
#include "base/checked_math.h"
#include "datatype/type_impl.h"

namespace ibdt::datatype {
namespace {

constexpr uint64_t kMod = (uint64_t{1} << 61) - 1;
constexpr uint64_t kBase = 0x1f3d5b79a2c4e681ULL % kMod;

uint64_t mulMod(uint64_t a, uint64_t b) {
  __extension__ typedef unsigned __int128 U128;  // GCC/Clang extension, silences -Wpedantic
  const U128 p = static_cast<U128>(a) * b;
  uint64_t r = static_cast<uint64_t>(p & kMod) + static_cast<uint64_t>(p >> 61);
  if (r >= kMod) r -= kMod;
  return r;
}

uint64_t addMod(uint64_t a, uint64_t b) {
  uint64_t r = a + b;
  if (r >= kMod) r -= kMod;
  return r;
}

uint64_t powMod(uint64_t x, uint64_t n) {
  uint64_t r = 1;
  for (; n > 0; n >>= 1, x = mulMod(x, x)) {
    if (n & 1) r = mulMod(r, x);
  }
  return r;
}

// 1 + x + x^2 + ... + x^(n-1)
uint64_t geometric(uint64_t x, uint64_t n) {
  if (n == 0) return 0;
  if (n % 2 == 1) return addMod(1, mulMod(x, geometric(x, n - 1)));
  return mulMod(geometric(x, n / 2), addMod(1, powMod(x, n / 2)));
}

Result<Signature> prefixOf(const TypeImpl& t, int64_t n);

// Prefix of n elements of `count` repetitions of t.
Result<Signature> repeatedPrefix(const TypeImpl& t, int64_t n) {
  const int64_t per = t.signature.elements;
  if (n == 0 || per == 0) return Signature{};
  IBDT_ASSIGN_OR_RETURN(Signature tail, prefixOf(t, n % per));
  return sigConcat(sigRepeat(t.signature, n / per), tail);
}

// Prefix of n elements (n <= elements) of one t.
Result<Signature> prefixOf(const TypeImpl& t, int64_t n) {
  if (n == 0) return Signature{};
  if (n == t.signature.elements) return t.signature;
  if (t.homogeneous != 0) return sigRepeat(sigBasic(static_cast<BasicKind>(t.homogeneous)), n);
  switch (t.form) {
    case Form::kResized:
      return prefixOf(*t.children[0].impl(), n);
    case Form::kVector: {
      const TypeImpl& c = *t.children[0].impl();
      const int64_t perBlock = t.blocklen * c.signature.elements;
      IBDT_ASSIGN_OR_RETURN(Signature partial, repeatedPrefix(c, n % perBlock));
      return sigConcat(sigRepeat(sigRepeat(c.signature, t.blocklen), n / perBlock), partial);
    }
    case Form::kIndexed:
    case Form::kStruct: {
      Signature sig;
      for (size_t i = 0; n > 0 && i < t.displs.size(); ++i) {
        const TypeImpl& c = *t.child(i).impl();
        const int64_t blen = t.blockLength(i);
        const int64_t elements = blen * c.signature.elements;
        if (n >= elements) {
          sig = sigConcat(sig, sigRepeat(c.signature, blen));
          n -= elements;
        } else {
          IBDT_ASSIGN_OR_RETURN(Signature partial, repeatedPrefix(c, n));
          return sigConcat(sig, partial);
        }
      }
      return sig;
    }
    case Form::kBasic:
    case Form::kLayout:
      break;
  }
  return makeError(Code::kUnsupported, "signature: prefix of a mixed-type layout received from a peer");
}

}  // namespace

Signature sigBasic(BasicKind kind) { return {static_cast<uint64_t>(kind), 1}; }

Signature sigConcat(const Signature& a, const Signature& b) {
  return {addMod(mulMod(a.hash, powMod(kBase, static_cast<uint64_t>(b.elements))), b.hash), a.elements + b.elements};
}

Signature sigRepeat(const Signature& a, int64_t times) {
  if (times <= 0 || a.elements == 0) return {};
  const uint64_t shift = powMod(kBase, static_cast<uint64_t>(a.elements));
  return {mulMod(a.hash, geometric(shift, static_cast<uint64_t>(times))), a.elements * times};
}

Result<Signature> signature(const Datatype& type, int64_t count) {
  IBDT_RETURN_IF_ERROR(checkHandle(type, "signature", false));
  if (count < 0) return makeError(Code::kInvalidArgument, "signature: negative count ", count);
  Checked m;
  m.mul(type.impl()->signature.elements, count);
  if (m.overflow) return makeError(Code::kOverflow, "signature: element count exceeds 64 bits");
  return sigRepeat(type.impl()->signature, count);
}

Status checkMatch(const Signature& send, const Datatype& recvType, int64_t recvCount) {
  IBDT_ASSIGN_OR_RETURN(Signature recv, signature(recvType, recvCount));
  if (send.elements < 0) return makeError(Code::kInvalidArgument, "signature check: negative element count");
  if (send.elements > recv.elements) {
    return makeError(Code::kTruncated, "signature check: send of ", send.elements,
                     " basic elements exceeds receive of ", recv.elements, " (", recvCount, " x type ",
                     recvType.id(), ")");
  }
  IBDT_ASSIGN_OR_RETURN(Signature prefix, repeatedPrefix(*recvType.impl(), send.elements));
  if (prefix != send) {
    return makeError(Code::kInvalidArgument, "signature check: the basic types of the ", send.elements,
                     " sent elements differ from the first ", send.elements, " elements of ", recvCount,
                     " x type ", recvType.id());
  }
  return Status::ok();
}

Status checkMatch(const Datatype& sendType, int64_t sendCount, const Datatype& recvType, int64_t recvCount) {
  IBDT_ASSIGN_OR_RETURN(Signature send, signature(sendType, sendCount));
  Status status = checkMatch(send, recvType, recvCount);
  if (!status.isOk()) status.withContext(strCat("send ", sendCount, " x type ", sendType.id()));
  return status;
}

}  // namespace ibdt::datatype
