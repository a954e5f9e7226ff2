// Memory in use over time, per rank, device and memory kind, from the allocation and free records
// (kinds 14 and 15, CUPTI's MEMORY2 activity; docs/metrics.md §7 is the authoritative text).
//
// Concepts: each allocation adds its bytes to the (device, memory kind) it names and remembers its
// address; a free subtracts what was allocated at its address, whatever size the free record
// carries (CUPTI reports the size on both, and the allocation is the authority). A free of an
// address never allocated while tracing (memory allocated before the collector started) is counted
// as unmatched and changes nothing: the series never goes below zero and never invents memory.
// Records are taken in time order on the aligned clock (stored order breaks ties), one point per
// record: the bytes in use just after it.
// Data: per rank, the alloc/free records (a few per training step, far fewer than kernels) and
// one map of live addresses per (device, kind); events are streamed in chunks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "commprof/event.h"
#include "core/clock_model.h"
#include "core/status.h"

namespace commprof {

struct MemoryPoint {
  int64_t time_ns = 0;       // aligned reference clock
  int64_t bytes_in_use = 0;  // after this record
  int64_t delta_bytes = 0;   // + allocated, - freed, 0 for an unmatched free
};

struct MemorySeries {
  uint32_t rank = 0;
  uint16_t device = 0;
  uint8_t memory_kind = 0;  // CUpti_ActivityMemoryKind, as stored in the records' subtype
  std::vector<MemoryPoint> points;
  int64_t peak_bytes = 0;
  int64_t peak_time_ns = 0;  // first time the peak was reached
  int64_t final_bytes = 0;   // in use after the last record (allocated and never freed while traced)
  uint64_t allocs = 0;
  uint64_t frees = 0;
  uint64_t unmatched_frees = 0;
};

// How every output names a series' device: "host" for host memory (COMMPROF_HOST_DEVICE, e.g. an
// imported trace's CPU allocations), "cuda:N" for GPU N.
inline std::string MemoryDeviceLabel(uint16_t device) {
  return device == COMMPROF_HOST_DEVICE ? std::string("host") : "cuda:" + std::to_string(device);
}

// One rank's series, from its events in any number of chunks (in stored order).
class MemoryUsageBuilder {
 public:
  MemoryUsageBuilder(uint32_t rank, const ClockModel& clock) : rank_(rank), clock_(clock) {}
  void Add(std::span<const commprof_event> events);
  // Series sorted by (device, memory kind); none if the rank has no alloc/free record.
  std::vector<MemorySeries> Finish();

 private:
  struct Record {
    int64_t time;
    uint64_t order;
    uint64_t address;
    uint64_t bytes;
    uint16_t device;
    uint8_t memory_kind;
    bool alloc;
  };
  uint32_t rank_;
  ClockModel clock_;
  std::vector<Record> records_;
};

// Every rank's series, ranks in file order.
Result<std::vector<MemorySeries>> ComputeMemoryUsage(const ProfileReader& reader);

}  // namespace commprof
