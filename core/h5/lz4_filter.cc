#include "core/h5/lz4_filter.h"

#include <hdf5.h>
#include <lz4.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>

namespace commprof::h5 {

namespace {

constexpr size_t kHeaderBytes = 12;  // uncompressed size (8) + block size (4)
constexpr size_t kBlockPrefix = 4;   // each block's stored size
// LZ4 blocks are at most LZ4_MAX_INPUT_SIZE (about 2 GB); the format's block size is a uint32.
constexpr uint64_t kMaxBlock = LZ4_MAX_INPUT_SIZE;

void PutBe64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}
void PutBe32(uint8_t* p, uint32_t v) {
  for (int i = 3; i >= 0; --i) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}
uint64_t GetBe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v = (v << 8) | p[i];
  }
  return v;
}
uint32_t GetBe32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v = (v << 8) | p[i];
  }
  return v;
}

uint64_t EffectiveBlock(uint64_t size, uint32_t block_size) {
  uint64_t block = block_size == 0 ? size : std::min<uint64_t>(block_size, size);
  return std::min(block, kMaxBlock);
}

}  // namespace

size_t Lz4EncodedBound(uint64_t size, uint32_t block_size) {
  uint64_t block = EffectiveBlock(size, block_size);
  if (block == 0) {
    return kHeaderBytes;
  }
  uint64_t blocks = (size + block - 1) / block;
  return kHeaderBytes + blocks * (kBlockPrefix + static_cast<uint64_t>(LZ4_compressBound(static_cast<int>(block))));
}

size_t Lz4EncodeInto(std::span<const uint8_t> in, uint32_t block_size, int acceleration, uint8_t* out) {
  uint64_t block = EffectiveBlock(in.size(), block_size);
  PutBe64(out, in.size());
  PutBe32(out + 8, static_cast<uint32_t>(block));
  size_t pos = kHeaderBytes;
  for (uint64_t done = 0; done < in.size(); done += block) {
    auto n = static_cast<int>(std::min<uint64_t>(block, in.size() - done));
    const auto* src = reinterpret_cast<const char*>(in.data() + done);
    auto* dst = reinterpret_cast<char*>(out + pos + kBlockPrefix);
    int stored = LZ4_compress_fast(src, dst, n, LZ4_compressBound(n), acceleration);
    if (stored <= 0) {
      return 0;
    }
    if (stored >= n) {  // incompressible: the block as it is, flagged by its stored size == n
      std::memcpy(dst, src, static_cast<size_t>(n));
      stored = n;
    }
    PutBe32(out + pos, static_cast<uint32_t>(stored));
    pos += kBlockPrefix + static_cast<size_t>(stored);
  }
  return pos;
}

namespace {

// The uncompressed size a chunk declares; nullopt without a plausible header.
std::optional<uint64_t> DeclaredSize(std::span<const uint8_t> in) {
  if (in.size() < kHeaderBytes) {
    return std::nullopt;
  }
  uint64_t size = GetBe64(in.data());
  uint32_t block = GetBe32(in.data() + 8);
  if (size > 0 && (block == 0 || block > kMaxBlock)) {
    return std::nullopt;
  }
  // LZ4 expands at most 255x; anything larger is a lie that would make us allocate it.
  if (size / 255 > in.size()) {
    return std::nullopt;
  }
  return size;
}

bool DecodeInto(std::span<const uint8_t> in, uint8_t* out, uint64_t size) {
  uint64_t block = std::min<uint64_t>(GetBe32(in.data() + 8), size);
  size_t pos = kHeaderBytes;
  for (uint64_t done = 0; done < size; done += block) {
    uint64_t n = std::min(block, size - done);
    if (in.size() - pos < kBlockPrefix) {
      return false;
    }
    uint32_t stored = GetBe32(in.data() + pos);
    pos += kBlockPrefix;
    if (stored > in.size() - pos) {
      return false;
    }
    if (stored == n) {
      std::memcpy(out + done, in.data() + pos, n);
    } else {
      int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data() + pos), reinterpret_cast<char*>(out + done),
                                    static_cast<int>(stored), static_cast<int>(n));
      if (got < 0 || static_cast<uint64_t>(got) != n) {
        return false;
      }
    }
    pos += stored;
  }
  return pos == in.size();
}

// HDF5's filter callback: on failure it returns 0 and leaves *buf as it was.
size_t FilterCallback(unsigned flags, size_t cd_nelmts, const unsigned cd_values[], size_t nbytes, size_t* buf_size,
                      void** buf) {
  std::span<const uint8_t> in(static_cast<const uint8_t*>(*buf), nbytes);
  size_t out_size = 0;
  void* out = nullptr;
  if ((flags & H5Z_FLAG_REVERSE) != 0) {
    auto size = DeclaredSize(in);
    if (!size || *size > std::numeric_limits<size_t>::max()) {
      return 0;
    }
    out_size = static_cast<size_t>(*size);
    out = H5allocate_memory(std::max<size_t>(out_size, 1), false);
    if (out == nullptr || !DecodeInto(in, static_cast<uint8_t*>(out), out_size)) {
      H5free_memory(out);
      return 0;
    }
  } else {
    uint32_t block_size = cd_nelmts > 0 ? cd_values[0] : 0;
    size_t bound = Lz4EncodedBound(nbytes, block_size);
    out = H5allocate_memory(bound, false);
    if (out == nullptr) {
      return 0;
    }
    out_size = Lz4EncodeInto(in, block_size, kLz4WriterAcceleration, static_cast<uint8_t*>(out));
    if (out_size == 0) {
      H5free_memory(out);
      return 0;
    }
  }
  H5free_memory(*buf);
  *buf = out;
  *buf_size = std::max<size_t>(out_size, 1);
  return out_size;
}

}  // namespace

std::vector<uint8_t> Lz4EncodeChunk(std::span<const uint8_t> in, uint32_t block_size, int acceleration) {
  std::vector<uint8_t> out(Lz4EncodedBound(in.size(), block_size));
  out.resize(Lz4EncodeInto(in, block_size, acceleration, out.data()));
  return out;
}

bool Lz4DecodeChunkInto(std::span<const uint8_t> in, std::vector<uint8_t>& out) {
  auto size = DeclaredSize(in);
  if (!size) {
    return false;
  }
  out.resize(*size);
  return DecodeInto(in, out.data(), *size);
}

std::optional<std::vector<uint8_t>> Lz4DecodeChunk(std::span<const uint8_t> in) {
  std::vector<uint8_t> out;
  if (!Lz4DecodeChunkInto(in, out)) {
    return std::nullopt;
  }
  return out;
}

bool RegisterLz4Filter() {
  static bool registered = [] {
    // Always ours, even where HDF5 could load a plugin for the id: H5Zregister replaces a class
    // already registered, so the codec does not depend on HDF5_PLUGIN_PATH.
    static const H5Z_class2_t kClass = {
        H5Z_CLASS_T_VERS,
        static_cast<H5Z_filter_t>(kLz4FilterId),
        1,
        1,
        "lz4 (HDF5 filter 32004; h5py: import hdf5plugin)",
        nullptr,
        nullptr,
        FilterCallback,
    };
    return H5Zregister(&kClass) >= 0;
  }();
  return registered;
}

}  // namespace commprof::h5
