// Time categories per rank that add up (docs/metrics.md §9.5): the rank's active span cut into
// start-up, shutdown, waiting (charged to a root cause), transfer, unattributed blocked time,
// compute and idle.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "analysis/metrics/delay_costs.h"
#include "analysis/metrics/overlap.h"
#include "commprof/event.h"
#include "core/clock_model.h"

namespace commprof {

struct RankTime {
  int64_t span_ns = 0;
  int64_t compute_ns = 0;
  int64_t startup_ns = 0;   // MPI_Init(_thread), NCCL communicator init
  int64_t shutdown_ns = 0;  // MPI_Finalize
  int64_t transfer_ns = 0;
  int64_t wait_ns = 0;          // charged to a root cause (wait_by_culprit)
  int64_t unattributed_ns = 0;  // blocked in communication calls, charged to nobody
  int64_t idle_ns = 0;
  std::vector<std::pair<uint32_t, int64_t>> wait_by_culprit;  // root cause world rank, ns; largest first
};

// One rank's start-up and shutdown calls and its host communication calls (streamed in chunks).
class RankTimeBuilder {
 public:
  explicit RankTimeBuilder(ClockModel clock = ClockModel()) : clock_(std::move(clock)) {}
  void Add(std::span<const commprof_event> events);
  // What the events give on their own: start-up, shutdown and the union of the host
  // communication calls (its intervals are freed). Call once, after the last Add.
  struct Parts {
    int64_t startup_ns = 0;
    int64_t shutdown_ns = 0;
    int64_t blocked_ns = 0;  // |union of host communication calls|
  };
  Parts Summarize();

 private:
  ClockModel clock_;
  int64_t startup_ns_ = 0;
  int64_t shutdown_ns_ = 0;
  std::vector<Interval> blocked_;  // host communication calls
};

// The categories of one rank from its parts, its overlap figures (span, compute) and its delay
// figures (wait, transfer, wait by culprit).
RankTime ComposeRankTime(const RankTimeBuilder::Parts& parts, const RankOverlap& overlap, const RankDelay& delay);

}  // namespace commprof
