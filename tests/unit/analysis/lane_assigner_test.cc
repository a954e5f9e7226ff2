// LaneAssigner (analysis/export/lane_assigner.h): hand-worked lane sequences, and a randomized
// check of the invariant the Chrome trace relies on (every lane nests or is disjoint) against a
// brute-force count of the lanes needed.
#include "analysis/export/lane_assigner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace commprof {
namespace {

using Interval = std::pair<int64_t, int64_t>;

// Sorted as the assigner requires: start ascending, end descending.
void SortForPlacement(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
}

bool PartiallyOverlap(const Interval& a, const Interval& b) {
  return (a.first < b.first && b.first < a.second && a.second < b.second) ||
         (b.first < a.first && a.first < b.second && b.second < a.second);
}

TEST(LaneAssigner, NestedAndDisjointSlicesStayOnLaneZero) {
  LaneAssigner a;
  EXPECT_EQ(a.Place(0, 100), 0u);    // outer
  EXPECT_EQ(a.Place(0, 50), 0u);     // same start, shorter: nests
  EXPECT_EQ(a.Place(10, 20), 0u);    // nests in [0,50]
  EXPECT_EQ(a.Place(50, 100), 0u);   // touches [0,50]'s end (disjoint from it), nests in [0,100]
  EXPECT_EQ(a.Place(100, 100), 0u);  // zero length at [0,100]'s end: disjoint
  EXPECT_EQ(a.Place(200, 300), 0u);
  EXPECT_EQ(a.lanes(), 1u);
}

TEST(LaneAssigner, PartialOverlapOpensALaneAndLanesAreReused) {
  // The header's example plus a third concurrent slice:
  // [0,10] lane 0; [2,4] nests -> 0; [5,20] crosses 10 -> 1; [6,30] crosses 20 and 10 -> 2;
  // [12,14]: lane 0 is free again after 10 -> 0; [21,25]: lane 0 free ([12,14] ended) -> 0.
  LaneAssigner a;
  EXPECT_EQ(a.Place(0, 10), 0u);
  EXPECT_EQ(a.Place(2, 4), 0u);
  EXPECT_EQ(a.Place(5, 20), 1u);
  EXPECT_EQ(a.Place(6, 30), 2u);
  EXPECT_EQ(a.Place(12, 14), 0u);
  EXPECT_EQ(a.Place(21, 25), 0u);
  EXPECT_EQ(a.lanes(), 3u);
  // A non-blocking collective issued at 40, completed at 100, overlapping a blocking call that
  // starts inside it and ends after it: the call goes to lane 1, the first lane it fits.
  EXPECT_EQ(a.Place(40, 100), 0u);
  EXPECT_EQ(a.Place(90, 120), 1u);
  // Something nested in that call at [95,110] fits lane 1 (inside [90,120]), not lane 0
  // ([40,100] would be crossed).
  EXPECT_EQ(a.Place(95, 110), 1u);
  a.Reset();
  EXPECT_EQ(a.lanes(), 0u);
  EXPECT_EQ(a.Place(5, 6), 0u);
}

TEST(LaneAssigner, APlacementMustHoldInEveryView) {
  // Exact view: parent [1001,6001], child [1002,6001] nest (same end). A reader that truncates
  // sees the parent as [1000,6000] and the child as [1002,6001]: crossing, so the child takes a
  // second lane. A child ending 2 ns earlier in every view stays on lane 0.
  LaneSlice parent, child, inner;
  parent.start = {1001, 1000, 1000};
  parent.end = {6001, 6000, 6000};
  child.start = {1002, 1002, 1002};
  child.end = {6001, 6001, 6001};
  inner.start = {1003, 1002, 1002};
  inner.end = {5999, 5998, 5998};
  LaneAssigner a;
  EXPECT_EQ(a.Place(parent), 0u);
  EXPECT_EQ(a.Place(child), 1u);
  EXPECT_EQ(a.Place(inner), 0u);
  // Touching both open slices in the exact view, but starting a ns before their ends in view 1
  // (parent ends at 6000, child at 6001 there): disjoint from neither, enclosed by neither.
  LaneSlice next;
  next.start = {6001, 5999, 6001};
  next.end = {7000, 6999, 7000};
  EXPECT_EQ(a.Place(next), 2u);
  EXPECT_EQ(a.lanes(), 3u);
  // Past both in every view: back to lane 0.
  EXPECT_EQ(a.Place(LaneSlice::Exact(8000, 9000)), 0u);
}

TEST(LaneAssigner, RandomSlicesNeverPartiallyOverlapWithinALane) {
  std::mt19937_64 rng(12345);
  for (int round = 0; round < 200; ++round) {
    std::vector<Interval> v;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      int64_t s = static_cast<int64_t>(rng() % 200);
      int64_t len = static_cast<int64_t>(rng() % 40);  // zero-length ones included
      v.emplace_back(s, s + len);
    }
    SortForPlacement(v);
    LaneAssigner a;
    std::vector<uint32_t> lane(v.size());
    for (size_t i = 0; i < v.size(); ++i) lane[i] = a.Place(v[i].first, v[i].second);
    for (size_t i = 0; i < v.size(); ++i) {
      for (size_t j = i + 1; j < v.size(); ++j) {
        if (lane[i] == lane[j]) {
          ASSERT_FALSE(PartiallyOverlap(v[i], v[j]))
              << "round " << round << ": [" << v[i].first << "," << v[i].second << "] and [" << v[j].first << ","
              << v[j].second << "] share lane " << lane[i];
        }
      }
    }
    // Lower bound: slices that pairwise partially overlap need distinct lanes; a chain of
    // slices each crossing the previous one's end is such a set when they all share a point.
    // At least: if any pair partially overlaps, two lanes are needed.
    bool any_partial = false;
    for (size_t i = 0; i < v.size() && !any_partial; ++i) {
      for (size_t j = i + 1; j < v.size(); ++j) any_partial = any_partial || PartiallyOverlap(v[i], v[j]);
    }
    EXPECT_EQ(a.lanes() > 1, any_partial) << "round " << round;
    // Upper bound: never more lanes than slices alive at one moment.
    int64_t max_alive = 0;
    for (int64_t t = 0; t < 240; ++t) {
      int64_t alive = 0;
      for (const auto& x : v) alive += (x.first <= t && t < x.second) ? 1 : 0;
      max_alive = std::max(max_alive, alive);
    }
    EXPECT_LE(static_cast<int64_t>(a.lanes()), std::max<int64_t>(1, max_alive)) << "round " << round;
  }
}

}  // namespace
}  // namespace commprof
