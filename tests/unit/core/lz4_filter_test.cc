// The LZ4 chunk codec of HDF5 filter 32004 (core/h5/lz4_filter.h): round trips, the format's
// bytes as other implementations write them, and malformed chunks refused without a crash.
#include "core/h5/lz4_filter.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <lz4.h>

#include <cstring>
#include <random>
#include <vector>

namespace commprof::h5 {
namespace {

std::vector<uint8_t> Regular(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<uint8_t>((i % 64) < 8 ? i / 64 : i % 7);
  }
  return v;
}

std::vector<uint8_t> Noise(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    b = static_cast<uint8_t>(rng());
  }
  return v;
}

void PutBe32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) {
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
}

TEST(Lz4Filter, RoundTripsRegularNoisyAndEmptyChunksInOneOrManyBlocks) {
  for (uint32_t block : {0u, 1u, 1000u, 4096u, 16384u}) {
    for (const auto& in : {Regular(16384), Noise(16384, 7), Regular(1), std::vector<uint8_t>{}, Noise(5000, 9)}) {
      SCOPED_TRACE(testing::Message() << "block " << block << ", " << in.size() << " bytes");
      auto enc = Lz4EncodeChunk(in, block, 1);
      ASSERT_GE(enc.size(), 12u);
      auto dec = Lz4DecodeChunk(enc);
      ASSERT_TRUE(dec.has_value());
      EXPECT_EQ(*dec, in);
    }
  }
  // Regular data shrinks; noise costs at most the header and one size per block (kept as is).
  EXPECT_LT(Lz4EncodeChunk(Regular(16384), 0, 1).size(), 16384u / 4);
  EXPECT_EQ(Lz4EncodeChunk(Noise(16384, 7), 0, 1).size(), 16384u + 12 + 4);
  EXPECT_EQ(Lz4EncodeChunk(Noise(16384, 7), 4096, 1).size(), 16384u + 12 + 4 * 4);
}

TEST(Lz4Filter, WritesAndReadsTheRegisteredFormatByteForByte) {
  // A chunk built by hand as the format describes: 8-byte big-endian size, 4-byte block size,
  // then per block a big-endian stored size; block 1 compressed by liblz4 directly, block 2 raw.
  auto a = Regular(3000);
  auto b = Noise(1000, 3);
  std::vector<uint8_t> chunk = {0, 0, 0, 0, 0, 0, 0x0F, 0xA0};  // 4000
  PutBe32(chunk, 3000);
  std::vector<char> comp(static_cast<size_t>(LZ4_compressBound(3000)));
  int n =
      LZ4_compress_default(reinterpret_cast<const char*>(a.data()), comp.data(), 3000, static_cast<int>(comp.size()));
  ASSERT_GT(n, 0);
  PutBe32(chunk, static_cast<uint32_t>(n));
  chunk.insert(chunk.end(), comp.begin(), comp.begin() + n);
  PutBe32(chunk, 1000);  // == the block's size: stored raw
  chunk.insert(chunk.end(), b.begin(), b.end());

  auto dec = Lz4DecodeChunk(chunk);
  ASSERT_TRUE(dec.has_value());
  std::vector<uint8_t> want = a;
  want.insert(want.end(), b.begin(), b.end());
  EXPECT_EQ(*dec, want);

  // Our encoder writes the same framing: the same header, and block 2 (incompressible) raw.
  auto enc = Lz4EncodeChunk(want, 3000, 1);
  ASSERT_GE(enc.size(), 12u);
  EXPECT_TRUE(std::equal(chunk.begin(), chunk.begin() + 12, enc.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), enc.end() - 1000));
  uint32_t second = (enc[enc.size() - 1004] << 24) | (enc[enc.size() - 1003] << 16) | (enc[enc.size() - 1002] << 8) |
                    enc[enc.size() - 1001];
  EXPECT_EQ(second, 1000u);
}

TEST(Lz4Filter, MalformedChunksAreRefusedNotOverrun) {
  auto good = Lz4EncodeChunk(Regular(16384), 4096, 1);
  ASSERT_TRUE(Lz4DecodeChunk(good).has_value());
  // Every truncation, and one byte too many.
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(Lz4DecodeChunk(std::span(good).first(cut)).has_value()) << cut;
  }
  auto longer = good;
  longer.push_back(0);
  EXPECT_FALSE(Lz4DecodeChunk(longer).has_value());
  // A declared size far beyond what the bytes could hold (no giant allocation), a zero block size.
  auto huge = good;
  huge[0] = 0x7F;
  EXPECT_FALSE(Lz4DecodeChunk(huge).has_value());
  auto zero_block = good;
  std::memset(zero_block.data() + 8, 0, 4);
  EXPECT_FALSE(Lz4DecodeChunk(zero_block).has_value());
  // Every single-byte corruption either decodes to 16384 bytes or is refused: never a crash
  // (the sanitizer presets run this too).
  for (size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] ^= 0x5A;
    auto dec = Lz4DecodeChunk(bad);
    if (dec.has_value()) {
      EXPECT_EQ(dec->size(), 16384u) << i;
    }
  }
}

TEST(Lz4Filter, RegistersWithHdf5) {
  EXPECT_TRUE(RegisterLz4Filter());
  EXPECT_TRUE(RegisterLz4Filter());
  EXPECT_GT(H5Zfilter_avail(kLz4FilterId), 0);
}

}  // namespace
}  // namespace commprof::h5
