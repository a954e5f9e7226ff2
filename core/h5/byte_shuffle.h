// HDF5's shuffle filter (filter 2) done fast for whole chunks: the writer shuffles the chunks it
// encodes itself (core/h5/chunk_encoder.h), the reader unshuffles the chunks it decodes
// itself (ChunkDecoder in core/h5/chunk_encoder.h), both skipping HDF5's byte-by-byte loop, which was half
// of the writer's time and a fifth of a report's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace commprof::h5 {

// Byte j of record i goes to out[j * n + i] (n = in.size() / record_size), as HDF5's shuffle does.
// The widest vector instructions the processor has are used (chosen once).
void ShuffleRecords(std::span<const uint8_t> in, size_t record_size, uint8_t* out);

// The same with at most the given instructions, so that a test can check each path the processor
// has against the others; a path the processor lacks is skipped (the next narrower one serves).
enum class ShufflePath { kPortable, kSse2, kAvx2, kAvx512 };
void ShuffleRecordsUsing(ShufflePath widest, std::span<const uint8_t> in, size_t record_size, uint8_t* out);
bool ShufflePathAvailable(ShufflePath path);
// The inverse: `in` holds record_size planes of n bytes; record i's byte j comes from in[j * n + i].
inline void UnshuffleRecords(std::span<const uint8_t> in, size_t record_size, uint8_t* out) {
  // The planes are records of n bytes; shuffling them transposes back.
  ShuffleRecords(in, in.size() / record_size, out);
}

}  // namespace commprof::h5
