#include "core/h5/byte_shuffle.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace commprof::h5 {

namespace {

// Transposes an 8x8 byte matrix held as 8 little-endian words: afterwards byte k of w[t] is what
// byte t of w[k] was. Three rounds of swaps of 1-, 2- and 4-byte blocks between word pairs.
inline void Transpose8x8(uint64_t w[8]) {
  constexpr uint64_t kMask1 = 0x00FF00FF00FF00FFULL;
  constexpr uint64_t kMask2 = 0x0000FFFF0000FFFFULL;
  constexpr uint64_t kMask4 = 0x00000000FFFFFFFFULL;
  for (int k = 0; k < 8; k += 2) {
    uint64_t t = ((w[k] >> 8) ^ w[k + 1]) & kMask1;
    w[k + 1] ^= t;
    w[k] ^= t << 8;
  }
  for (int k : {0, 1, 4, 5}) {
    uint64_t t = ((w[k] >> 16) ^ w[k + 2]) & kMask2;
    w[k + 2] ^= t;
    w[k] ^= t << 16;
  }
  for (int k = 0; k < 4; ++k) {
    uint64_t t = ((w[k] >> 32) ^ w[k + 4]) & kMask4;
    w[k + 4] ^= t;
    w[k] ^= t << 32;
  }
}

#if defined(__SSE2__)
// Transposes a 16x16 byte matrix in registers: four rounds of interleaving row i with row i + 8
// (low halves into 2i, high halves into 2i + 1) turn rows into columns.
inline void Transpose16x16(__m128i x[16]) {
  for (int round = 0; round < 4; ++round) {
    __m128i y[16];
    for (size_t i = 0; i < 8; ++i) {
      y[2 * i] = _mm_unpacklo_epi8(x[i], x[i + 8]);
      y[2 * i + 1] = _mm_unpackhi_epi8(x[i], x[i + 8]);
    }
    for (size_t i = 0; i < 16; ++i) {
      x[i] = y[i];
    }
  }
}
#endif

}  // namespace

void ShuffleRecords(std::span<const uint8_t> in, size_t record_size, uint8_t* out) {
  if (record_size == 0 || in.empty()) {
    return;
  }
  const size_t n = in.size() / record_size;
  // Eight records and eight byte positions at a time, as one 8x8 transpose of whole words: the
  // byte-by-byte loop below was half the writer's time.
  size_t i = 0;
#if defined(__SSE2__)
  if (record_size % 16 == 0) {
    for (; i + 16 <= n; i += 16) {
      const uint8_t* rec = in.data() + i * record_size;
      for (size_t j = 0; j < record_size; j += 16) {
        __m128i x[16];
        for (size_t k = 0; k < 16; ++k) {
          x[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + k * record_size + j));
        }
        Transpose16x16(x);
        for (size_t t = 0; t < 16; ++t) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (j + t) * n + i), x[t]);
        }
      }
    }
  }
#endif
  if (record_size % 8 == 0) {
    for (; i + 8 <= n; i += 8) {
      const uint8_t* rec = in.data() + i * record_size;
      for (size_t j = 0; j < record_size; j += 8) {
        uint64_t w[8];
        for (size_t k = 0; k < 8; ++k) {
          std::memcpy(&w[k], rec + k * record_size + j, 8);
        }
        Transpose8x8(w);
        for (size_t t = 0; t < 8; ++t) {
          std::memcpy(out + (j + t) * n + i, &w[t], 8);
        }
      }
    }
  }
  for (; i < n; ++i) {
    for (size_t j = 0; j < record_size; ++j) {
      out[j * n + i] = in[i * record_size + j];
    }
  }
}

}  // namespace commprof::h5
