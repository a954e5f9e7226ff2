// HDF5's registered LZ4 filter (id 32004), implemented here with Debian's liblz4 so that commprof
// writes and reads its compressed tables without an HDF5 plugin, while h5py (with `hdf5plugin`
// or Debian's hdf5-filter-plugin) and h5dump (with the plugin) read the same chunks
// (docs/file-format.md#compression).
//
// A chunk in this format: the uncompressed size (uint64, big-endian), the block size (uint32,
// big-endian), then per block its stored size (uint32, big-endian) and its bytes: LZ4 block
// data, or the block as it is when compression would not make it smaller (stored size equal to
// the block's size). Blocks are the chunk's bytes cut every `block size`, the last one shorter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace commprof::h5 {

inline constexpr int kLz4FilterId = 32004;

// Registers the filter with the HDF5 library of this process once (thread-safe, idempotent);
// false when HDF5 refused it. The writer's and readers' open paths call it.
bool RegisterLz4Filter();

// The chunk codec itself, as the filter runs it; exposed for tests and benchmarks.
// Encodes `in` with blocks of `block_size` bytes (0: the whole input is one block).
// `acceleration` is LZ4's speed/ratio trade-off (1 = LZ4's default; readers do not need it).
std::vector<uint8_t> Lz4EncodeChunk(std::span<const uint8_t> in, uint32_t block_size, int acceleration);
// The same into a caller's buffer of at least Lz4EncodedBound(in.size(), block_size) bytes; returns
// the encoded size, 0 on failure. For a writer that reuses its buffers.
size_t Lz4EncodedBound(uint64_t size, uint32_t block_size);
size_t Lz4EncodeInto(std::span<const uint8_t> in, uint32_t block_size, int acceleration, uint8_t* out);
// The writer's LZ4 trade-off: LZ4's default (readers never need it; it is not stored).
inline constexpr int kLz4WriterAcceleration = 1;
// Decodes a chunk; nullopt when it is malformed (sizes that do not add up, a block that does not
// decode to its size, trailing or missing bytes). Never reads or writes out of bounds.
std::optional<std::vector<uint8_t>> Lz4DecodeChunk(std::span<const uint8_t> in);
// The same into `out` (resized; its capacity is reused), for a reader decoding chunk after chunk.
bool Lz4DecodeChunkInto(std::span<const uint8_t> in, std::vector<uint8_t>& out);

}  // namespace commprof::h5
