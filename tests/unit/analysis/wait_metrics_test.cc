// Golden case for the wait metrics (docs/metrics.md): hand-made instances, hand-computed answers.
#include "analysis/metrics/wait_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "analysis/metrics/delay_costs.h"
#include "analysis/metrics/straggler_verdict.h"

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

// The verdict (docs/metrics.md §9.3) over these instances alone (no messages), as AnalyzeJob
// judges it: each instance measured once, delay costs over them, then the rule. `delay` receives
// the delay costs the verdict was read from.
std::vector<Straggler> Verdict(const ProfileInfo& info, const std::vector<CollectiveInstance>& in,
                               DelayAnalysis* delay = nullptr) {
  const int64_t threshold = SkewThresholdNs(info);
  DelayAnalysis d = ComputeDelayCosts(info, in, MeasureInstances(in, threshold), {}, threshold);
  std::vector<Straggler> s = JudgeStragglers(info, in, d);
  if (delay != nullptr) {
    *delay = std::move(d);
  }
  return s;
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
      // reduce to rank 1: the root waits 2000 - 500; rank 0 is still in the call when the last
      // rank arrives (it leaves at 3000 > L = 2000), so it waits for everyone: 2000 - 0; rank 2
      // arrives last and waits 0. Rank 2 last, delay 2000 - 500 = 1500
      Make(2, COMMPROF_OP_REDUCE, 1, {{0, 3000}, {500, 3000}, {2000, 3000}}),
      // rank 2 missing: incomplete, counted, not measured
      Make(3, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 10}, {0, 10}}),
  };
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  EXPECT_EQ(r.matched, 3u);
  EXPECT_EQ(r.incomplete, 1u);
  EXPECT_EQ(r.skew_threshold_ns, 1000);
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_EQ(r.ranks[0].wait_time_ns, 5000 + 2000);
  EXPECT_EQ(r.ranks[1].wait_time_ns, 4900 + 2000 + 1500);
  EXPECT_EQ(r.ranks[2].wait_time_ns, 1000);
  EXPECT_EQ(r.ranks[0].comm_time_ns, 6000 + 1000 + 3000);
  EXPECT_DOUBLE_EQ(r.ranks[0].wait_share, 0.7);
  EXPECT_EQ(r.ranks[0].times_last, 1u);
  EXPECT_EQ(r.ranks[0].delay_caused_ns, 1000);
  EXPECT_EQ(r.ranks[0].wait_imposed_ns, 3000);
  EXPECT_EQ(r.ranks[1].times_last, 0u);
  EXPECT_EQ(r.ranks[2].times_last, 2u);
  EXPECT_EQ(r.ranks[2].delay_caused_ns, 4900 + 1500);
  EXPECT_EQ(r.ranks[2].wait_imposed_ns, 9900 + 2000 + 1500);  // the reduce's waits: ranks 0 and 1
  // (The verdict is judged on delay costs, docs/metrics.md §9.3: see the Verdict tests below and
  // delay_costs_test.cc; these three instances overlap in time, which one rank's calls never do.)
  // per type: allreduce skew 5000, bcast 2000, reduce 2000
  ASSERT_EQ(r.types.size(), 3u);
  for (const auto& t : r.types) {
    EXPECT_EQ(t.count, 1u);
    if (t.op == COMMPROF_OP_REDUCE) {
      EXPECT_DOUBLE_EQ(t.mean_wait_ns, (2000 + 1500) / 3.0);
    }
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
  // ... but charged to nobody: the skew could be the clocks' error (§9.1)
  DelayAnalysis d;
  EXPECT_TRUE(Verdict(ThreeRanks(), in, &d).empty());
  EXPECT_DOUBLE_EQ(d.total_wait_ns, 10 * (900 + 600));
  EXPECT_DOUBLE_EQ(d.attributed_ns, 0);
  EXPECT_DOUBLE_EQ(d.unattributed_ns, d.total_wait_ns);
}

