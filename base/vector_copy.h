// base/vector_copy.h — a copy loop of 16-byte loads and stores, for the
// places where the C library's memcpy (`rep movsb` on CPUs with fast string
// moves) is measured to be slow: large blocks in the datatype engine
// (datatype/block_copy.h) and copies whose destination lies a few bytes
// after the source modulo a page (transport/fabric/shm/copy_distance.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#define IBDT_HAVE_SSE2_KERNELS 1
#endif

namespace ibdt {

#if IBDT_HAVE_SSE2_KERNELS
// kStream: non-temporal stores where the destination is 16-byte aligned; the
// caller fences (_mm_sfence) before the data is published.
template <bool kStream>
void copySse2(char* dst, const char* src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {  // four loads before four stores: the loads' misses overlap
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    if constexpr (kStream) {
      // _mm_stream_si128 needs 16-byte alignment; an unaligned destination takes the cached stores.
      if ((reinterpret_cast<uintptr_t>(dst + i) & 15) == 0) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
        continue;
      }
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  if (i < n) std::memcpy(dst + i, src + i, n - i);
}
#endif

// The cached-store loop where it exists, else memcpy.
inline void copyWithVectorLoop(void* dst, const void* src, size_t n) {
#if IBDT_HAVE_SSE2_KERNELS
  copySse2<false>(static_cast<char*>(dst), static_cast<const char*>(src), n);
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace ibdt
