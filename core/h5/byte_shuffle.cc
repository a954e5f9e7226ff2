#include "core/h5/byte_shuffle.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
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

// A 16x16 byte transpose is four rounds of interleaving row i with row i + 8 (low halves into 2i,
// high halves into 2i + 1). Done in place, each round's pair lands where it was read, and the rows
// stay in a known permutation: the four rounds become a butterfly over strides 8, 4, 2 and 1 that
// leaves row t in x[t]. In place, 16 rows and one temporary fit the 16 vector registers (copying
// between two arrays made GCC spill them and move them with rep movs, most of the shuffle's time).
#if defined(__SSE2__)
inline void Transpose16x16(__m128i (&x)[16]) {
#pragma GCC unroll 4
  for (size_t stride = 8; stride != 0; stride /= 2) {
#pragma GCC unroll 16
    for (size_t a = 0; a < 16; ++a) {
      if ((a & stride) == 0) {
        const __m128i lo = _mm_unpacklo_epi8(x[a], x[a + stride]);
        x[a + stride] = _mm_unpackhi_epi8(x[a], x[a + stride]);
        x[a] = lo;
      }
    }
  }
}
#endif

#if defined(__x86_64__)
// The same butterfly on 256-bit rows: AVX2 interleaves within each 128-bit half, so one pass
// makes two independent 16x16 transposes (bytes j..j+15 in the low halves, j+16..j+31 in the high
// halves) for half the instructions per byte. It is a quarter of the writer's time, and of every
// read of a compressed events table (the unshuffle).
__attribute__((target("avx2"), always_inline)) inline void Transpose16x16Avx2(__m256i (&x)[16]) {
#pragma GCC unroll 4
  for (size_t stride = 8; stride != 0; stride /= 2) {
#pragma GCC unroll 16
    for (size_t a = 0; a < 16; ++a) {
      if ((a & stride) == 0) {
        const __m256i lo = _mm256_unpacklo_epi8(x[a], x[a + stride]);
        x[a + stride] = _mm256_unpackhi_epi8(x[a], x[a + stride]);
        x[a] = lo;
      }
    }
  }
}

__attribute__((target("avx2"))) void Shuffle16RecordsAvx2(const uint8_t* rec, size_t record_size, size_t n,
                                                          uint8_t* out) {
  for (size_t j = 0; j < record_size; j += 32) {
    __m256i x[16];
    for (size_t k = 0; k < 16; ++k) {
      x[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + k * record_size + j));
    }
    Transpose16x16Avx2(x);
    for (size_t t = 0; t < 16; ++t) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (j + t) * n), _mm256_castsi256_si128(x[t]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (j + 16 + t) * n), _mm256_extracti128_si256(x[t], 1));
    }
  }
}

// With AVX-512BW a row is a whole 64-byte record and the 32 registers hold all 16 without
// spilling: four 16x16 transposes per pass, one per 128-bit quarter.
__attribute__((target("avx512bw"), always_inline)) inline void Transpose16x16Avx512(__m512i (&x)[16]) {
#pragma GCC unroll 4
  for (size_t stride = 8; stride != 0; stride /= 2) {
#pragma GCC unroll 16
    for (size_t a = 0; a < 16; ++a) {
      if ((a & stride) == 0) {
        const __m512i lo = _mm512_unpacklo_epi8(x[a], x[a + stride]);
        x[a + stride] = _mm512_unpackhi_epi8(x[a], x[a + stride]);
        x[a] = lo;
      }
    }
  }
}

// GCC 12 warns of an uninitialized variable inside its own _mm512_extracti32x4_epi32 (a false
// positive of its intrinsics header, under -Werror).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512bw"))) void Shuffle16RecordsAvx512(const uint8_t* rec, size_t record_size, size_t n,
                                                                uint8_t* out) {
  for (size_t j = 0; j < record_size; j += 64) {
    __m512i x[16];
    for (size_t k = 0; k < 16; ++k) {
      x[k] = _mm512_loadu_si512(rec + k * record_size + j);
    }
    Transpose16x16Avx512(x);
    for (size_t t = 0; t < 16; ++t) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (j + t) * n), _mm512_extracti32x4_epi32(x[t], 0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (j + 16 + t) * n), _mm512_extracti32x4_epi32(x[t], 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (j + 32 + t) * n), _mm512_extracti32x4_epi32(x[t], 2));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (j + 48 + t) * n), _mm512_extracti32x4_epi32(x[t], 3));
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

bool ShufflePathAvailable(ShufflePath path) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2") != 0;
  static const bool avx512 = __builtin_cpu_supports("avx512bw") != 0;
  switch (path) {
    case ShufflePath::kAvx512:
      return avx512;
    case ShufflePath::kAvx2:
      return avx2;
    default:
      break;
  }
#endif
#if defined(__SSE2__)
  return path <= ShufflePath::kSse2;
#else
  return path == ShufflePath::kPortable;
#endif
}

void ShuffleRecords(std::span<const uint8_t> in, size_t record_size, uint8_t* out) {
  static const ShufflePath widest = [] {
    for (ShufflePath p : {ShufflePath::kAvx512, ShufflePath::kAvx2, ShufflePath::kSse2}) {
      if (ShufflePathAvailable(p)) {
        return p;
      }
    }
    return ShufflePath::kPortable;
  }();
  ShuffleRecordsUsing(widest, in, record_size, out);
}

void ShuffleRecordsUsing(ShufflePath widest, std::span<const uint8_t> in, size_t record_size, uint8_t* out) {
  if (record_size == 0 || in.empty()) {
    return;
  }
  const size_t n = in.size() / record_size;
  // Eight records and eight byte positions at a time, as one 8x8 transpose of whole words: the
  // byte-by-byte loop below was half the writer's time.
  size_t i = 0;
#if defined(__x86_64__)
  if (widest >= ShufflePath::kAvx512 && record_size % 64 == 0 && ShufflePathAvailable(ShufflePath::kAvx512)) {
    for (; i + 16 <= n; i += 16) {
      Shuffle16RecordsAvx512(in.data() + i * record_size, record_size, n, out + i);
    }
  }
  if (widest >= ShufflePath::kAvx2 && record_size % 32 == 0 && ShufflePathAvailable(ShufflePath::kAvx2)) {
    for (; i + 16 <= n; i += 16) {
      Shuffle16RecordsAvx2(in.data() + i * record_size, record_size, n, out + i);
    }
  }
#endif
#if defined(__SSE2__)
  if (widest >= ShufflePath::kSse2 && record_size % 16 == 0) {
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