TEST(WaitMetrics, AStragglerLastInOnlyAMinorityGetsNoVerdict) {
  std::vector<CollectiveInstance> in;
  for (uint64_t s = 0; s < 9; ++s) {
    const int64_t t0 = static_cast<int64_t>(s) * 100000;  // one after the other, as a rank's calls are
    uint32_t who = static_cast<uint32_t>(s % 3);          // each rank last in a third of the instances
    std::vector<std::pair<int64_t, int64_t>> t = {{t0, t0 + 6000}, {t0, t0 + 6000}, {t0, t0 + 6000}};
    t[who].first = t0 + 5000;
    in.push_back(Make(s, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, t));
  }
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  for (const auto& m : r.ranks) EXPECT_EQ(m.times_last, 3u);
  // every rank costs the same (3 instances x 2 waiters x 5000 ns): none stands out
  DelayAnalysis d;
  EXPECT_TRUE(Verdict(ThreeRanks(), in, &d).empty());
  for (const RankDelay& rd : d.ranks) EXPECT_DOUBLE_EQ(rd.cost(), 3 * 2 * 5000.0) << rd.rank;
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
  // rank 2 is last every time, 2 us late, in collectives lasting 100 us: its delay cost 10 x 2
  // waiters x 2 us = 40 us is all the job's waiting, but under a tenth of the other ranks' mean
  // blocked time 10 x 100 us = 1 ms (§9.3)
  std::vector<CollectiveInstance> in;
  for (uint64_t s = 0; s < 10; ++s) {
    const int64_t t = static_cast<int64_t>(s) * 1000000;
    in.push_back(
        Make(s, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{t, t + 100000}, {t, t + 100000}, {t + 2000, t + 100000}}));
  }
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  EXPECT_EQ(r.ranks[2].times_last, 10u);
  EXPECT_EQ(r.ranks[2].delay_caused_ns, 20000);
  DelayAnalysis d;
  EXPECT_TRUE(Verdict(ThreeRanks(), in, &d).empty());
  EXPECT_DOUBLE_EQ(d.ranks[2].cost(), 40000.0);
  EXPECT_DOUBLE_EQ(d.attributed_ns, 40000.0);
  EXPECT_DOUBLE_EQ(d.ranks[0].blocked_ns, 10 * 100000.0);
}

TEST(WaitMetrics, EveryInstanceIsMeasuredOnceAndTheReportUsesThoseFigures) {
  // The figures MeasureInstances keeps (for the /analysis tables and the Chrome export) are the
  // ones the report is computed from: a report over doctored figures shows the doctored waits.
  std::vector<CollectiveInstance> in = {
      Make(0, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 6000}, {100, 6000}, {5000, 6000}}),
      Make(1, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 10}, {0, 10}}),  // incomplete: measured too
  };
  std::vector<InstanceMetrics> measured = MeasureInstances(in, SkewThresholdNs(ThreeRanks()));
  ASSERT_EQ(measured.size(), 2u);
  EXPECT_EQ(measured[0].waits, (std::vector<int64_t>{5000, 4900, 0}));
  EXPECT_EQ(measured[1].waits, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(ComputeWaitMetrics(ThreeRanks(), in, measured).ranks[1].wait_time_ns, 4900);
  measured[0].waits[1] = 7;
  EXPECT_EQ(ComputeWaitMetrics(ThreeRanks(), in, measured).ranks[1].wait_time_ns, 7);
}

