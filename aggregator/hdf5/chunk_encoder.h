// Encodes a chunk of an events table as HDF5's filter pipeline would (shuffle, then the codec),
// so the writer can hand finished chunks to H5Dwrite_chunk: records are appended by memcpy, and
// HDF5's per-write selection, type conversion and chunk cache are skipped. Readers decode the
// chunks with the filters the dataset declares (docs/file-format.md#compression).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"

namespace commprof {

class ChunkEncoder {
 public:
  // Chunks of `chunk_records` records of `record_size` bytes.
  ChunkEncoder(const WriterOptions& options, size_t record_size, size_t chunk_records);

  // The stored bytes of a chunk whose first records are `records` (at most a chunk's worth; the
  // rest of the chunk is zeros). Valid until the next call; empty when the codec failed.
  std::span<const uint8_t> Encode(std::span<const uint8_t> records);

 private:
  WriterOptions options_;
  size_t record_size_;
  size_t chunk_bytes_;
  std::vector<uint8_t> shuffled_;  // reused: no allocation per chunk
  std::vector<uint8_t> out_;
  std::vector<uint8_t> padded_;  // a partly filled chunk with its zero tail
};

// HDF5's shuffle filter for a whole chunk: byte j of record i goes to out[j * n + i].
void ShuffleRecords(std::span<const uint8_t> in, size_t record_size, uint8_t* out);

}  // namespace commprof
