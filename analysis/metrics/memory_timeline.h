// The memory timeline of a job (torch's export_memory_timeline, for every rank at once): per rank
// and device, the bytes in use over time stacked by memory kind, the peak, and what was live then.
// docs/metrics.md §7.1–§7.3 is the authoritative text; docs/memory-timeline.md the JSON it feeds.
//
// Concepts. The rules of memory_usage.h (§7) hold unchanged: records in time order on the aligned
// clock (stored order breaks ties), a free subtracts what was allocated at its address within its
// (device, memory kind), an unknown free changes nothing, an address allocated again replaces its
// block. What this adds is the device view: one chart per (rank, device) whose categories are the
// memory kinds its records name, and whose total is their sum; the peak is the first record after
// which that total is highest. The live set at the peak is rebuilt by replaying the records up to
// the peak (no snapshot is kept while sweeping), sorted largest first; the `top_live` largest are
// named by a second pass over the rank's events: the CUDA API call with the record's correlation id
// (CUPTI) or the innermost imported operator on the record's thread enclosing it (torch).
//
// Data: per rank, its alloc/free records (64 bytes each) while it is being read, and per (rank,
// device) one time and one value per category per record; events are streamed in chunks. The
// second pass keeps only the `top_live` allocations per device it names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "core/status.h"

namespace commprof {

struct MemoryTimelineOptions {
  std::vector<uint32_t> ranks;  // empty: every readable rank
  size_t top_live = 10;         // live allocations listed (and named) per peak
};

struct LiveAllocation {
  uint64_t address = 0;
  int64_t bytes = 0;
  int64_t allocated_ns = 0;  // aligned clock
  uint8_t memory_kind = 0;
  uint32_t correlation = 0;  // CUPTI correlation id (0: none)
  uint32_t thread_id = 0;
  std::string name;          // the record's own name (a static variable's), "" if none
  std::string allocated_by;  // the CUDA API call or imported operator found for it, "" if none
};

struct DeviceTimeline {
  uint32_t rank = 0;
  uint16_t device = 0;              // COMMPROF_HOST_DEVICE: host memory (imported CPU events)
  std::vector<uint8_t> categories;  // the memory kinds of its records, ascending
  std::vector<int64_t> time_ns;     // one per record, aligned clock, ascending
  // in_use[c][i]: bytes of category c in use after record i.
  std::vector<std::vector<int64_t>> in_use;
  int64_t peak_bytes = 0;  // highest total (0 if memory only ever went down)
  int64_t peak_time_ns = 0;
  size_t peak_index = 0;  // the record after which the peak was first reached
  std::vector<int64_t> peak_by_category;
  std::vector<LiveAllocation> live;  // live at the peak, largest first, at most top_live
  uint64_t live_count = 0;           // all allocations live at the peak
  int64_t more_bytes = 0;            // bytes of those not listed in `live`
  uint64_t allocs = 0, frees = 0, unmatched_frees = 0;
  // Allocations at address 0: blocks that cannot be told apart (a torch trace without "Addr", or
  // a file imported before the importer kept it); more than one makes the series wrong.
  uint64_t unaddressed_allocs = 0;
  int64_t final_bytes = 0;
  // Imported torch events: memory the allocator held before the first record (its "Total
  // Allocated" minus the first record's change); none for CUPTI records.
  std::optional<int64_t> baseline_bytes;

  int64_t TotalAt(size_t i) const;
};

struct MemoryTimeline {
  std::vector<DeviceTimeline> devices;  // by rank, then device
  int64_t start_ns = 0;                 // earliest record of any device (aligned clock)
  int64_t end_ns = 0;                   // latest
  std::vector<uint32_t> ranks_without_records;
};

// Reads the selected ranks one at a time. A selected rank that is not in the file is the caller's
// business (checked before); unreadable ranks (info().faults) are skipped.
Result<MemoryTimeline> BuildMemoryTimeline(const ProfileReader& reader, const MemoryTimelineOptions& options);

// Which records of `d` to draw with at most `max_points` points (0 or >= the count: all): the time
// axis [start_ns, end_ns] is cut into max_points / 4 equal buckets and each bucket keeps its first
// and last record and those with the lowest and highest total, so every bucket's extremes, hence the
// peak, survive. Indices ascending.
std::vector<size_t> DownsampleIndices(const DeviceTimeline& d, size_t max_points, int64_t start_ns, int64_t end_ns);

}  // namespace commprof