TEST(WaitMetrics, TransferTimeAndBandwidthFollowTheNcclTestsFactors) {
  // 4-rank allreduce of 8e6 bytes: arrivals 0, 1000, 2000, 5000 (L = 5000), exits 9000, 9000,
  // 9000, 13000 -> instance transfer = 13000 - 5000 = 8000 ns; algbw = 8e6 / 8000 = 1000 GB/s;
  // busbw = 1000 x 2 x 3 / 4 = 1500 GB/s; transfer_r = e_r - L = 4000, 4000, 4000, 8000.
  CollectiveInstance in =
      Make(0, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 9000}, {1000, 9000}, {2000, 9000}, {5000, 13000}}, 4);
  in.bytes = 8000000;
  InstanceMetrics m = MeasureInstance(in, 1000);
  EXPECT_EQ(m.last_arrival, 5000);
  EXPECT_EQ(m.second_arrival, 2000);
  EXPECT_EQ(m.skew_ns, 5000);
  EXPECT_EQ(m.transfer_ns, 8000);
  EXPECT_DOUBLE_EQ(m.algbw_gbps, 1000.0);
  EXPECT_DOUBLE_EQ(m.busbw_gbps, 1500.0);
  EXPECT_EQ(m.transfers, (std::vector<int64_t>{4000, 4000, 4000, 8000}));
  EXPECT_EQ(m.waits, (std::vector<int64_t>{5000, 4000, 3000, 0}));
  EXPECT_EQ(m.straggler_index, 3);
  EXPECT_EQ(m.delay_caused_ns, 3000);
  EXPECT_EQ(m.total_wait_ns, 12000);
  // the same bytes as an allgather: factor 3/4; as a bcast: 1
  in.op = COMMPROF_OP_ALLGATHER;
  EXPECT_DOUBLE_EQ(MeasureInstance(in, 1000).busbw_gbps, 750.0);
  in.op = COMMPROF_OP_BCAST;
  in.root = 3;
  EXPECT_DOUBLE_EQ(MeasureInstance(in, 1000).busbw_gbps, 1000.0);
  // a skew under the threshold has no straggler and no delay caused
  InstanceMetrics quiet = MeasureInstance(in, 6000);
  EXPECT_EQ(quiet.straggler_index, -1);
  EXPECT_EQ(quiet.delay_caused_ns, 0);
  EXPECT_EQ(quiet.last_index, 3);
}

TEST(WaitMetrics, ScanRanksWaitOnlyForTheLowerRanks) {
  // arrivals (local rank = world rank) 0: 3000, 1: 0, 2: 5000, 3: 1000.
  // rank 0 needs {0}: wait 0; rank 1 needs {0,1}: 3000; rank 2 needs {0..2}: 0;
  // rank 3 needs {0..3}: max = 5000 -> 4000.
  CollectiveInstance in =
      Make(0, COMMPROF_OP_SCAN, COMMPROF_NO_PEER, {{3000, 9000}, {0, 9000}, {5000, 9000}, {1000, 9000}}, 4);
  EXPECT_EQ(MeasureInstance(in, 1000).waits, (std::vector<int64_t>{0, 3000, 0, 4000}));
}

