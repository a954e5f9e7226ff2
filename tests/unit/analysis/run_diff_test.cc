// `commprof diff` (docs/metrics.md §13): the noise guard and the change arithmetic on hand-made
// numbers, the gate's parsing, and golden diffs of small files written with the real Hdf5Writer
// whose truth is planted: a root 3 ms late to every MPI_Bcast (so the others wait 3 ms in each),
// the same loop with its jitter shuffled (noise only), and a file against itself.
#include "analysis/compare/run_diff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/compare/diff_output.h"
#include "analysis/compare/noise_guard.h"
#include "analysis/compare/run_summary.h"
#include "analysis/report/job_report.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
using test_support::events::Collective;

// ---- the noise guard and the change arithmetic ----

TEST(NoiseGuard, RepetitionsAreNearestRankQuantiles) {
  std::vector<double> v = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};  // any order
  const Repetitions r = SummarizeRepetitions(v);
  EXPECT_EQ(r.n, 10u);
  EXPECT_EQ(r.p10, 1);  // ceil(0.1 x 10) = 1st smallest
  EXPECT_EQ(r.p50, 5);  // 5th
  EXPECT_EQ(r.p90, 9);  // 9th
  std::vector<double> none;
  EXPECT_EQ(SummarizeRepetitions(none).n, 0u);
  std::vector<double> three = {30, 10, 20};
  const Repetitions t = SummarizeRepetitions(three);
  EXPECT_EQ(t.p10, 10);  // ceil(0.3) = 1st
  EXPECT_EQ(t.p50, 20);  // ceil(1.5) = 2nd
  EXPECT_EQ(t.p90, 30);  // ceil(2.7) = 3rd
}

TEST(NoiseGuard, ANewMedianInsideTheBaseP10ToP90IsNoiseBothEndsIncluded) {
  const Repetitions base{10, 1, 5, 9};
  EXPECT_TRUE(WithinNoise(base, {10, 0, 1, 0}));      // at p10
  EXPECT_TRUE(WithinNoise(base, {10, 0, 9, 0}));      // at p90
  EXPECT_TRUE(WithinNoise(base, {3, 0, 6.5, 0}));     // inside; the new run's count does not matter here
  EXPECT_FALSE(WithinNoise(base, {10, 0, 9.01, 0}));  // just past p90
  EXPECT_FALSE(WithinNoise(base, {10, 0, 0.99, 0}));  // just under p10
  EXPECT_FALSE(WithinNoise(base, {0, 0, 5, 0}));      // nothing to compare
}

TEST(NoiseGuard, FewerThanFiveBaseRepetitionsGiveNoGuard) {
  EXPECT_FALSE(WithinNoise({4, 1, 5, 9}, {10, 0, 5, 0}));
  EXPECT_TRUE(WithinNoise({5, 1, 5, 9}, {10, 0, 5, 0}));
  EXPECT_FALSE(SingleWithinNoise({4, 1, 5, 9, 0, 10}, 5));
}

TEST(NoiseGuard, OneValueIsNoiseWithinTheBaseRangeBothEndsIncluded) {
  std::vector<double> v = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  const Repetitions r = SummarizeRepetitions(v);
  EXPECT_EQ(r.min, 1);
  EXPECT_EQ(r.max, 10);
  EXPECT_TRUE(SingleWithinNoise(r, 10));  // past p90 (9), inside the range
  EXPECT_TRUE(SingleWithinNoise(r, 1));
  EXPECT_FALSE(SingleWithinNoise(r, 10.5));
  EXPECT_FALSE(SingleWithinNoise(r, 0.5));
}

TEST(NoiseGuard, TheFloorWidensTheSpreadOnBothSides) {
  const Repetitions base{10, 100, 150, 200, 50, 300};
  EXPECT_FALSE(WithinNoise(base, {10, 0, 260, 0}));
  EXPECT_TRUE(WithinNoise(base, {10, 0, 260, 0}, 60));  // 200 + 60
  EXPECT_FALSE(WithinNoise(base, {10, 0, 261, 0}, 60));
  EXPECT_TRUE(WithinNoise(base, {10, 0, 40, 0}, 60));  // 100 - 60
  EXPECT_FALSE(WithinNoise(base, {10, 0, 39, 0}, 60));
  EXPECT_TRUE(SingleWithinNoise(base, 360, 60));  // max 300 + 60
  EXPECT_FALSE(SingleWithinNoise(base, 361, 60));
  EXPECT_FALSE(WithinNoise({4, 100, 150, 200, 50, 300}, {10, 0, 150, 0}, 1e9)) << "still 5 repetitions";
}

TEST(NoiseGuard, TheMidMeanIsTheMeanFromTheP25thToTheP75thRepetition) {
  std::vector<double> v = {8, 7, 6, 5, 4, 3, 2, 1};  // p25: ceil(2) = 2nd; p75: 6th
  EXPECT_DOUBLE_EQ(SummarizeRepetitions(v).mid_mean, (2 + 3 + 4 + 5 + 6) / 5.0);
  std::vector<double> outliers = {1, 1, 1, 1, 1, 1, 1, 1000, 1000};  // p25: 3rd, p75: ceil(6.75) = 7th
  EXPECT_DOUBLE_EQ(SummarizeRepetitions(outliers).mid_mean, 1) << "the top quarter is left out";
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(SummarizeRepetitions(one).mid_mean, 7);
  EXPECT_TRUE(std::isnan(Repetitions{}.mid_mean)) << "unknown unless summarized from the values";
}

