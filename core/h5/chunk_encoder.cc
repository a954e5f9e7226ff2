#include "core/h5/chunk_encoder.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/h5/byte_shuffle.h"
#include "core/h5/h5_util.h"
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

size_t ChunkDecoder::ShuffleLz4ChunkRecords(hid_t dset) {
  Handle dcpl(H5Dget_create_plist(dset));
  hsize_t chunk = 0;
  bool ok = dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED && H5Pget_chunk(dcpl.get(), 1, &chunk) == 1 &&
            H5Pget_nfilters(dcpl.get()) == 2;
  const H5Z_filter_t want[2] = {H5Z_FILTER_SHUFFLE, kLz4FilterId};
  for (unsigned i = 0; ok && i < 2; ++i) {
    unsigned flags = 0;
    size_t n = 0;
    ok = H5Pget_filter2(dcpl.get(), i, &flags, &n, nullptr, 0, nullptr, nullptr) == want[i];
  }
  return ok ? static_cast<size_t>(chunk) : 0;
}

ChunkDecoder::ChunkDecoder(size_t record_size, size_t chunk_records)
    : record_size_(record_size), chunk_records_(chunk_records) {}

bool ChunkDecoder::ReadRows(hid_t dset, uint64_t first, uint64_t count, uint8_t* out) {
  const size_t chunk_bytes = chunk_records_ * record_size_;
  for (uint64_t at = first; at < first + count; at += chunk_records_) {
    hsize_t offset[1] = {at};
    hsize_t stored = 0;
    if (H5Dget_chunk_storage_size(dset, offset, &stored) < 0 || stored == 0) {
      return false;
    }
    raw_.resize(static_cast<size_t>(stored));
    uint32_t mask = 0;
    if (H5Dread_chunk(dset, H5P_DEFAULT, offset, &mask, raw_.data()) < 0 || mask != 0 ||
        !Lz4DecodeChunkInto(raw_, decoded_) || decoded_.size() != chunk_bytes) {
      return false;
    }
    const uint64_t n = std::min<uint64_t>(chunk_records_, first + count - at);
    uint8_t* dst = out + (at - first) * record_size_;
    if (n == chunk_records_) {
      UnshuffleRecords(decoded_, record_size_, dst);  // straight into place
    } else {
      plain_.resize(chunk_bytes);
      UnshuffleRecords(decoded_, record_size_, plain_.data());
      std::memcpy(dst, plain_.data(), static_cast<size_t>(n) * record_size_);
    }
  }
  return true;
}

}  // namespace commprof::h5