TEST(WaitMetrics, ReportListsIncompleteInstancesWorstInstancesAndTypeBandwidth) {
  std::vector<CollectiveInstance> in;
  // 12 allreduces of 3000 bytes; instance s: rank 2 arrives s*100 ns late (s = 0..11), every
  // rank exits at 10000 + s*100 + 3000 -> transfer 3000 ns each (busbw factor 4/3 for n = 3).
  for (uint64_t s = 0; s < 12; ++s) {
    int64_t base = static_cast<int64_t>(s) * 100000;
    int64_t late = static_cast<int64_t>(s) * 100;
    int64_t end = base + 10000 + late + 3000;
    CollectiveInstance c = Make(s, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER,
                                {{base + 10000, end}, {base + 10000, end}, {base + 10000 + late, end}});
    c.bytes = 3000;
    in.push_back(c);
  }
  CollectiveInstance missing = Make(12, COMMPROF_OP_BARRIER, COMMPROF_NO_PEER, {{0, 1}, {0, 1}});
  in.push_back(missing);
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  EXPECT_EQ(r.incomplete, 1u);
  ASSERT_EQ(r.incomplete_list.size(), 1u);
  EXPECT_EQ(r.incomplete_list[0].seq, 12u);
  EXPECT_EQ(r.incomplete_list[0].comm_size, 3u);
  EXPECT_EQ(r.incomplete_list[0].ranks_present, (std::vector<uint32_t>{0, 1}));
  // worst: total wait 2 x s*100 -> seqs 11, 10, ..., 2 (10 of them), largest first
  ASSERT_EQ(r.worst.size(), kWorstInstances);
  EXPECT_EQ(r.worst[0].seq, 11u);
  EXPECT_EQ(r.worst[0].total_wait_ns, 2200);
  EXPECT_EQ(r.worst[0].last_rank, 2);  // skew 1100 > threshold 1000
  EXPECT_EQ(r.worst[0].delay_caused_ns, 1100);
  EXPECT_EQ(r.worst[9].seq, 2u);
  EXPECT_EQ(r.worst[9].last_rank, -1);  // skew 200: under the threshold
  ASSERT_EQ(r.types.size(), 1u);
  EXPECT_DOUBLE_EQ(r.types[0].mean_transfer_ns, 3000.0);
  EXPECT_DOUBLE_EQ(r.types[0].algbw_gbps, 1.0);
  EXPECT_DOUBLE_EQ(r.types[0].busbw_gbps, 4.0 / 3.0);
  EXPECT_EQ(r.ranks[0].transfer_time_ns, 12 * 3000);
  // lateness: first arrivals span 10000 .. 1110000 in 40 bins of 27501 ns; instance s falls in
  // bin s*100000/27501; rank 2's lateness there is s*100, ranks 0 and 1 have 0.
  ASSERT_EQ(r.lateness.bins, kLatenessBins);
  EXPECT_EQ(r.lateness.start_ns, 10000);
  EXPECT_EQ(r.lateness.bin_ns, 1100000 / 40 + 1);
  EXPECT_DOUBLE_EQ(r.lateness.mean_lateness_ns[2][(5 * 100000) / r.lateness.bin_ns], 500.0);
  EXPECT_DOUBLE_EQ(r.lateness.mean_lateness_ns[0][(5 * 100000) / r.lateness.bin_ns], 0.0);
  EXPECT_TRUE(std::isnan(r.lateness.mean_lateness_ns[2][1]));  // no instance starts in bin 1
  EXPECT_EQ(r.lateness.times_last[2][(11 * 100000) / r.lateness.bin_ns], 1u);
  EXPECT_EQ(r.lateness.times_last[2][(5 * 100000) / r.lateness.bin_ns], 0u);  // skew 500: under
}

TEST(WaitMetrics, AVerdictNamesTheRankThatCausedMostOfTheWaitingWithItsEvidence) {
  // 10 allreduces 100 us apart; rank 2 arrives 5000 ns late in 8 of them (the first 8), in the
  // other 2 rank 0 is 5000 ns late. Delay costs (§9.1): the two others wait 5000 ns for the late
  // rank, all directly: rank 2 costs 8 x 2 x 5000 = 80000, rank 0 2 x 2 x 5000 = 20000, of the
  // 100000 ns attributed. Both are material (>= 10 %), stand out over the lower quartile (rank 1:
  // 0) and exceed a tenth of the others' mean blocked time (ranks 0 and 1 for rank 2: (50000 +
  // 60000) / 2), so both are named, rank 2 first.
  std::vector<CollectiveInstance> in;
  for (uint64_t s = 0; s < 10; ++s) {
    int64_t t = static_cast<int64_t>(s) * 100000;
    int64_t late0 = s >= 8 ? 5000 : 0, late2 = s < 8 ? 5000 : 0;
    in.push_back(Make(s, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER,
                      {{t + late0, t + 6000}, {t, t + 6000}, {t + late2, t + 6000}}));
  }
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), in);
  EXPECT_DOUBLE_EQ(r.ranks[2].expected_last, 10.0 / 3.0);
  DelayAnalysis d;
  std::vector<Straggler> v = Verdict(ThreeRanks(), in, &d);
  EXPECT_DOUBLE_EQ(d.attributed_ns, 100000.0);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].rank, 2u);
  EXPECT_EQ(v[0].host, "h2");
  EXPECT_DOUBLE_EQ(v[0].delay_cost_ns, 8 * 2 * 5000.0);
  EXPECT_DOUBLE_EQ(v[0].direct_ns, 8 * 2 * 5000.0);
  EXPECT_DOUBLE_EQ(v[0].propagated_ns, 0.0);
  EXPECT_DOUBLE_EQ(v[0].share, 0.8);
  EXPECT_EQ(v[0].late_instances, 8u);
  EXPECT_EQ(v[0].typical_lateness_ns, 5000);
  // late in 5 of the first 5 calls and 3 of the last 5: at least half of each half -> persistent
  EXPECT_EQ(v[0].pattern, "persistent");
  ASSERT_EQ(v[0].communicators.size(), 1u);
  EXPECT_EQ(v[0].communicators[0].name, "MPI_COMM_WORLD");
  EXPECT_EQ(v[0].communicators[0].members, (std::vector<uint32_t>{0, 1, 2}));
  // its lateness is compute before the call: 5000 ns more than its partners' in every late call
  EXPECT_EQ(v[0].cause, "compute");
  EXPECT_GT(v[0].saving_ns, 0);
  EXPECT_LE(v[0].saving_ns, 8 * 5000);
  // rank 0: late only in the last 2 calls, from the first late arrival's wait to its arrival
  EXPECT_EQ(v[1].rank, 0u);
  EXPECT_DOUBLE_EQ(v[1].delay_cost_ns, 2 * 2 * 5000.0);
  EXPECT_EQ(v[1].pattern, "transient");
  EXPECT_EQ(v[1].window_start_ns, 800000);
  EXPECT_EQ(v[1].window_end_ns, 905000);
}

