// Wait and straggler metrics over matched blocking collectives (docs/metrics.md is the
// authoritative text; the formulas here cite its sections).
//
// Per instance (§2): arrival a_r = entry, last arrival L = max a_r, skew = L - min a_r;
// wait_r = L - a_r for all-to-all collectives; rooted ones charge only the side that waits
// (Bcast/Scatter: non-roots wait max(0, a_root - a_r); Reduce/Gather: the root waits L - a_root);
// the last arriver is the straggler of the instance when skew exceeds the threshold, and the delay
// it alone caused is L minus the second-latest arrival.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/match/collective_instances.h"

namespace commprof {

struct RankWaitMetrics {
  uint32_t rank = 0;
  std::string host;
  uint64_t instances = 0;
  int64_t comm_time_ns = 0;     // sum of the rank's time inside matched blocking collectives
  int64_t wait_time_ns = 0;     // sum of wait_r
  double wait_share = 0.0;      // wait_time / comm_time
  uint64_t times_last = 0;      // instances where it was the straggler
  int64_t delay_caused_ns = 0;  // sum of the delay it alone caused
  int64_t wait_imposed_ns = 0;  // sum of the others' waits in the instances where it was last
  int64_t compute_before_ns = 0;  // sum of the gaps before its entries (time outside these calls)
};

struct TypeWaitMetrics {
  uint8_t op = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;  // mean bytes per instance
  double mean_duration_ns = 0;
  double mean_wait_ns = 0;
  int64_t skew_p50_ns = 0;
  int64_t skew_p99_ns = 0;
};

struct StragglerVerdict {
  bool found = false;
  uint32_t rank = 0;
  std::string host;
  double share_last = 0;  // of complete instances
  int64_t delay_caused_ns = 0;
  bool persistent = false;  // last in most of both halves of the run
  std::string cause;        // "compute" (longer compute before the collective) or "transfer"
};

struct WaitReport {
  uint64_t matched = 0;     // complete instances
  uint64_t incomplete = 0;  // instances missing a rank
  int64_t skew_threshold_ns = 0;
  std::vector<RankWaitMetrics> ranks;
  std::vector<TypeWaitMetrics> types;
  StragglerVerdict verdict;
};

WaitReport ComputeWaitMetrics(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances);

const char* OpTypeName(uint8_t op);

}  // namespace commprof
