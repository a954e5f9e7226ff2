// Streaming reader of one Kineto (torch.profiler) Chrome-trace file, plain or gzip JSON
// (docs/kineto-import.md).
//
// Why not a whole-document parser: Kineto files reach gigabytes, and memory must not grow with
// the file. This reader holds one decompressed chunk and the text of one event at a time,
// whatever the file size: it walks the top-level object itself (a byte-level state machine
// that only tracks strings and nesting depth) and hands out
//   - every top-level member except `traceEvents` as (key, raw JSON text of the value), and
//   - every element of `traceEvents` as its raw JSON text, with its index in the array,
// each padded for simdjson's On Demand parser, which the caller runs on that small text.
// Members may come in any order: Kineto writes `baseTimeNanoseconds` after the events.
//
// Errors (truncated file, a top-level value that is not an object, `traceEvents` that is not an
// array, an element that is not an object) are Status values naming the file, the byte offset in
// the decompressed text and, inside the array, the event index. Everything handed out before the
// error stays valid, so a caller can keep what a truncated file held.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace commprof::kineto {

// Extra bytes readable past the end of every text handed out (simdjson::SIMDJSON_PADDING).
inline constexpr size_t kJsonPadding = 64;

struct JsonStreamCallbacks {
  // A top-level member other than traceEvents; `raw` is its value's JSON text.
  std::function<Status(std::string_view key, std::string_view raw)> member;
  // One element of traceEvents. Both texts are followed by at least kJsonPadding readable bytes
  // (of unspecified content), as simdjson::padded_string_view needs.
  std::function<Status(uint64_t index, std::string_view raw)> event;
  // Called now and then with the compressed bytes consumed so far (for a progress bar).
  std::function<void(uint64_t compressed_bytes_read)> progress;
};

// Reads `path` (gzip or plain, detected from the content) once from start to end. gzip is inflated
// by zlib with its check values verified here; members may be concatenated, as gzread allows.
Status ReadKinetoJson(const std::string& path, const JsonStreamCallbacks& callbacks);

// gzip's CRC-32 (the value of zlib's crc32()) as the reader computes it to check .json.gz members.
uint32_t GzipCrc32(uint32_t crc, const unsigned char* data, size_t size);

}  // namespace commprof::kineto