TEST(WaitMetrics, RootedReduceNonRootsWaitOnlyWhileStillInTheCall) {
  // MPI_Reduce to local rank 0, 5 ranks. L = 8000 (rank 3), the root arrives at 5000.
  //   root 0: needs everyone: 8000 - 5000 = 3000
  //   rank 1 leaves at 1000, before the root arrives: eager, waits for nobody
  //   rank 2 leaves at 6000, after the root arrived but before L: held by the root, 5000 - 1000
  //   rank 3 arrives last: 0
  //   rank 4 leaves at 9000, after L (a tree's inner node): waits for everyone, 8000 - 2000
  // transfer_r = blocked time - wait_r.
  CollectiveInstance in =
      Make(0, COMMPROF_OP_REDUCE, 0, {{5000, 9000}, {0, 1000}, {1000, 6000}, {8000, 9000}, {2000, 9000}}, 5);
  InstanceMetrics m = MeasureInstance(in, 1000);
  EXPECT_EQ(m.deps,
            (std::vector<WaitDeps>{WaitDeps::kAll, WaitDeps::kNone, WaitDeps::kRoot, WaitDeps::kAll, WaitDeps::kAll}));
  EXPECT_EQ(m.waits, (std::vector<int64_t>{3000, 0, 4000, 0, 6000}));
  EXPECT_EQ(m.transfers, (std::vector<int64_t>{1000, 1000, 1000, 1000, 1000}));
  EXPECT_EQ(m.total_wait_ns, 13000);
  // Gather follows the same rules
  in.op = COMMPROF_OP_GATHER;
  EXPECT_EQ(MeasureInstance(in, 1000).waits, (std::vector<int64_t>{3000, 0, 4000, 0, 6000}));
}

