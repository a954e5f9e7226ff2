// Sets of time as sorted, disjoint half-open intervals: the arithmetic behind the overlap,
// exposed-communication and breakdown metrics (docs/metrics.md §6).
//
// An IntervalSet is always normalized: intervals sorted by begin, non-empty, and neither
// overlapping nor touching ([0,2) and [2,5) become [0,5)), so its length is the plain sum and the
// binary operations are one linear merge of two sorted lists. Building one from arbitrary
// intervals is a sort and a sweep, O(n log n); everything else is O(n + m).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace commprof {

// [begin, end) in ns; empty when end <= begin.
struct Interval {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t length() const { return end > begin ? end - begin : 0; }
  bool operator==(const Interval&) const = default;
};

class IntervalSet {
 public:
  IntervalSet() = default;

  // The union of `intervals` (any order, overlaps and empty ones allowed).
  static IntervalSet FromIntervals(std::vector<Interval> intervals);

  const std::vector<Interval>& intervals() const { return intervals_; }
  bool empty() const { return intervals_.empty(); }
  int64_t Length() const;  // total covered ns

 private:
  explicit IntervalSet(std::vector<Interval> normalized) : intervals_(std::move(normalized)) {}
  friend IntervalSet Union(const IntervalSet& a, const IntervalSet& b);
  friend IntervalSet Intersection(const IntervalSet& a, const IntervalSet& b);
  friend IntervalSet Difference(const IntervalSet& a, const IntervalSet& b);

  std::vector<Interval> intervals_;  // normalized (see the file comment)
};

IntervalSet Union(const IntervalSet& a, const IntervalSet& b);
IntervalSet Intersection(const IntervalSet& a, const IntervalSet& b);
IntervalSet Difference(const IntervalSet& a, const IntervalSet& b);  // a \ b

// Lengths without building the set.
int64_t IntersectionLength(const IntervalSet& a, const IntervalSet& b);
int64_t DifferenceLength(const IntervalSet& a, const IntervalSet& b);  // |a \ b| = |a| - |a ∩ b|

// Sweeps several sets at once: calls `fn(piece, mask)` for every maximal interval on which the
// membership is constant and non-empty, in time order; bit i of `mask` says that sets[i] covers
// the piece. At most 32 sets. Pieces with mask 0 (covered by none) are not reported.
void Sweep(std::span<const IntervalSet* const> sets, const std::function<void(Interval, uint32_t)>& fn);

}  // namespace commprof
