#include "analysis/match/clock_violations.h"

#include <algorithm>

#include "analysis/match/collective_instances.h"

namespace commprof {
namespace {

bool Violates(const CollectiveInstance& in) {
  const auto& a = in.arrivals;
  auto max_start_where = [&](auto pred) {
    int64_t m = INT64_MIN;
    for (const auto& x : a) {
      if (pred(x)) {
        m = std::max(m, x.start);
      }
    }
    return m;
  };
  switch (in.op) {
    case COMMPROF_OP_BCAST:
    case COMMPROF_OP_SCATTER:
    case COMMPROF_OP_SCATTERV: {
      int64_t root_start = max_start_where([&](const Arrival& x) { return x.local_rank == in.root; });
      if (root_start == INT64_MIN) {
        return false;  // the root's record is missing
      }
      for (const auto& x : a) {
        if (x.local_rank != in.root && x.end < root_start) {
          return true;
        }
      }
      return false;
    }
    case COMMPROF_OP_REDUCE:
    case COMMPROF_OP_GATHER:
    case COMMPROF_OP_GATHERV: {
      int64_t last = max_start_where([](const Arrival&) { return true; });
      for (const auto& x : a) {
        if (x.local_rank == in.root && x.end < last) {
          return true;
        }
      }
      return false;
    }
    case COMMPROF_OP_SCAN:
      for (const auto& x : a) {
        if (x.end < max_start_where([&](const Arrival& y) { return y.local_rank <= x.local_rank; })) {
          return true;
        }
      }
      return false;
    case COMMPROF_OP_EXSCAN:  // rank i waits for ranks 0 ... i-1; rank 0 for nobody
      for (const auto& x : a) {
        if (x.end < max_start_where([&](const Arrival& y) { return y.local_rank < x.local_rank; })) {
          return true;
        }
      }
      return false;
    default: {
      int64_t last = max_start_where([](const Arrival&) { return true; });
      for (const auto& x : a) {
        if (x.end < last) {
          return true;
        }
      }
      return false;
    }
  }
}

}  // namespace

ClockViolations CountClockViolations(const std::vector<CollectiveInstance>& instances) {
  ClockViolations out;
  for (const auto& in : instances) {
    if (in.arrivals.size() < 2 || in.nonblocking || in.zero_byte()) {
      // Non-blocking: completion is not an exit from a blocking call. Zero bytes: the call
      // returns without waiting for anyone, so an early exit is no violation.
      continue;
    }
    ++out.instances_checked;
    if (Violates(in)) {
      ++out.violations;
    }
  }
  return out;
}

Result<ClockViolations> CountClockViolations(const ProfileReader& reader, bool aligned) {
  auto instances = LoadCollectiveInstances(reader, aligned);
  if (!instances.ok()) {
    return instances.status();
  }
  return CountClockViolations(instances.value());
}

}  // namespace commprof