TEST(WaitMetrics, BroadcastRootIsHeldByLateReceiversOnlyWhenItLeftAfterTheLastArrival) {
  // MPI_Bcast from local rank 0, arriving first at 0; rank 2 arrives last at 5000.
  // Rendezvous: the root leaves at 6000, after the last arrival: it waited for everyone, 5000.
  // Non-roots need only the root's data, which was there: 0.
  CollectiveInstance held = Make(0, COMMPROF_OP_BCAST, 0, {{0, 6000}, {1000, 6000}, {5000, 6000}});
  InstanceMetrics m = MeasureInstance(held, 1000);
  EXPECT_EQ(m.deps, (std::vector<WaitDeps>{WaitDeps::kAll, WaitDeps::kRoot, WaitDeps::kRoot}));
  EXPECT_EQ(m.waits, (std::vector<int64_t>{5000, 0, 0}));
  EXPECT_EQ(m.transfers, (std::vector<int64_t>{1000, 5000, 1000}));
  // Eager: the root leaves at 2000, before rank 2 arrives: nobody held it.
  CollectiveInstance eager = Make(1, COMMPROF_OP_BCAST, 0, {{0, 2000}, {1000, 6000}, {5000, 6000}});
  m = MeasureInstance(eager, 1000);
  EXPECT_EQ(m.deps[0], WaitDeps::kNone);
  EXPECT_EQ(m.waits, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(m.transfers[0], 2000);
  // Scatter: the same rules; a late root (3000) holds the non-roots that came before it
  CollectiveInstance late_root = Make(2, COMMPROF_OP_SCATTER, 0, {{3000, 6000}, {1000, 6000}, {5000, 6000}});
  m = MeasureInstance(late_root, 1000);
  EXPECT_EQ(m.waits, (std::vector<int64_t>{2000, 2000, 0}));
}

TEST(WaitMetrics, ExscanRanksWaitOnlyForTheRanksBelowThem) {
  // arrivals (local rank = world rank) 0: 3000, 1: 0, 2: 5000, 3: 1000.
  // rank 0 needs nobody; rank 1 needs {0}: 3000; rank 2 needs {0, 1}: 0; rank 3 needs {0..2}:
  // 5000 - 1000 = 4000.
  CollectiveInstance in =
      Make(0, COMMPROF_OP_EXSCAN, COMMPROF_NO_PEER, {{3000, 9000}, {0, 9000}, {5000, 9000}, {1000, 9000}}, 4);
  InstanceMetrics m = MeasureInstance(in, 1000);
  EXPECT_EQ(m.waits, (std::vector<int64_t>{0, 3000, 0, 4000}));
  EXPECT_EQ(m.transfers, (std::vector<int64_t>{6000, 6000, 4000, 4000}));
  // rank 0 has nobody below it: it depends on nobody
  EXPECT_EQ(m.deps, (std::vector<WaitDeps>{WaitDeps::kNone, WaitDeps::kPrefixExclusive, WaitDeps::kPrefixExclusive,
                                           WaitDeps::kPrefixExclusive}));
  in.op = COMMPROF_OP_SCAN;
  for (WaitDeps d : MeasureInstance(in, 1000).deps) EXPECT_EQ(d, WaitDeps::kPrefix);
}

TEST(WaitMetrics, NonBlockingInstancesWaitFromTheCompletingCallOnly) {
  // MPI_Iallreduce: issues at 0, 1000, 6000 (L = 6000); each rank blocks in the Wait that completes
  // it from 4000, 1000 and 7000; all leave at 8000. The time between issue and Wait was the rank's
  // own (overlapped compute), not waiting: waits 6000 - 4000, 6000 - 1000, 0.
  CollectiveInstance in = Make(0, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 8000}, {1000, 8000}, {6000, 8000}});
  in.nonblocking = true;
  in.arrivals[0].block_start = 4000;
  in.arrivals[1].block_start = 1000;
  in.arrivals[2].block_start = 7000;
  InstanceMetrics m = MeasureInstance(in, 1000);
  EXPECT_EQ(m.waits, (std::vector<int64_t>{2000, 5000, 0}));
  EXPECT_EQ(m.transfers, (std::vector<int64_t>{2000, 2000, 1000}));
  EXPECT_EQ(m.skew_ns, 6000);  // arrivals are still the issues
  WaitReport r = ComputeWaitMetrics(ThreeRanks(), {in});
  EXPECT_EQ(r.ranks[0].comm_time_ns, 4000);  // blocked from the Wait's entry
  EXPECT_EQ(r.ranks[0].wait_time_ns, 2000);
}

