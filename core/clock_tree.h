// Hierarchical clock alignment (docs/clock-alignment.md, "Hosts and the tree"): the pure parts,
// so they can be tested without MPI.
//
// Purpose: align P ranks in O(log hosts) rounds of ping-pongs instead of P - 1 in a row.
// Concepts: ranks that read one clock (same *clock domain*: boot id and clock source, see
// collector/host_clock.h) form a *host*; its lowest world rank is the host's *leader*, and the
// others take the leader's model as it is (they share its clock, so that is exact). The leaders,
// numbered 0..H-1 in the order of their world ranks (rank 0's host is leader 0, the reference),
// form a binomial tree: leader j > 0 measures against its parent j - 2^floor(log2 j) (j with its
// highest bit cleared), which answers with its own clock already mapped to the reference by its
// model. So a leader's samples are against the reference itself, and its points' half round trips
// add its parent's (the parent's error is in every reading it sends). Leader j is served in
// round floor(log2 j) after its parent got its own point, so all H leaders are done after
// ceil(log2 H) rounds, the pairs of one round measuring at the same time.
// Example, 6 hosts: round 0: 0-1; round 1: 0-2, 1-3; round 2: 0-4, 1-5.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/clock_model.h"

namespace commprof {

// The binomial tree over leaders 0..count-1: the parent of leader j (-1 for 0), and the leaders
// that j serves, in the order it serves them (one per round, from the round after j's own).
int ClockTreeParent(int j);
std::vector<int> ClockTreeChildren(int j, int count);
// The round in which leader j is measured (j > 0): floor(log2 j); rounds needed for `count`
// leaders: ceil(log2 count).
int ClockTreeRound(int j);
int ClockTreeRounds(int count);

// Ranks grouped by the clock domain each reported (keys[r] for world rank r).
struct ClockHosts {
  std::vector<int> leader_of;     // per world rank: the lowest world rank with the same key
  std::vector<int> leaders;       // world ranks of the leaders, ascending (leaders[0] == 0)
  std::vector<int> leader_index;  // per world rank: the index of its leader in `leaders`
};
ClockHosts GroupByClockDomain(std::span<const uint64_t> keys);

// One leader's epoch point from samples whose reference readings are its parent's clock mapped to
// the reference: EstimateEpoch, with `parent_error_ns` (the bound of those readings, the parent's
// latest point's half_rtt_ns) added to half_rtt_ns. False when no sample is usable.
bool EstimateEpochThroughParent(std::span<const ClockSample> samples, int64_t parent_error_ns, ClockPoint& out);

// The error bound a parent sends with a reading of its clock mapped to the reference at local
// time `now_ns`: its newest point's half_rtt_ns, plus DriftAllowanceNs of the time since that
// point (the model extrapolates past it, and an unmeasured drift moves the reading meanwhile:
// serving earlier children, or descheduled on a loaded machine). `is_reference`: the parent is
// rank 0, whose clock is the reference itself, exact at any time.
int64_t ParentReadingErrorNs(const ClockPoint& newest, int64_t now_ns, bool is_reference);

// Whether a leader keeps an epoch's point (`kept`: its points so far). An epoch in which every
// sample was slow (the leader or its parent descheduled throughout: a loaded machine) has a large
// half round trip and an offset off by as much; kept, it would widen the bound of the whole run.
// So a point is kept when it is the first, or when its half round trip is at most
// max(kEpochOutlierFactor x the median of the kept ones, kEpochOutlierFloorNs). A point not kept
// is as if the epoch gave none: the leader's members and children get none from it either.
inline constexpr int64_t kEpochOutlierFactor = 4;
inline constexpr int64_t kEpochOutlierFloorNs = 20'000;
bool KeepEpochPoint(std::span<const ClockPoint> kept, const ClockPoint& p);

}  // namespace commprof
