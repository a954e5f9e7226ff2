// `commprof export --format memory-json`: the memory timeline (analysis/metrics/memory_timeline.h)
// as one versioned JSON document, documented key by key in docs/memory-timeline.md. The document
// is written as it goes (no JSON tree of the series is built), so memory stays the timeline's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/metrics/memory_timeline.h"
#include "core/status.h"

namespace commprof {

inline constexpr const char* kMemoryTimelineSchema = "commprof-memory-timeline";
inline constexpr int kMemoryTimelineSchemaVersion = 1;

struct MemoryExportOptions {
  std::string file;                // the input file, as named on the command line
  std::optional<uint64_t> window;  // --window K
  size_t max_points = 0;           // per chart, DownsampleIndices; 0: every record
  // Ranks that could not be read (the reader's faults): said in the document, not left to guess.
  std::vector<uint32_t> unreadable_ranks;
};

// The JSON document; `out` is the caller's (checked for write errors by the caller).
void WriteMemoryTimelineJson(const MemoryTimeline& t, const MemoryExportOptions& o, std::ostream& out);

// "device" / "pinned" / ...: a category's name (the memory kind's short name).
std::string MemoryCategoryName(uint8_t memory_kind);

}  // namespace commprof
