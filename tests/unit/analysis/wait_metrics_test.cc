// Golden case for the wait metrics (docs/metrics.md): hand-made instances, hand-computed answers.
#include <gtest/gtest.h>

#include "analysis/metrics/wait_metrics.h"

namespace commprof {
namespace {

CollectiveInstance Make(uint64_t seq, uint8_t op, int32_t root, std::vector<std::pair<int64_t, int64_t>> times,
                        uint32_t comm_size = 3) {
  CollectiveInstance in;
  in.comm_id = COMMPROF_COMM_WORLD_ID;
  in.seq = seq;
  in.op = op;
  in.root = root;
  in.bytes = 64;
  in.comm_size = comm_size;
  for (uint32_t r = 0; r < times.size(); ++r) {
    in.arrivals.push_back({r, static_cast<int32_t>(r), times[r].first, times[r].second});
  }
  return in;
}

ProfileInfo ThreeRanks() {
  ProfileInfo info;
  info.world_size = 3;
  for (uint32_t r = 0; r < 3; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.host = "h" + std::to_string(r);
    ri.clock_error_bound_ns = 100;  // threshold = max(1000, 2 * 100) = 1000 ns
    info.ranks.push_back(ri);
  }
  return info;
}

TEST(WaitMetrics, HandComputedAllreduceBcastReduceAndAnIncompleteInstance) {
  std::vector<CollectiveInstance> in = {
      // allreduce: L = 5000; waits 5000, 4900, 0; rank 2 last, delay 5000 - 100 = 4900, imposes 9900
      Make(0, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 6000}, {100, 6000}, {5000, 6000}}),
      // bcast from rank 0, which arrives last: non-roots wait for the root only (2000, 1000);
      // rank 0 is last, delay 3000 - 2000 = 1000, imposes 3000
      Make(1, COMMPROF_OP_BCAST, 0, {{3000, 4000}, {1000, 4000}, {2000, 4000}}),
      // reduce to rank 1: only the root waits (2000 - 500); rank 2 last, delay 2000 - 500 = 1500
      Make(2, COMMPROF_OP_REDUCE, 1, {{0, 3000}, {500, 3000}, {2000, 3000}}),
      // rank 2 missing: incomplete, counted, not measured
      Make(3, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 10}, {0, 10}}),
  };
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  EXPECT_EQ(r.matched, 3u);
  EXPECT_EQ(r.incomplete, 1u);
  EXPECT_EQ(r.skew_threshold_ns, 1000);
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_EQ(r.ranks[0].wait_time_ns, 5000);
  EXPECT_EQ(r.ranks[1].wait_time_ns, 4900 + 2000 + 1500);
  EXPECT_EQ(r.ranks[2].wait_time_ns, 1000);
  EXPECT_EQ(r.ranks[0].comm_time_ns, 6000 + 1000 + 3000);
  EXPECT_DOUBLE_EQ(r.ranks[0].wait_share, 0.5);
  EXPECT_EQ(r.ranks[0].times_last, 1u);
  EXPECT_EQ(r.ranks[0].delay_caused_ns, 1000);
  EXPECT_EQ(r.ranks[0].wait_imposed_ns, 3000);
  EXPECT_EQ(r.ranks[1].times_last, 0u);
  EXPECT_EQ(r.ranks[2].times_last, 2u);
  EXPECT_EQ(r.ranks[2].delay_caused_ns, 4900 + 1500);
  EXPECT_EQ(r.ranks[2].wait_imposed_ns, 9900 + 1500);
  ASSERT_TRUE(r.verdict.found);
  EXPECT_EQ(r.verdict.rank, 2u);
  EXPECT_EQ(r.verdict.host, "h2");
  EXPECT_DOUBLE_EQ(r.verdict.share_last, 2.0 / 3.0);
  EXPECT_EQ(r.verdict.delay_caused_ns, 6400);
  // per type: allreduce skew 5000, bcast 2000, reduce 2000
  ASSERT_EQ(r.types.size(), 3u);
  for (const auto& t : r.types) {
    EXPECT_EQ(t.count, 1u);
    if (t.op == COMMPROF_OP_ALLREDUCE) {
      EXPECT_EQ(t.skew_p50_ns, 5000);
      EXPECT_DOUBLE_EQ(t.mean_duration_ns, (6000 + 5900 + 1000) / 3.0);
      EXPECT_DOUBLE_EQ(t.mean_wait_ns, (5000 + 4900) / 3.0);
    }
    if (t.op == COMMPROF_OP_BCAST) {
      EXPECT_EQ(t.skew_p99_ns, 2000);
    }
  }
}

TEST(WaitMetrics, SkewsUnderTheClockThresholdAreNotAttributedAndGiveNoVerdict) {
  std::vector<CollectiveInstance> in;
  for (uint64_t s = 0; s < 10; ++s) {
    in.push_back(Make(s, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 2000}, {300, 2000}, {900, 2000}}));
  }
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  EXPECT_EQ(r.matched, 10u);
  for (const auto& m : r.ranks) EXPECT_EQ(m.times_last, 0u);
  EXPECT_EQ(r.ranks[0].wait_time_ns, 10 * 900) << "waits are still measured";
  EXPECT_FALSE(r.verdict.found);
}

TEST(WaitMetrics, AStragglerLastInOnlyAMinorityGetsNoVerdict) {
  std::vector<CollectiveInstance> in;
  for (uint64_t s = 0; s < 9; ++s) {
    int64_t late = 5000;
    uint32_t who = static_cast<uint32_t>(s % 3);  // each rank last in a third of the instances
    std::vector<std::pair<int64_t, int64_t>> t = {{0, 6000}, {0, 6000}, {0, 6000}};
    t[who].first = late;
    in.push_back(Make(s, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, t));
  }
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  for (const auto& m : r.ranks) EXPECT_EQ(m.times_last, 3u);
  EXPECT_FALSE(r.verdict.found);
}

TEST(WaitMetrics, MeanDurationOfASubCommunicatorCollectiveIsOverItsOwnMembers) {
  // a 2-member barrier in a 3-rank job: durations 400 and 600 -> mean 500, not 1000 / 3
  CollectiveInstance b = Make(0, COMMPROF_OP_BARRIER, COMMPROF_NO_PEER, {{0, 400}, {0, 600}}, 2);
  b.comm_id = 0x100000001ull;
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), {b});
  ASSERT_EQ(r.types.size(), 1u);
  EXPECT_DOUBLE_EQ(r.types[0].mean_duration_ns, 500.0);
}

TEST(WaitMetrics, ARankOftenLastByAHairIsNotAStraggler) {
  // rank 2 is last every time, 2 us late, in collectives lasting 100 us: delay caused 10 x 2 us
  // = 20 us < a tenth of the others' 10 x 100 us = 100 us
  std::vector<CollectiveInstance> in;
  for (uint64_t s = 0; s < 10; ++s) {
    in.push_back(Make(s, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 100000}, {0, 100000}, {2000, 100000}}));
  }
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  EXPECT_EQ(r.ranks[2].times_last, 10u);
  EXPECT_EQ(r.ranks[2].delay_caused_ns, 20000);
  EXPECT_FALSE(r.verdict.found);
}

}  // namespace
}  // namespace commprof
