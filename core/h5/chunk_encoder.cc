#include "core/h5/chunk_encoder.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/h5/byte_shuffle.h"
#include "core/h5/lz4_filter.h"

namespace commprof::h5 {

void SetCodecFilters(hid_t dcpl, Codec codec, int deflate_level) {
  if (codec == Codec::kNone) {
    return;
  }
  H5Pset_shuffle(dcpl);
  if (codec == Codec::kShuffleDeflate) {
    H5Pset_deflate(dcpl, static_cast<unsigned>(deflate_level));
  } else {
    // Block size 0: the whole chunk is one LZ4 block. Mandatory: a chunk is never stored
    // uncompressed behind the reader's back (the codec keeps incompressible blocks as they are).
    const unsigned block_size = 0;
    H5Pset_filter(dcpl, kLz4FilterId, H5Z_FLAG_MANDATORY, 1, &block_size);
  }
}

ChunkEncoder::ChunkEncoder(Codec codec, int deflate_level, size_t record_size, size_t chunk_records)
    : codec_(codec),
      deflate_level_(deflate_level),
      record_size_(record_size),
      chunk_records_(chunk_records),
      chunk_bytes_(record_size * chunk_records) {
  shuffled_.resize(chunk_bytes_);
  switch (codec_) {
    case Codec::kNone:
      out_.resize(chunk_bytes_);
      break;
    case Codec::kShuffleLz4:
      out_.resize(Lz4EncodedBound(chunk_bytes_, 0));
      break;
    case Codec::kShuffleDeflate:
      out_.resize(compressBound(static_cast<uLong>(chunk_bytes_)));
      break;
  }
}

bool ChunkEncoder::WriteRows(hid_t dset, uint64_t first, std::span<const uint8_t> rows) {
  for (size_t at = 0; at < rows.size(); at += chunk_bytes_) {
    auto bytes = Encode(rows.subspan(at, std::min(chunk_bytes_, rows.size() - at)));
    hsize_t offset[1] = {first + at / record_size_};
    if (bytes.empty() || H5Dwrite_chunk(dset, H5P_DEFAULT, 0, offset, bytes.size(), bytes.data()) < 0) {
      return false;
    }
  }
  return true;
}

std::span<const uint8_t> ChunkEncoder::Encode(std::span<const uint8_t> records) {
  records = records.first(std::min(records.size(), chunk_bytes_));
  if (codec_ == Codec::kNone) {
    std::memcpy(out_.data(), records.data(), records.size());
    std::memset(out_.data() + records.size(), 0, chunk_bytes_ - records.size());
    return {out_.data(), chunk_bytes_};
  }
  // The zero tail of a partly filled chunk is shuffled too: HDF5 compresses whole chunks.
  std::span<const uint8_t> whole = records;
  if (records.size() < chunk_bytes_) {
    padded_.resize(chunk_bytes_);
    std::memcpy(padded_.data(), records.data(), records.size());
    std::memset(padded_.data() + records.size(), 0, chunk_bytes_ - records.size());
    whole = padded_;
  }
  ShuffleRecords(whole, record_size_, shuffled_.data());
  if (codec_ == Codec::kShuffleLz4) {
    size_t n = Lz4EncodeInto(shuffled_, 0, kLz4WriterAcceleration, out_.data());
    return {out_.data(), n};
  }
  uLongf n = static_cast<uLongf>(out_.size());
  if (compress2(out_.data(), &n, shuffled_.data(), static_cast<uLong>(chunk_bytes_), deflate_level_) != Z_OK) {
    return {};
  }
  return {out_.data(), static_cast<size_t>(n)};
}

}  // namespace commprof::h5