TEST(WaitMetrics, BinomialTailMatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(BinomialTail(5, 0, 0.25), 1.0);
  EXPECT_NEAR(BinomialTail(5, 5, 0.25), 1.0 / 1024.0, 1e-15);
  EXPECT_NEAR(BinomialTail(5, 3, 0.25), (10.0 * 9 + 5.0 * 3 + 1) / 1024.0, 1e-15);  // 106/1024
  EXPECT_DOUBLE_EQ(BinomialTail(5, 6, 0.25), 0.0);
  // large n: P(X >= 60 | 100, 0.5) = 0.028443966820490...
  EXPECT_NEAR(BinomialTail(100, 60, 0.5), 0.02844396682049039, 1e-12);
}

TEST(WaitMetrics, ZeroByteCollectivesChargeNoWaitNoSkewAndNoStragglerButZeroByteBarriersDo) {
  // count 0 on every rank: Open MPI returns at once, so the spread of the arrivals is no wait.
  ProfileInfo info = ThreeRanks();
  CollectiveInstance zero = Make(0, COMMPROF_OP_ALLREDUCE, COMMPROF_NO_PEER, {{0, 100}, {5000, 5100}, {9000, 9100}});
  zero.bytes = 0;
  ASSERT_TRUE(zero.zero_byte());
  InstanceMetrics m = MeasureInstance(zero, 1000);
  EXPECT_EQ(m.waits, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(m.total_wait_ns, 0);
  EXPECT_EQ(m.skew_ns, 0);
  EXPECT_EQ(m.straggler_index, -1);
  EXPECT_EQ(m.delay_caused_ns, 0);
  for (WaitDeps d : m.deps) EXPECT_EQ(d, WaitDeps::kNone);
  EXPECT_EQ(m.transfers, (std::vector<int64_t>{100, 100, 100})) << "the time in the call is still the rank's";
  // the same times with data: ranks 0 and 1 wait until their exits (100 each), rank 2 the straggler
  CollectiveInstance data = zero;
  data.bytes = 8;
  for (auto& a : data.arrivals) a.bytes = 8;
  EXPECT_FALSE(data.zero_byte());
  EXPECT_EQ(MeasureInstance(data, 1000).total_wait_ns, 200);
  EXPECT_EQ(MeasureInstance(data, 1000).skew_ns, 9000);
  EXPECT_EQ(MeasureInstance(data, 1000).straggler_index, 2);
  // a rank that sent something (Alltoallv counts per rank) makes it a real exchange
  CollectiveInstance some = zero;
  some.arrivals[1].bytes = 4;
  EXPECT_FALSE(some.zero_byte());
  // a barrier never moves data and does synchronise
  CollectiveInstance barrier = zero;
  barrier.op = COMMPROF_OP_BARRIER;
  EXPECT_FALSE(barrier.zero_byte());
  EXPECT_EQ(MeasureInstance(barrier, 1000).total_wait_ns, 200);
  EXPECT_EQ(MeasureInstance(barrier, 1000).skew_ns, 9000);
  // nor does Open MPI's Alltoallv with every count 0: its pairwise exchange of empty messages waits
  CollectiveInstance alltoallv = zero;
  alltoallv.op = COMMPROF_OP_ALLTOALLV;
  EXPECT_FALSE(alltoallv.zero_byte());
  EXPECT_EQ(MeasureInstance(alltoallv, 1000).total_wait_ns, 200);
  EXPECT_EQ(MeasureInstance(alltoallv, 1000).straggler_index, 2);
  // the job's figures: no wait, no delay, no straggler verdict, no lateness from the zero-byte calls
  std::vector<CollectiveInstance> all;
  for (uint64_t k = 0; k < 10; ++k) {
    CollectiveInstance c = zero;
    c.seq = k;
    all.push_back(c);
  }
  WaitReport rep = ComputeWaitMetrics(info, all);
  EXPECT_EQ(rep.matched, 10u);
  for (const auto& r : rep.ranks) {
    EXPECT_EQ(r.wait_time_ns, 0) << r.rank;
    EXPECT_EQ(r.times_last, 0u) << r.rank;
    EXPECT_EQ(r.delay_caused_ns, 0) << r.rank;
  }
  EXPECT_TRUE(Verdict(info, all).empty());
}

}  // namespace
}  // namespace commprof
