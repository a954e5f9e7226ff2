// Encodes chunks of a table as HDF5's filter pipeline would (shuffle, then the codec), so that a
// writer can hand finished chunks to H5Dwrite_chunk: HDF5's per-write selection, type conversion,
// chunk cache and its slow byte shuffle are skipped. Readers decode the chunks with the filters
// the dataset declares (docs/file-format.md#compression). Used by the events writer
// (aggregator/hdf5/hdf5_writer.cc) and the /analysis tables (analysis/report/analysis_group.cc).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace commprof::h5 {

enum class Codec {
  kNone,            // no filter
  kShuffleLz4,      // shuffle (2) + LZ4 (32004, one block per chunk)
  kShuffleDeflate,  // shuffle (2) + deflate (1)
};

// Adds the codec's filters to a dataset creation property list (chunking set by the caller).
void SetCodecFilters(hid_t dcpl, Codec codec, int deflate_level);

class ChunkEncoder {
 public:
  // Chunks of `chunk_records` records of `record_size` bytes.
  ChunkEncoder(Codec codec, int deflate_level, size_t record_size, size_t chunk_records);

  // The stored bytes of a chunk whose first records are `records` (at most a chunk's worth; the
  // rest of the chunk is zeros). Valid until the next call; empty when the codec failed.
  std::span<const uint8_t> Encode(std::span<const uint8_t> records);

  // Stores `rows` (whole records) from record `first` on (a multiple of the chunk) into `dset`,
  // whose extent already covers them, chunk by chunk; false when a write failed.
  bool WriteRows(hid_t dset, uint64_t first, std::span<const uint8_t> rows);

 private:
  Codec codec_;
  int deflate_level_;
  size_t record_size_;
  size_t chunk_records_;
  size_t chunk_bytes_;
  std::vector<uint8_t> shuffled_;  // reused: no allocation per chunk
  std::vector<uint8_t> out_;
  std::vector<uint8_t> padded_;  // a partly filled chunk with its zero tail
};

// The reverse, for a table written kShuffleLz4: chunks read raw (H5Dread_chunk), LZ4-decoded and
// unshuffled here, which costs a reader a fifth of HDF5's pipeline (its byte unshuffle was a fifth
// of a report).
class ChunkDecoder {
 public:
  // The chunk's records when `dset` is chunked with exactly shuffle + LZ4 (nothing to decode
  // here otherwise: 0).
  static size_t ShuffleLz4ChunkRecords(hid_t dset);

  ChunkDecoder(size_t record_size, size_t chunk_records);

  // Decodes records [first, first + count) (first a multiple of the chunk) into `out`. False at
  // anything unexpected (a chunk not stored, a filter skipped, a chunk that does not decode): the
  // caller then reads the range through HDF5, which reports what is wrong.
  bool ReadRows(hid_t dset, uint64_t first, uint64_t count, uint8_t* out);

 private:
  size_t record_size_;
  size_t chunk_records_;
  std::vector<uint8_t> raw_;  // reused: no allocation per chunk
  std::vector<uint8_t> decoded_;
  std::vector<uint8_t> plain_;  // a last, partly used chunk
};

}  // namespace commprof::h5
