// The hierarchical clock alignment's pure parts (core/clock_tree.h): the binomial tree over host
// leaders, the grouping of ranks by clock domain, and offsets composed along the tree against a
// simulated truth (known offsets, random asymmetric delays).
#include "core/clock_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

namespace commprof {
namespace {

TEST(ClockTree, ParentsChildrenAndRoundsFormABinomialTreeOfLogarithmicDepth) {
  EXPECT_EQ(ClockTreeParent(0), -1);
  EXPECT_EQ(ClockTreeChildren(0, 6), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(ClockTreeChildren(1, 6), (std::vector<int>{3, 5}));
  EXPECT_EQ(ClockTreeChildren(2, 6), (std::vector<int>{}));
  EXPECT_EQ(ClockTreeChildren(0, 1), (std::vector<int>{}));
  EXPECT_EQ(ClockTreeParent(5), 1);
  EXPECT_EQ(ClockTreeParent(6), 2);
  EXPECT_EQ(ClockTreeRounds(1), 0);
  EXPECT_EQ(ClockTreeRounds(2), 1);
  EXPECT_EQ(ClockTreeRounds(5), 3);
  EXPECT_EQ(ClockTreeRounds(8), 3);
  EXPECT_EQ(ClockTreeRounds(9), 4);
  for (int count = 1; count <= 300; ++count) {
    SCOPED_TRACE(count);
    std::vector<int> served(static_cast<size_t>(count), 0);
    for (int j = 0; j < count; ++j) {
      int prev_round = ClockTreeRound(j);
      for (int c : ClockTreeChildren(j, count)) {
        ASSERT_LT(c, count);
        EXPECT_EQ(ClockTreeParent(c), j);
        // served after j got its own point, one child per round, in round order
        EXPECT_GT(ClockTreeRound(c), prev_round);
        prev_round = ClockTreeRound(c);
        ++served[static_cast<size_t>(c)];
      }
      if (j > 0) {
        EXPECT_EQ(served[static_cast<size_t>(j)], 1) << "leader " << j << " has exactly one parent";
        EXPECT_LT(ClockTreeRound(j), ClockTreeRounds(count)) << "every leader is done within ceil(log2 H) rounds";
        // the path to the root is at most the number of rounds long
        int depth = 0;
        for (int k = j; k != 0; k = ClockTreeParent(k)) ++depth;
        EXPECT_LE(depth, ClockTreeRounds(count));
      }
    }
  }
}

TEST(ClockTree, RanksWithEqualKeysShareTheirLowestRankAsLeaderAndRankZerosHostIsLeaderZero) {
  // ranks 0,2,5 on host A; 1,3 on B; 4 alone on C
  const std::vector<uint64_t> keys = {0xA, 0xB, 0xA, 0xB, 0xC, 0xA};
  ClockHosts h = GroupByClockDomain(keys);
  EXPECT_EQ(h.leaders, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(h.leader_of, (std::vector<int>{0, 1, 0, 1, 4, 0}));
  EXPECT_EQ(h.leader_index, (std::vector<int>{0, 1, 0, 1, 2, 0}));
  ClockHosts one = GroupByClockDomain(std::vector<uint64_t>(4, 7));
  EXPECT_EQ(one.leaders, (std::vector<int>{0}));
  EXPECT_EQ(one.leader_of, (std::vector<int>{0, 0, 0, 0}));
}

// Hosts with known clock offsets (host h reads reference time t as t + truth[h]), aligned over
// the tree as MpiClockSync does it: each leader, in round order, ping-pongs with its parent, which
// answers with its own clock mapped to the reference by its model and the bound of its point.
// Delays are random and asymmetric (1-200 us each way).
struct SimulatedTree {
  explicit SimulatedTree(std::vector<int64_t> offsets, uint32_t seed) : truth(std::move(offsets)), rng(seed) {
    const int count = static_cast<int>(truth.size());
    points.resize(truth.size());
    points[0] = {truth[0] + t, 0, 0};
    // round order: leaders sorted by the round they are measured in
    std::vector<int> order;
    for (int r = 0; r < ClockTreeRounds(count); ++r) {
      for (int j = 1; j < count; ++j) {
        if (ClockTreeRound(j) == r) order.push_back(j);
      }
    }
    for (int j : order) Measure(j);
  }
  void Measure(int j) {
    const int p = ClockTreeParent(j);
    const ClockModel parent_model({points[static_cast<size_t>(p)]});
    std::uniform_int_distribution<int64_t> delay(1'000, 200'000);
    std::vector<ClockSample> samples(16);
    for (ClockSample& s : samples) {
      t += 10'000;
      s.local_send_ns = static_cast<uint64_t>(t + truth[static_cast<size_t>(j)]);
      t += delay(rng);
      const int64_t parent_local = t + truth[static_cast<size_t>(p)];
      s.reference_ns = static_cast<uint64_t>(parent_model.ToReference(parent_local));
      t += delay(rng);
      s.local_recv_ns = static_cast<uint64_t>(t + truth[static_cast<size_t>(j)]);
    }
    ASSERT_TRUE(EstimateEpochThroughParent(samples, points[static_cast<size_t>(p)].half_rtt_ns,
                                           points[static_cast<size_t>(j)]));
  }
  std::vector<int64_t> truth;
  std::mt19937 rng;
  int64_t t = 1'000'000'000'000;  // reference time now
  std::vector<ClockPoint> points;
};

TEST(ClockTree, OffsetsComposeAlongTheTreeAndEveryHostsTruthIsWithinItsSummedBound) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 pick(seed);
    std::uniform_int_distribution<int64_t> offset(-50'000'000'000, 50'000'000'000);
    std::vector<int64_t> truth(37);
    truth[0] = offset(pick);
    for (size_t h = 1; h < truth.size(); ++h) truth[h] = offset(pick);
    SimulatedTree sim(truth, seed);
    for (size_t h = 1; h < truth.size(); ++h) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " host " << h);
      const ClockPoint& p = sim.points[h];
      // reference - local, where the reference is host 0's clock
      const int64_t want = truth[0] - static_cast<int64_t>(truth[h]);
      EXPECT_LE(std::llabs(p.offset_ns - want), p.half_rtt_ns);
      // the bound adds up the path: at least the parent's, never more than 200 us per hop
      const ClockPoint& parent = sim.points[static_cast<size_t>(ClockTreeParent(static_cast<int>(h)))];
      EXPECT_GT(p.half_rtt_ns, parent.half_rtt_ns);
      int depth = 0;
      for (int k = static_cast<int>(h); k != 0; k = ClockTreeParent(k)) ++depth;
      EXPECT_LE(p.half_rtt_ns, depth * 200'000);
    }
  }
}

// The scale of issue 20: 1024 hosts (8192 ranks at 8 per host, or 1024 ranks each its own host)
// are aligned in ceil(log2 1024) = 10 rounds, no leader serves more than 10 children, and at depth
// 10 every host's truth is still within its summed bound.
TEST(ClockTree, AThousandAndTwentyFourHostsTakeTenRoundsAndEveryTruthIsWithinItsBound) {
  constexpr int kHosts = 1024;
  EXPECT_EQ(ClockTreeRounds(kHosts), 10);
  std::mt19937 pick(1024);
  std::uniform_int_distribution<int64_t> offset(-50'000'000'000, 50'000'000'000);
  std::vector<int64_t> truth(kHosts);
  for (int64_t& t : truth) t = offset(pick);
  SimulatedTree sim(truth, 7);
  int deepest = 0;
  size_t most_children = 0;
  for (int h = 1; h < kHosts; ++h) {
    SCOPED_TRACE(testing::Message() << "host " << h);
    const ClockPoint& p = sim.points[static_cast<size_t>(h)];
    EXPECT_LE(std::llabs(p.offset_ns - (truth[0] - truth[static_cast<size_t>(h)])), p.half_rtt_ns);
    int depth = 0;
    for (int k = h; k != 0; k = ClockTreeParent(k)) ++depth;
    deepest = std::max(deepest, depth);
    EXPECT_LE(p.half_rtt_ns, depth * 200'000);
    most_children = std::max(most_children, ClockTreeChildren(h, kHosts).size());
  }
  EXPECT_EQ(deepest, 10);
  EXPECT_EQ(ClockTreeChildren(0, kHosts).size(), 10u);
  EXPECT_LE(most_children, 9u);
}

TEST(ClockTree, AParentsErrorIsAddedToTheChildsOwnHalfRoundTrip) {
  // one sample, round trip 100 ns: own half 50 (+1 ns of drift allowance), plus the parent's 700
  const ClockSample s{1000, 5050, 1100};
  ClockPoint alone, through;
  ASSERT_TRUE(EstimateEpoch(std::span<const ClockSample>(&s, 1), alone));
  ASSERT_TRUE(EstimateEpochThroughParent(std::span<const ClockSample>(&s, 1), 700, through));
  EXPECT_EQ(alone.half_rtt_ns, 51);
  EXPECT_EQ(through.half_rtt_ns, 751);
  EXPECT_EQ(through.offset_ns, alone.offset_ns);
  EXPECT_EQ(through.local_ns, alone.local_ns);
  const ClockSample broken{1100, 5050, 1000};  // a negative round trip is unusable
  EXPECT_FALSE(EstimateEpochThroughParent(std::span<const ClockSample>(&broken, 1), 700, through));
}

TEST(ClockTree, AParentsReadingLongAfterItsPointCarriesTheDriftItMayHaveHadMeanwhile) {
  // A parent whose clock runs 40 ppm slow against the reference: reference - local = 5 ms + 40e-6 L.
  // Its one point, measured exactly (symmetric 1 us legs) at local 1 s: offset 5'040'000, half 1000.
  constexpr double kDrift = 40e-6;
  auto parent_truth = [&](int64_t local) { return 5'000'000 + std::llround(kDrift * static_cast<double>(local)); };
  const ClockPoint newest{1'000'000'000, parent_truth(1'000'000'000), 1'000};
  const ClockModel parent_model({newest});
  // A loaded machine: the child's ping arrives 30 ms later. The model extrapolates flat, so the
  // reading is 40 ppm x 30 ms = 1200 ns off, more than the point's own half (1000).
  const int64_t now = newest.local_ns + 30'000'000;
  const int64_t reading = parent_model.ToReference(now);
  const int64_t true_reference = now + parent_truth(now);
  ASSERT_GT(std::llabs(reading - true_reference), newest.half_rtt_ns);
  // The error sent with it: the half plus 100 ns per ms elapsed (kUnmeasuredDriftPpm), 1000 + 3000.
  const int64_t error = ParentReadingErrorNs(newest, now, false);
  EXPECT_EQ(error, 4'000);
  EXPECT_LE(std::llabs(reading - true_reference), error);
  // A child sharing nothing with the parent (offset 7 ms, no drift), one ping-pong of 100 ns legs
  // around that reading: its point holds the truth within its own half plus that error.
  const int64_t child_truth = true_reference - now + 7'000'000;  // reference - child local at that moment
  const int64_t child_mid = now - 7'000'000;
  const ClockSample s{static_cast<uint64_t>(child_mid - 100), static_cast<uint64_t>(reading),
                      static_cast<uint64_t>(child_mid + 100)};
  ClockPoint child;
  ASSERT_TRUE(EstimateEpochThroughParent(std::span<const ClockSample>(&s, 1), error, child));
  EXPECT_EQ(child.local_ns, child_mid);
  EXPECT_LE(std::llabs(child.offset_ns - child_truth), child.half_rtt_ns);
  EXPECT_GT(std::llabs(child.offset_ns - child_truth), 100 + newest.half_rtt_ns);  // what the bound missed before
  // Rank 0's readings are the reference itself: no allowance however late; none at the point's own time.
  EXPECT_EQ(ParentReadingErrorNs(ClockPoint{now, 0, 0}, now + 30'000'000, true), 0);
  EXPECT_EQ(ParentReadingErrorNs(newest, newest.local_ns, false), 1'000);
}

TEST(ClockTree, AnEpochWhoseEverySampleWasSlowIsNotKept) {
  std::vector<ClockPoint> kept;
  auto point = [](int64_t half) { return ClockPoint{0, 0, half}; };
  EXPECT_TRUE(KeepEpochPoint(kept, point(500'000)));  // the first is always kept
  for (int64_t half : {1200, 1500, 900, 3000}) {
    ASSERT_TRUE(KeepEpochPoint(kept, point(half)));
    kept.push_back(point(half));
  }
  // median of {900, 1200, 1500, 3000} taken as 1500: the limit is max(4 x 1500, 20 us) = 20 us
  EXPECT_TRUE(KeepEpochPoint(kept, point(kEpochOutlierFloorNs)));
  EXPECT_FALSE(KeepEpochPoint(kept, point(kEpochOutlierFloorNs + 1)));
  EXPECT_FALSE(KeepEpochPoint(kept, point(566'229)));  // a descheduled epoch seen on a loaded machine
  // slow links: with a median of 50 us the limit is 200 us
  std::vector<ClockPoint> slow{point(40'000), point(50'000), point(60'000)};
  EXPECT_TRUE(KeepEpochPoint(slow, point(200'000)));
  EXPECT_FALSE(KeepEpochPoint(slow, point(200'001)));
}

}  // namespace
}  // namespace commprof