// The pattern that a median alone misses (found on real 2-rank runs with the default floor): the
// root of a Bcast 3 ms late in each call makes every other rank wait 3 ms. With 2 ranks that is
// half of the Bcast's calls: the nearest-rank median is still a fast (root) call, but the middle
// half's mean moves by 1.5 ms, far past the base's spread [10 us, 12 us] + 100 us.
TEST(NoiseGuard, HalfTheCallsSlowerIsNotNoiseThoughTheMedianStays) {
  std::vector<double> base, slow;
  for (int i = 0; i < 300; ++i) {
    base.push_back(10'000 + (i % 3) * 1000);  // both ranks 10-12 us
    base.push_back(10'000 + (i % 3) * 1000);
    slow.push_back(10'000 + (i % 3) * 1000);     // the root
    slow.push_back(3'010'000 + (i % 3) * 1000);  // the other rank: 3 ms more
  }
  const Repetitions b = SummarizeRepetitions(base), n = SummarizeRepetitions(slow);
  ASSERT_LE(n.p50, b.p90) << "the median alone says noise";
  // The 150th to the 450th of 600: 151 root calls (51 of 11 us, 100 of 12 us) and 150 waiting
  // ones (100 of 3.010 ms, 50 of 3.011 ms): 453,311,000 ns over 301.
  EXPECT_DOUBLE_EQ(n.mid_mean, 453'311'000.0 / 301);
  EXPECT_FALSE(WithinNoise(b, n, kDefaultNoiseFloorNs));
  // A few slow calls (under a quarter) move neither the median nor the middle half: noise.
  std::vector<double> hiccups = base;
  for (size_t i = 0; i < hiccups.size(); i += 5) {
    hiccups[i] = 50'000'000;  // one call in five stalled 50 ms
  }
  EXPECT_TRUE(WithinNoise(b, SummarizeRepetitions(hiccups), kDefaultNoiseFloorNs));
  std::vector<double> again = base;
  EXPECT_TRUE(WithinNoise(b, SummarizeRepetitions(again), 0));
  // A summary without a mid-mean (a name row's, from the stats' quantiles) is judged on its median.
  Repetitions no_mid = n;
  no_mid.mid_mean = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(WithinNoise(b, no_mid, kDefaultNoiseFloorNs));
}

// Found on two unchanged 4-rank runs (Iallreduce + Wait, 4 ranks on 2 cores): calls take ~0 or
// about one time slice (~3 ms); in the new run some slices were longer: its median 2.862 ms, its
// mid-mean 3.197 ms against the base's p90 of 3.079 ms, past the spread's edge + 100 us but a
// move of far less than the spread's width. Here: a fifth of the calls fast in both runs, the
// others 2.90-3.08 ms in the base; in the new run 30 at 3 ms and 50 at 4 ms.
TEST(NoiseGuard, AMidMeanMovedByLessThanTheSpreadWidthIsNoise) {
  std::vector<double> base, next;
  for (int i = 0; i < 100; ++i) {
    base.push_back(i < 20 ? 12'000 : 2'900'000 + (i % 7) * 30'000);
    next.push_back(i < 20 ? 12'000 : i < 50 ? 3'000'000 : 4'000'000);
  }
  const Repetitions b = SummarizeRepetitions(base), n = SummarizeRepetitions(next);
  ASSERT_GT(n.mid_mean, b.p90 + kDefaultNoiseFloorNs) << "past the edge of the spread";
  ASSERT_LT(n.p50, b.p90 + kDefaultNoiseFloorNs) << "the median is inside";
  EXPECT_LE(n.mid_mean - b.mid_mean, b.p90 - b.p10);
  EXPECT_TRUE(WithinNoise(b, n, kDefaultNoiseFloorNs));
  // The bound is the width plus the floor, both ends included: just past it is not noise.
  Repetitions moved = n;
  moved.mid_mean = b.mid_mean + (b.p90 - b.p10) + kDefaultNoiseFloorNs;
  EXPECT_TRUE(WithinNoise(b, moved, kDefaultNoiseFloorNs));
  moved.mid_mean += 1;
  EXPECT_FALSE(WithinNoise(b, moved, kDefaultNoiseFloorNs));
  moved.mid_mean = b.mid_mean - (b.p90 - b.p10) - kDefaultNoiseFloorNs - 1;  // faster, the same
  EXPECT_FALSE(WithinNoise(b, moved, kDefaultNoiseFloorNs));
}

TEST(NoiseGuard, DurationsParseWithTheirUnits) {
  EXPECT_DOUBLE_EQ(*ParseDurationNs("100us"), 100'000.0);
  EXPECT_DOUBLE_EQ(*ParseDurationNs("1.5ms"), 1'500'000.0);
  EXPECT_DOUBLE_EQ(*ParseDurationNs("2s"), 2e9);
  EXPECT_DOUBLE_EQ(*ParseDurationNs("250"), 250.0);
  EXPECT_DOUBLE_EQ(*ParseDurationNs("0"), 0.0);
  for (const std::string bad : {"", "ms", "-1us", "5 parsecs", "1e999", "nan"}) {
    EXPECT_FALSE(ParseDurationNs(bad).has_value()) << bad;
  }
}

TEST(NoiseGuard, RelativeChangeIsTheChangeOverTheBaseAndHasNoneFromZero) {
  EXPECT_DOUBLE_EQ(*RelativeChange(200, 230), 0.15);
  EXPECT_DOUBLE_EQ(*RelativeChange(200, 150), -0.25);
  EXPECT_DOUBLE_EQ(*RelativeChange(-4, -2), 0.5);  // over |base|
  EXPECT_EQ(*RelativeChange(0, 0), 0.0);
  EXPECT_FALSE(RelativeChange(0, 7).has_value());
}

// ---- the gate ----

TEST(RegressionGate, ParsesAllAndPerMetricLimitsAsFractions) {
  RegressionGate g;
  ASSERT_TRUE(ParseRegressionGate({"10%", "comm_time=5%", "busbw=2.5"}, g).ok());
  ASSERT_TRUE(g.all.has_value());
  EXPECT_DOUBLE_EQ(*g.all, 0.10);
  EXPECT_DOUBLE_EQ(*g.LimitFor("comm_time", true), 0.05);
  EXPECT_DOUBLE_EQ(*g.LimitFor("busbw", true), 0.025);  // the % sign is optional
  EXPECT_DOUBLE_EQ(*g.LimitFor("wait_time", true), 0.10);
  // The blanket limit is for rows the guard can judge; a named one for all of its metric's rows.
  EXPECT_FALSE(g.LimitFor("wait_time", false).has_value());
  EXPECT_DOUBLE_EQ(*g.LimitFor("comm_time", false), 0.05);
  RegressionGate one;
  ASSERT_TRUE(ParseRegressionGate({"step_time=0%"}, one).ok());
  EXPECT_FALSE(one.LimitFor("comm_time", true).has_value());
  EXPECT_DOUBLE_EQ(*one.LimitFor("step_time", true), 0.0);
  EXPECT_TRUE(RegressionGate{}.empty());
}

TEST(RegressionGate, RejectsMalformedValuesAndUnknownMetricsNamingThem) {
  for (const std::string bad : {"", "%", "ten%", "-5%", "5%%", "comm_time=", "comm_time=x", "inf%", "nan"}) {
    RegressionGate g;
    Status st = ParseRegressionGate({bad}, g);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("--max-regression " + bad + " "), std::string::npos) << st.message();
  }
  RegressionGate g;
  Status st = ParseRegressionGate({"latency=5%"}, g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("unknown metric 'latency'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("comm_time"), std::string::npos) << "lists the known metrics: " << st.message();
  EXPECT_FALSE(ParseRegressionGate({"count=5%"}, g).ok()) << "a count has no worse direction";
}

// ---- judging rows (hand-made summaries) ----

MetricValue Value(const std::string& metric, double v, Worse worse, Repetitions calls, bool total = false) {
  MetricValue m;
  m.group = "type";
  m.row = "allreduce";
  m.metric = metric;
  m.unit = worse == Worse::kLower ? "GB/s" : "ns";
  m.worse = worse;
  m.value = v;
  m.total = total;
  m.per_call = calls;
  return m;
}

RunSummary Summary(std::vector<MetricValue> metrics) {
  RunSummary s;
  s.metrics = std::move(metrics);
  return s;
}

const DiffRow& Find(const RunDiff& d, const std::string& group, const std::string& row, const std::string& metric) {
  for (const DiffRow& r : d.rows) {
    if (r.group == group && r.row == row && r.metric == metric) {
      return r;
    }
  }
  std::string have;
  for (const DiffRow& r : d.rows) {
    if (r.group == group && r.metric == metric) {
      have += " '" + r.row + "'";
    }
  }
  ADD_FAILURE() << "no row " << group << " " << row << " " << metric << "; rows of the group:" << have;
  static const DiffRow kNone;
  return kNone;
}

TEST(RunDiffJudge, EachStatusFromItsDefinition) {
  RegressionGate gate;
  ASSERT_TRUE(ParseRegressionGate({"10%", "comm_time=10%", "step_time_p99=10%"}, gate).ok());
  const Repetitions spread{100, 90, 100, 110};
  const RunSummary base = Summary({
      Value("mean_duration", 100, Worse::kHigher, spread),         // -> 120, median 120: regressed
      Value("wait_time", 100, Worse::kHigher, spread),             // -> 105, median 120: worse, under 10 %
      Value("transfer_time", 100, Worse::kHigher, spread),         // -> 150, median 105: noise
      Value("total_time", 1000, Worse::kHigher, spread, true),     // -> 1200, median 100, 120 calls: regressed
      Value("busbw", 10, Worse::kLower, spread),                   // -> 8, median 80: regressed (lower)
      Value("comm_time", 100, Worse::kHigher, {4, 90, 100, 110}),  // -> 120, 4 reps: no guard, named: regressed
      Value("exposed_comm", 100, Worse::kHigher, spread),          // -> 50: better
      Value("count", 10, Worse::kNeither, {}),                     // -> 11: changed, never a regression
      Value("step_time_p99", 0, Worse::kHigher, {}),               // -> 5: from 0, no ratio, named: regressed
      Value("step_time_max", 7, Worse::kHigher, {}),               // the same: unchanged
      Value("step_time_p50", 7, Worse::kHigher, {}),               // -> 9, no guard, not named: worse
      Value("mean", 1, Worse::kHigher, {}),                        // only in the base: removed
  });
  const RunSummary next = Summary({
      Value("mean_duration", 120, Worse::kHigher, {100, 110, 120, 130}),
      Value("wait_time", 105, Worse::kHigher, {100, 110, 120, 130}),
      Value("transfer_time", 150, Worse::kHigher, {100, 90, 105, 400}),
      Value("total_time", 1200, Worse::kHigher, {120, 90, 100, 110}, true),
      Value("busbw", 8, Worse::kLower, {100, 70, 80, 90}), Value("comm_time", 120, Worse::kHigher, {4, 90, 100, 110}),
      Value("exposed_comm", 50, Worse::kHigher, {100, 40, 50, 60}), Value("count", 11, Worse::kNeither, {}),
      Value("step_time_p99", 5, Worse::kHigher, {}), Value("step_time_max", 7, Worse::kHigher, {}),
      Value("step_time_p50", 9, Worse::kHigher, {}), Value("total", 3, Worse::kHigher, {}),  // only in the new: added
  });
  const RunDiff d = DiffRuns(base, next, gate, /*noise_floor_ns=*/0);  // hand-made values of a few ns
  EXPECT_EQ(Find(d, "type", "allreduce", "mean_duration").status, DiffStatus::kRegressed);
  EXPECT_EQ(Find(d, "type", "allreduce", "wait_time").status, DiffStatus::kWorse);
  EXPECT_EQ(Find(d, "type", "allreduce", "transfer_time").status, DiffStatus::kNoise);
  const DiffRow& total = Find(d, "type", "allreduce", "total_time");
  EXPECT_EQ(total.status, DiffStatus::kRegressed) << "120 calls instead of 100 is not noise";
  EXPECT_EQ(total.basis, GuardBasis::kCalls);
  EXPECT_EQ(Find(d, "type", "allreduce", "busbw").status, DiffStatus::kRegressed);
  EXPECT_DOUBLE_EQ(*Find(d, "type", "allreduce", "busbw").relative, -0.2);
  const DiffRow& unguarded = Find(d, "type", "allreduce", "comm_time");
  EXPECT_EQ(unguarded.basis, GuardBasis::kNone);
  EXPECT_EQ(unguarded.status, DiffStatus::kRegressed);
  EXPECT_EQ(Find(d, "type", "allreduce", "exposed_comm").status, DiffStatus::kBetter);
  EXPECT_EQ(Find(d, "type", "allreduce", "count").status, DiffStatus::kChanged);
  EXPECT_FALSE(Find(d, "type", "allreduce", "count").limit.has_value());
  const DiffRow& from_zero = Find(d, "type", "allreduce", "step_time_p99");
  EXPECT_EQ(from_zero.status, DiffStatus::kRegressed);
  EXPECT_FALSE(from_zero.relative.has_value());
  EXPECT_EQ(Find(d, "type", "allreduce", "step_time_max").status, DiffStatus::kUnchanged);
  const DiffRow& blanket_only = Find(d, "type", "allreduce", "step_time_p50");
  EXPECT_EQ(blanket_only.status, DiffStatus::kWorse) << "+29 % but unguarded: the blanket 10 % does not apply";
  EXPECT_FALSE(blanket_only.limit.has_value());
  EXPECT_EQ(Find(d, "type", "allreduce", "mean").status, DiffStatus::kRemoved);
  EXPECT_EQ(Find(d, "type", "allreduce", "total").status, DiffStatus::kAdded);
  EXPECT_EQ(d.regressions, 5u);

  // Largest relative change first: from 0 (no ratio) leads, rows in one run only close.
  ASSERT_EQ(d.rows.size(), 13u);
  EXPECT_EQ(d.rows.front().metric, "step_time_p99");
  // +50 % and -50 % tie on size: then by name.
  EXPECT_EQ(d.rows[1].metric, "exposed_comm");
  EXPECT_EQ(d.rows[2].metric, "transfer_time");
  EXPECT_EQ(d.rows[3].metric, "step_time_p50");  // +28.6 %
  EXPECT_EQ(d.rows[4].metric, "busbw");          // -20 %, before mean_duration and total_time's +20 % by name
  EXPECT_TRUE(d.rows[11].status == DiffStatus::kRemoved || d.rows[11].status == DiffStatus::kAdded);
  EXPECT_TRUE(d.rows[12].status == DiffStatus::kRemoved || d.rows[12].status == DiffStatus::kAdded);

  // Without a gate nothing regresses; the bad changes are "worse".
  const RunDiff ungated = DiffRuns(base, next, RegressionGate{}, 0);
  EXPECT_EQ(ungated.regressions, 0u);
  EXPECT_EQ(Find(ungated, "type", "allreduce", "mean_duration").status, DiffStatus::kWorse);
  // A per-metric limit above the change passes that metric.
  RegressionGate loose;
  ASSERT_TRUE(ParseRegressionGate({"10%", "mean_duration=25%"}, loose).ok());
  EXPECT_EQ(Find(DiffRuns(base, next, loose, 0), "type", "allreduce", "mean_duration").status, DiffStatus::kWorse);
  // The default floor (100 us) is far above these few-ns changes: every guarded change is noise.
  EXPECT_EQ(Find(DiffRuns(base, next, gate), "type", "allreduce", "mean_duration").status, DiffStatus::kNoise);
}

// The half-shift of NoiseGuard.HalfTheCallsSlowerIsNotNoiseThoughTheMedianStays through DiffRuns
// with the default floor: a type row regresses on its mid-mean; a rank row (all its types pooled,
// its waits moving with the machine's load) is judged on its median alone, and shows noise.
TEST(RunDiffJudge, TheMidMeanJudgesTypeRowsAndNotRankRows) {
  std::vector<double> fast, half;
  for (int i = 0; i < 300; ++i) {
    fast.insert(fast.end(), {10'000, 10'000});
    half.insert(half.end(), {10'000, 3'010'000});
  }
  const Repetitions base_reps = SummarizeRepetitions(fast), next_reps = SummarizeRepetitions(half);
  MetricValue type_base = Value("mean_duration", 10'000, Worse::kHigher, base_reps);
  MetricValue type_next = Value("mean_duration", 1'510'000, Worse::kHigher, next_reps);
  MetricValue rank_base = type_base, rank_next = type_next;
  rank_base.group = rank_next.group = "rank";
  rank_base.row = rank_next.row = "1";
  rank_base.metric = rank_next.metric = "comm_time";
  RegressionGate gate;
  ASSERT_TRUE(ParseRegressionGate({"10%"}, gate).ok());
  const RunDiff d = DiffRuns(Summary({type_base, rank_base}), Summary({type_next, rank_next}), gate);
  const DiffRow& type = Find(d, "type", "allreduce", "mean_duration");
  EXPECT_EQ(type.status, DiffStatus::kRegressed);
  EXPECT_DOUBLE_EQ(type.next_reps.mid_mean, (151 * 10'000.0 + 150 * 3'010'000.0) / 301);
  const DiffRow& rank = Find(d, "rank", "1", "comm_time");
  EXPECT_EQ(rank.status, DiffStatus::kNoise);
  EXPECT_TRUE(std::isnan(rank.next_reps.mid_mean));
  const nlohmann::ordered_json j = DiffToJson(d, gate);
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["noise_guard"]["new_mid_mean"].is_null(), row["group"] == "rank") << row.dump();
    EXPECT_EQ(row["noise_guard"]["base_mid_mean"].is_null(), row["group"] == "rank") << row.dump();
  }
  for (const auto& row : j["rows"]) {
    if (row["group"] == "type") {
      EXPECT_DOUBLE_EQ(row["noise_guard"]["base_mid_mean"].get<double>(), 10'000);
    }
  }
}

// Found on a real 4-rank run of 8-double Bcasts: "1.68e-05 GB/s" was cut to "1.68e-05 GB~" in
// the table's 12 columns. A bandwidth under 1 GB/s is shown in MB/s, KB/s or B/s.
TEST(DiffText, SmallBandwidthsFitTheirColumnsInASmallerUnit) {
  EXPECT_EQ(FormatDiffValue(1.68e-05, "GB/s"), "16.8 KB/s");
  EXPECT_EQ(FormatDiffValue(0.25, "GB/s"), "250 MB/s");
  EXPECT_EQ(FormatDiffValue(3e-8, "GB/s"), "30 B/s");
  EXPECT_EQ(FormatDiffValue(-1.76e-05, "GB/s"), "-17.6 KB/s");
  EXPECT_EQ(FormatDiffValue(12.5, "GB/s"), "12.5 GB/s");
  EXPECT_EQ(FormatDiffValue(0, "GB/s"), "0 GB/s");
  RunDiff d;
  DiffRow r;
  r.group = "type";
  r.row = "bcast";
  r.metric = "busbw";
  r.unit = "GB/s";
  r.worse = Worse::kLower;
  r.base = 1.68e-05;
  r.next = 3.44e-05;
  r.change = 1.76e-05;
  r.relative = 1.05;
  r.status = DiffStatus::kNoise;
  d.rows.push_back(r);
  std::ostringstream os;
  WriteDiffText(d, 0, os);
  EXPECT_NE(os.str().find("16.8 KB/s"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("+17.6 KB/s"), std::string::npos) << os.str();
  EXPECT_EQ(os.str().find('~'), std::string::npos) << "nothing cut: " << os.str();
}

// ---- golden diffs of files written with the project's writer ----

constexpr uint32_t kRanks = 4;
constexpr uint64_t kIters = 20;
constexpr uint64_t kCompute = 1'000'000;  // 1 ms before each collective
constexpr uint64_t kPlant = 3'000'000;    // the root's lateness to each Bcast in the slow run

// Jitter of 0..40 us: the same on every run of one pattern; `shuffle` gives each rank another's.
uint64_t Jitter(uint64_t i, uint32_t r, uint32_t shuffle) {
  return ((i * 7 + ((r + shuffle) % kRanks) * 3) % 5) * 10'000;
}

// The loop, per iteration i and rank r: mark step i; 1 ms + jitter, MPI_Allreduce (everyone leaves
// 100 us + r us after the last arrival); 1 ms + jitter (+ plant on the root), MPI_Bcast from rank
// 0 (everyone leaves 50 us + r us after the last arrival). The truth the test checks, summed as
// it is planted: per Bcast arrival its duration, and the waits of docs/metrics.md §2: a non-root
// waits for the root's arrival (when later than its own); the root, held in the call until after
// the last arrival, waits for that last arrival.
struct Loop {
  std::vector<RankData> ranks;
  double bcast_total = 0, bcast_wait = 0, allreduce_total = 0;
  std::vector<int64_t> step_time;  // per step: the slowest rank's
};
Loop MakeLoop(uint64_t plant, uint32_t shuffle, bool steps = true) {
  Loop loop;
  loop.ranks.resize(kRanks);
  loop.step_time.assign(kIters, 0);
  std::vector<uint64_t> begin(kRanks, 1'000'000);
  for (RankData& rank : loop.ranks) {
    rank.strings = {"", "MPI_Allreduce", "MPI_Bcast"};  // the calls' names, as a collector records them
  }
  for (uint64_t i = 0; i < kIters; ++i) {
    std::vector<uint64_t> a(kRanks), b(kRanks), ar_leave(kRanks);
    for (uint32_t r = 0; r < kRanks; ++r) {
      commprof_event step{};
      step.kind = COMMPROF_KIND_STEP;
      step.seq = i;
      step.start_ns = step.end_ns = begin[r];
      step.peer = COMMPROF_NO_PEER;
      step.device = COMMPROF_HOST_DEVICE;
      if (steps) {
        loop.ranks[r].events.push_back(step);
      }
      a[r] = begin[r] + kCompute + Jitter(i, r, shuffle);
    }
    const uint64_t last_a = *std::max_element(a.begin(), a.end());
    for (uint32_t r = 0; r < kRanks; ++r) {
      ar_leave[r] = last_a + 100'000 + 1000 * r;
      loop.ranks[r].events.push_back(
          Collective(COMMPROF_OP_ALLREDUCE, 2 * i, a[r], ar_leave[r], {.bytes = 512, .name = 1}));
      loop.allreduce_total += static_cast<double>(ar_leave[r] - a[r]);
      b[r] = ar_leave[r] + kCompute + Jitter(i + 3, r, shuffle) + (r == 0 ? plant : 0);
    }
    const uint64_t last_b = *std::max_element(b.begin(), b.end());
    for (uint32_t r = 0; r < kRanks; ++r) {
      const uint64_t leave = last_b + 50'000 + 1000 * r;
      loop.ranks[r].events.push_back(
          Collective(COMMPROF_OP_BCAST, 2 * i + 1, b[r], leave, {.root = 0, .bytes = 512, .name = 2}));
      loop.bcast_total += static_cast<double>(leave - b[r]);
      if (r != 0 && b[0] > b[r]) {
        loop.bcast_wait += static_cast<double>(b[0] - b[r]);
      }
      if (r == 0) {  // the root is held: it leaves after the last arrival, so it waits for it
        loop.bcast_wait += static_cast<double>(last_b - b[0]);
      }
      loop.step_time[i] = std::max<int64_t>(loop.step_time[i], static_cast<int64_t>(leave - begin[r]));
      begin[r] = leave;
    }
  }
  for (uint32_t r = 0; r < kRanks; ++r) {
    commprof_event fin{};
    fin.kind = COMMPROF_KIND_MPI_FINALIZE;
    fin.start_ns = begin[r];  // the last step ends with its Bcast, the last event before this
    fin.end_ns = begin[r] + 1'000'000;
    fin.peer = COMMPROF_NO_PEER;
    fin.device = COMMPROF_HOST_DEVICE;
    loop.ranks[r].events.push_back(fin);
  }
  return loop;
}

RunSummary SummaryOf(const std::string& path, const Loop& loop) {
  auto reader = test_support::WriteProfile(path, loop.ranks);
  EXPECT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  EXPECT_TRUE(rep.ok()) << rep.status().message();
  RunSummary s = SummarizeRun(rep.value());
  s.path = path;
  return s;
}

TEST(RunDiffGolden, APlantedLateBcastRootRegressesTheBcastAndTheStepsOnlyByThePlantedAmount) {
  TempDir dir;
  const Loop base_loop = MakeLoop(0, 0), slow_loop = MakeLoop(kPlant, 0);
  const RunSummary base = SummaryOf(dir / "base.h5", base_loop), slow = SummaryOf(dir / "slow.h5", slow_loop);
  ASSERT_TRUE(base.has_steps && slow.has_steps);
  RegressionGate gate;
  ASSERT_TRUE(ParseRegressionGate({"10%"}, gate).ok());
  const RunDiff d = DiffRuns(base, slow, gate);
  EXPECT_TRUE(d.steps_compared);

  // The Bcast: exactly the planted sums (ns are exact), regressed.
  const DiffRow& total = Find(d, "type", "bcast", "total_time");
  EXPECT_DOUBLE_EQ(*total.base, base_loop.bcast_total);
  EXPECT_DOUBLE_EQ(*total.next, slow_loop.bcast_total);
  EXPECT_DOUBLE_EQ(total.change, slow_loop.bcast_total - base_loop.bcast_total);
  EXPECT_DOUBLE_EQ(*total.relative, (slow_loop.bcast_total - base_loop.bcast_total) / base_loop.bcast_total);
  EXPECT_EQ(total.status, DiffStatus::kRegressed);
  EXPECT_EQ(total.basis, GuardBasis::kCalls) << "a type's repetitions are its calls";
  EXPECT_EQ(total.base_reps.n, kIters * kRanks);
  // 3 non-roots wait the 3 ms plant (less their jitter lead) in each of the 20 Bcasts.
  EXPECT_NEAR(slow_loop.bcast_total - base_loop.bcast_total, 3.0 * kIters * kPlant, 3.0 * kIters * 50'000);
  const DiffRow& wait = Find(d, "type", "bcast", "wait_time");
  EXPECT_DOUBLE_EQ(*wait.base, base_loop.bcast_wait);
  EXPECT_DOUBLE_EQ(*wait.next, slow_loop.bcast_wait);
  EXPECT_EQ(wait.status, DiffStatus::kRegressed);
  EXPECT_DOUBLE_EQ(*Find(d, "type", "bcast", "mean_duration").next, slow_loop.bcast_total / (kIters * kRanks));
  EXPECT_EQ(Find(d, "type", "bcast", "mean_duration").status, DiffStatus::kRegressed);
  EXPECT_EQ(Find(d, "type", "bcast", "count").status, DiffStatus::kUnchanged);

  // The Allreduce: the same durations and waits in both runs (its arrivals are shifted as a whole).
  for (const std::string metric : {"total_time", "mean_duration", "wait_time", "transfer_time", "count"}) {
    const DiffRow& r = Find(d, "type", "allreduce", metric);
    EXPECT_EQ(r.status, DiffStatus::kUnchanged) << metric << " " << *r.base << " -> " << *r.next;
  }
  EXPECT_DOUBLE_EQ(*Find(d, "type", "allreduce", "total_time").base, base_loop.allreduce_total);

  // Ranks 1-3 waited; with steps in both, their repetitions are their steps.
  for (uint32_t r = 1; r < kRanks; ++r) {
    const DiffRow& w = Find(d, "rank", std::to_string(r), "wait_time");
    EXPECT_EQ(w.basis, GuardBasis::kSteps);
    EXPECT_EQ(w.base_reps.n, kIters);
    EXPECT_EQ(w.status, DiffStatus::kRegressed) << r;
  }
  // Every step got slower by the plant (give or take the jitter the plant overtook).
  for (uint64_t i = 0; i < kIters; ++i) {
    const DiffRow& s = Find(d, "step", std::to_string(i), "step_time");
    EXPECT_EQ(*s.base, base_loop.step_time[i]) << i;
    EXPECT_EQ(*s.next, slow_loop.step_time[i]) << i;
    EXPECT_NEAR(s.change, static_cast<double>(kPlant), 50'000.0) << i;
    EXPECT_EQ(s.status, DiffStatus::kRegressed) << i;
    EXPECT_EQ(s.basis, GuardBasis::kSteps);
    EXPECT_EQ(s.base_reps.n, kIters) << "one step is judged against all the base's steps";
  }
  EXPECT_EQ(Find(d, "steps", "all", "step_time_p50").status, DiffStatus::kRegressed);

  // A floor above the plant (3 ms) makes the Bcast's per-call change noise; the steps too.
  const RunDiff floored = DiffRuns(base, slow, gate, 10'000'000);
  EXPECT_EQ(Find(floored, "type", "bcast", "total_time").status, DiffStatus::kNoise);
  EXPECT_EQ(Find(floored, "step", "3", "step_time").status, DiffStatus::kNoise);
  EXPECT_DOUBLE_EQ(floored.noise_floor_ns, 10'000'000.0);

  // No type but the Bcast regressed.
  for (const DiffRow& r : d.rows) {
    if (r.group == "type" && r.row != "bcast") {
      EXPECT_NE(r.status, DiffStatus::kRegressed) << r.row << " " << r.metric;
    }
  }

  // The text: regressions named, every line within 100 columns, the largest change first.
  std::ostringstream text;
  WriteDiffText(d, 0, text);
  EXPECT_NE(text.str().find("  type bcast total_time: "), std::string::npos) << text.str();
  std::istringstream lines(text.str());
  std::string line;
  for (int n = 0; std::getline(lines, line); ++n) {
    if (n >= 2) {  // the two paths may be long
      EXPECT_LE(line.size(), 100u) << line;
    }
  }
  // The JSON: versioned, one object per row, the same verdicts.
  const nlohmann::ordered_json j = DiffToJson(d, gate);
  EXPECT_EQ(j["schema"], "commprof-diff");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["regressions"], d.regressions);
  EXPECT_EQ(j["rows"].size(), d.rows.size());
  EXPECT_DOUBLE_EQ(j["gate"]["all"].get<double>(), 0.10);
  bool found = false;
  for (const auto& r : j["rows"]) {
    if (r["group"] == "type" && r["row"] == "bcast" && r["metric"] == "total_time") {
      found = true;
      EXPECT_EQ(r["status"], "regressed");
      EXPECT_DOUBLE_EQ(r["base"].get<double>(), base_loop.bcast_total);
      EXPECT_EQ(r["noise_guard"]["basis"], "calls");
      EXPECT_EQ(r["noise_guard"]["base_n"], kIters * kRanks);
      EXPECT_EQ(r["worse"], "higher");
      EXPECT_EQ(r["unit"], "ns");
    }
  }
  EXPECT_TRUE(found);
}

TEST(RunDiffGolden, ShuffledJitterIsWithinNoiseAndPassesATightGate) {
  TempDir dir;
  const RunSummary a = SummaryOf(dir / "a.h5", MakeLoop(0, 0)), b = SummaryOf(dir / "b.h5", MakeLoop(0, 1));
  RegressionGate gate;
  ASSERT_TRUE(ParseRegressionGate({"1%"}, gate).ok());
  const RunDiff d = DiffRuns(a, b, gate);
  size_t changed = 0;
  for (const DiffRow& r : d.rows) {
    ASSERT_TRUE(r.base && r.next) << "the same rows in both";
    if (r.status == DiffStatus::kUnchanged) {
      continue;
    }
    ++changed;
    if (r.basis == GuardBasis::kNone) {
      // A tail has no repetitions (§13.2): only step_time_p99 and step_time_max are unguarded.
      EXPECT_TRUE(r.metric == "step_time_p99" || r.metric == "step_time_max") << r.metric;
      EXPECT_LT(std::fabs(*r.relative), 0.01) << r.metric << ": the shuffle moves a tail by microseconds";
    } else if (r.group == "step" && r.status != DiffStatus::kNoise) {
      // A single step past the base's whole range of steps: here only by the 2 us of the shuffle.
      EXPECT_LE(std::fabs(r.change), 2'000.0) << "step " << r.row;
    } else {
      EXPECT_EQ(r.status, DiffStatus::kNoise)
          << r.group << " " << r.row << " " << r.metric << ": " << *r.base << " -> " << *r.next;
    }
  }
  EXPECT_GT(changed, 10u) << "the shuffle moves the figures";
  EXPECT_EQ(d.regressions, 0u);
}

TEST(RunDiffGolden, WithoutStepsARankIsJudgedOnAllItsCalls) {
  TempDir dir;
  const RunSummary base = SummaryOf(dir / "base.h5", MakeLoop(0, 0, false));
  const RunSummary slow = SummaryOf(dir / "slow.h5", MakeLoop(kPlant, 0, false));
  const RunSummary shuffled = SummaryOf(dir / "shuffled.h5", MakeLoop(0, 1, false));
  ASSERT_FALSE(base.has_steps);
  RegressionGate gate;
  ASSERT_TRUE(ParseRegressionGate({"10%"}, gate).ok());
  const RunDiff d = DiffRuns(base, slow, gate);
  EXPECT_FALSE(d.steps_compared);
  for (uint32_t r = 1; r < kRanks; ++r) {
    const DiffRow& w = Find(d, "rank", std::to_string(r), "wait_time");
    EXPECT_EQ(w.basis, GuardBasis::kCalls);
    EXPECT_EQ(w.base_reps.n, 2 * kIters) << "its Allreduce and Bcast calls together";
    // Each waited the 3 ms plant, less its lead on the root, in each of the 20 Bcasts.
    EXPECT_NEAR(w.change, static_cast<double>(kIters * kPlant), kIters * 50'000.0) << r;
  }
  // The same loop with its jitter shuffled: every rank figure that moved is within noise.
  const RunDiff steady = DiffRuns(base, shuffled, gate);
  EXPECT_EQ(steady.regressions, 0u);
  size_t noise = 0;
  for (const DiffRow& r : steady.rows) {
    if (r.group == "rank" && r.status != DiffStatus::kUnchanged) {
      EXPECT_EQ(r.status, DiffStatus::kNoise) << r.row << " " << r.metric;
      EXPECT_EQ(r.basis, GuardBasis::kCalls);
      ++noise;
    }
  }
  EXPECT_GT(noise, 0u);
}

TEST(RunDiffGolden, ByNameTheStatsRowsOfTheBcastRegressAndTheAllreduceDoNot) {
  TempDir dir;
  const Loop base_loop = MakeLoop(0, 0), slow_loop = MakeLoop(kPlant, 0);
  ASSERT_NE(test_support::WriteProfile(dir / "base.h5", base_loop.ranks), nullptr);
  ASSERT_NE(test_support::WriteProfile(dir / "slow.h5", slow_loop.ranks), nullptr);
  auto base = SummarizeProfile(dir / "base.h5", -1);
  auto slow = SummarizeProfile(dir / "slow.h5", -1);
  ASSERT_TRUE(base.ok() && slow.ok());
  RegressionGate gate;
  ASSERT_TRUE(ParseRegressionGate({"10%"}, gate).ok());
  const RunDiff d = DiffRuns(base.value(), slow.value(), gate);
  const DiffRow& total = Find(d, "name", "mpi/MPI_Bcast", "total");
  EXPECT_DOUBLE_EQ(*total.base, base_loop.bcast_total) << "the stats' total is the same sum of durations";
  EXPECT_DOUBLE_EQ(*total.next, slow_loop.bcast_total);
  EXPECT_EQ(total.status, DiffStatus::kRegressed);
  EXPECT_EQ(total.basis, GuardBasis::kCalls);
  EXPECT_EQ(total.base_reps.n, kIters * kRanks);
  EXPECT_EQ(Find(d, "name", "mpi/MPI_Bcast", "mean").status, DiffStatus::kRegressed);
  EXPECT_EQ(Find(d, "name", "mpi/MPI_Allreduce", "total").status, DiffStatus::kUnchanged);
  EXPECT_DOUBLE_EQ(*Find(d, "name", "mpi/MPI_Allreduce", "total").base, base_loop.allreduce_total);
}

// The diff's lighter analysis gives every compared figure exactly as the full one does.
TEST(RunDiffGolden, AnalyzeForDiffSummarizesExactlyAsAnalyzeJob) {
  TempDir dir;
  for (const bool steps : {true, false}) {
    auto reader = test_support::WriteProfile(dir / (steps ? "steps.h5" : "calls.h5"), MakeLoop(kPlant, 1, steps).ranks);
    ASSERT_NE(reader, nullptr);
    auto full = AnalyzeJob(*reader);
    auto light = AnalyzeForDiff(*reader);
    ASSERT_TRUE(full.ok() && light.ok());
    const RunSummary a = SummarizeRun(full.value()), b = SummarizeRun(light.value());
    EXPECT_EQ(a.has_steps, steps);
    ASSERT_EQ(a.metrics.size(), b.metrics.size());
    for (size_t i = 0; i < a.metrics.size(); ++i) {
      const MetricValue &x = a.metrics[i], &y = b.metrics[i];
      const std::string what = x.group + " " + x.row + " " + x.metric;
      EXPECT_EQ(std::tie(x.group, x.row, x.metric), std::tie(y.group, y.row, y.metric));
      EXPECT_EQ(x.value, y.value) << what;
      EXPECT_EQ(x.per_call.n, y.per_call.n) << what;
      EXPECT_EQ(x.per_call.p10, y.per_call.p10) << what;
      EXPECT_EQ(x.per_call.p90, y.per_call.p90) << what;
      EXPECT_EQ(x.per_step.n, y.per_step.n) << what;
      EXPECT_EQ(x.per_step.p50, y.per_step.p50) << what;
    }
  }
}

TEST(RunDiffGolden, AFileAgainstItselfChangesNothing) {
  TempDir dir;
  const RunSummary a = SummaryOf(dir / "a.h5", MakeLoop(kPlant, 0));
  RegressionGate gate;
  ASSERT_TRUE(ParseRegressionGate({"0%"}, gate).ok());
  const RunDiff d = DiffRuns(a, a, gate);
  EXPECT_EQ(d.regressions, 0u);
  EXPECT_GT(d.rows.size(), 20u);
  for (const DiffRow& r : d.rows) {
    EXPECT_EQ(r.status, DiffStatus::kUnchanged) << r.group << " " << r.row << " " << r.metric;
    EXPECT_EQ(r.change, 0.0);
  }
}

TEST(RunDiffGolden, SummarizeProfileNamesAMissingFileAndABadWindow) {
  TempDir dir;
  auto missing = SummarizeProfile(dir / "nope.h5", -1);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.h5"), std::string::npos) << missing.status().message();
  const std::string path = dir / "a.h5";
  ASSERT_NE(test_support::WriteProfile(path, MakeLoop(0, 0).ranks), nullptr);
  auto whole = SummarizeProfile(path, -1);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole.value().path, path);
  auto window = SummarizeProfile(path, 2);
  ASSERT_FALSE(window.ok());
  EXPECT_NE(window.status().message().find("a.h5"), std::string::npos) << window.status().message();
}

}  // namespace
}  // namespace commprof
