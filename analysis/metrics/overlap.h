// Overlap of communication with computation, exposed communication and the temporal breakdown,
// per rank and per GPU (docs/metrics.md §6 is the authoritative text).
//
// Concepts: C is the union of the rank's communication intervals, K the union of its computation
// intervals; overlap = |C ∩ K| / |C| (0 when C is empty), exposed communication = |C \ K|. What
// C and K are depends on what was recorded (the *basis*):
//  - gpu-kernels (the rank has compute-kernel records): K = its compute kernels; C = its
//    communication kernels and NCCL collectives plus its host MPI communication (C_mpi below);
//    memory = its memcpy/memset records. Each device also gets its own figures from its own
//    kernels only.
//  - cpu-outside-mpi (no compute-kernel records): computation is the time outside MPI calls.
//    C = C_mpi: blocking collectives and point-to-point calls, non-blocking ones from issue to
//    completion, every Wait/Test call and communicator creation; M = the time inside MPI calls
//    (those blocking calls, Wait/Test, communicator creation, MPI_Init, MPI_Finalize);
//    K = span \ M.
// The breakdown cuts the active span (first to last event) into compute, exposed communication,
// memory and idle, which add up to the span: each instant counts once, by that priority.
//
// Data: per rank, a few vectors of intervals on the aligned clock (one rank's worth at most,
// 16 bytes per interval) that are sorted and merged once (O(n log n)); events are streamed in
// chunks and never kept.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/metrics/interval_set.h"
#include "commprof/event.h"
#include "core/clock_model.h"
#include "core/status.h"

namespace commprof {

enum class OverlapBasis { kCpuOutsideMpi, kGpuKernels };
const char* OverlapBasisName(OverlapBasis basis);  // "cpu-outside-mpi" | "gpu-kernels"

// The active span cut into four disjoint parts: compute + exposed_comm + memory + idle = span.
struct TimeBreakdown {
  int64_t span_ns = 0;
  int64_t compute_ns = 0;
  int64_t exposed_comm_ns = 0;
  int64_t memory_ns = 0;
  int64_t idle_ns = 0;
};

// Figures of one GPU of a gpu-kernels rank, from that GPU's own kernels and copies.
struct DeviceOverlap {
  uint16_t device = 0;
  int64_t comm_ns = 0;  // |C_d|
  double overlap = 0.0;
  int64_t exposed_comm_ns = 0;
  TimeBreakdown breakdown;  // over the device's span: its first to last event
};

struct RankOverlap {
  uint32_t rank = 0;
  OverlapBasis basis = OverlapBasis::kCpuOutsideMpi;
  int64_t comm_ns = 0;                 // |C|
  double overlap = 0.0;                // |C ∩ K| / |C|, 0 when |C| = 0
  int64_t exposed_comm_ns = 0;         // |C \ K|
  TimeBreakdown breakdown;             // over the rank's span: its first to last event of any kind
  uint64_t incomplete_events = 0;      // communication flagged INCOMPLETE, left out of C
  std::vector<DeviceOverlap> devices;  // gpu-kernels ranks: one per device with events, by id
};

// Accumulates one rank's events (any order, in chunks) and computes its figures. Times are put
// on the job time base with `clock` (an empty model leaves them as recorded).
class RankOverlapBuilder {
 public:
  explicit RankOverlapBuilder(ClockModel clock = ClockModel()) : clock_(std::move(clock)) {}

  void Add(std::span<const commprof_event> events);
  // Consumes the intervals (they move into the sets): call once, last.
  RankOverlap Finish(uint32_t rank);

 private:
  struct Span {
    int64_t first = INT64_MAX;
    int64_t last = INT64_MIN;
    void Extend(Interval iv);
    int64_t length() const { return last > first ? last - first : 0; }
  };
  struct DeviceIntervals {
    std::vector<Interval> comm, compute, memory;
    Span span;
  };

  ClockModel clock_;
  Span span_;
  std::vector<Interval> mpi_comm_;  // C_mpi
  std::vector<Interval> mpi_call_;  // M: time inside MPI calls
  std::map<uint16_t, DeviceIntervals> devices_;
  bool has_compute_kernel_ = false;
  uint64_t incomplete_ = 0;
};

// One rank's figures from a plain list of its events (tests drive the definitions with this).
RankOverlap ComputeRankOverlap(uint32_t rank, std::span<const commprof_event> events,
                               const ClockModel& clock = ClockModel());

// Every rank of the file, in rank order, on the aligned clock; streams one rank at a time.
Result<std::vector<RankOverlap>> ComputeOverlap(const ProfileReader& reader);

}  // namespace commprof
