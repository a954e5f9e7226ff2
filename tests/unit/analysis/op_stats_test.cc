// Operation statistics (docs/metrics.md §12) on a small 4-rank file written with the real
// Hdf5Writer, every figure computed by hand: nested NVTX, user and imported ranges (self time),
// percentiles of a known set, the imbalance of a planted slow rank, size buckets and bandwidth;
// and the percentile sketch's histogram regime against exact values.
#include "analysis/metrics/op_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/metrics/duration_sketch.h"
#include "analysis/metrics/nearest_rank.h"
#include "analysis/op_stats_golden.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using op_stats_golden::AllreduceNs;
using op_stats_golden::GoldenRanks;
using op_stats_golden::kBig;
using op_stats_golden::kRanks;
using op_stats_golden::kSmall;
using test_support::TempDir;

const OpStatsRow* Find(const OpStats& s, const std::string& name, std::optional<int> bucket = std::nullopt,
                       std::optional<uint32_t> rank = std::nullopt) {
  for (const OpStatsRow& row : s.rows) {
    if (row.name == name && row.size_bucket == bucket && row.rank == rank) {
      return &row;
    }
  }
  return nullptr;
}

class OpStatsGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    reader_ = test_support::WriteProfile(dir_ / "golden.h5", GoldenRanks());
    ASSERT_NE(reader_, nullptr);
  }
  OpStats Compute(const StatsOptions& o = {}) {
    auto s = ComputeOpStats(*reader_, o);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(s.value()) : OpStats{};
  }
  TempDir dir_;
  std::unique_ptr<ProfileReader> reader_;
};

TEST_F(OpStatsGolden, NestedRangesSelfTimeIsTotalMinusDirectChildrenOfTheSameFamily) {
  const OpStats s = Compute();
  const OpStatsRow* outer = Find(s, "outer");
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->category, "nvtx");
  EXPECT_EQ(outer->calls, 2u);
  EXPECT_EQ(outer->total_ns, 10000 + 1000);
  EXPECT_EQ(outer->self_ns, (10000 - 3000 - 2000) + 1000);
  const OpStatsRow* inner = Find(s, "inner");
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->total_ns, 3000 + 2000);
  EXPECT_EQ(inner->self_ns, (3000 - 500) + 2000);
  EXPECT_EQ(inner->min_ns, 2000);
  EXPECT_EQ(inner->max_ns, 3000);
  const OpStatsRow* leaf = Find(s, "leaf");
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(leaf->self_ns, 500);

  const OpStatsRow* step = Find(s, "step_user");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->category, "user");
  EXPECT_EQ(step->total_ns, 20000);
  EXPECT_EQ(step->self_ns, 20000 - 800);  // only fwd_user, not the NVTX ranges inside it

  const OpStatsRow* ann = Find(s, "ProfilerStep#1");
  const OpStatsRow* linear = Find(s, "aten::linear");
  const OpStatsRow* mm = Find(s, "aten::mm");
  ASSERT_TRUE(ann && linear && mm);
  EXPECT_EQ(ann->category, "torch");
  EXPECT_EQ(ann->self_ns, 5000 - 1000);
  EXPECT_EQ(linear->self_ns, 1000 - 500);
  EXPECT_EQ(mm->self_ns, 500);
}

TEST_F(OpStatsGolden, PercentilesImbalanceAndBandwidthOfTheAllreduceMatchTheHandFigures) {
  const OpStats s = Compute();
  ASSERT_EQ(s.ranks.size(), kRanks);
  const OpStatsRow* ar = Find(s, "MPI_Allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->category, "mpi");
  EXPECT_EQ(ar->calls, 20u);
  EXPECT_EQ(ar->total_ns, 3 * 1500 + 6000);
  EXPECT_EQ(ar->self_ns, ar->total_ns);
  EXPECT_DOUBLE_EQ(ar->mean_ns, 10500.0 / 20);
  // Sorted: 100×4, 200×4, 300×4, 400×4, 500×3, 5000: the 10th is 300, the 20th (⌈19.8⌉) 5000.
  EXPECT_EQ(ar->p50_ns, 300);
  EXPECT_EQ(ar->p99_ns, 5000);
  EXPECT_TRUE(ar->percentiles_exact);
  EXPECT_EQ(ar->min_ns, 100);
  EXPECT_EQ(ar->max_ns, 5000);
  const uint64_t bytes = kRanks * (3 * kSmall + 2 * kBig);
  EXPECT_EQ(ar->bytes, bytes);
  ASSERT_TRUE(ar->bandwidth_gbps.has_value());
  EXPECT_DOUBLE_EQ(*ar->bandwidth_gbps, static_cast<double>(bytes) / 10500.0);
  ASSERT_EQ(ar->per_rank.size(), kRanks);
  EXPECT_EQ(ar->per_rank[2].total_ns, 6000);
  EXPECT_EQ(ar->per_rank[1].calls, 5u);
  ASSERT_TRUE(ar->imbalance && ar->max_rank);
  EXPECT_EQ(*ar->max_rank, 2u);
  EXPECT_DOUBLE_EQ(*ar->imbalance, 6000.0 / (10500.0 / 4));
  EXPECT_EQ(s.rows.front().name, "HtoD");  // the largest total first (200 us)
  for (size_t i = 1; i < s.rows.size(); ++i) {
    EXPECT_GE(s.rows[i - 1].total_ns, s.rows[i].total_ns) << i;
  }
}

TEST_F(OpStatsGolden, CopiesSendrecvWaitsAndKernelsCountWhatTheyMoved) {
  const OpStats s = Compute();
  const OpStatsRow* htod = Find(s, "HtoD");
  ASSERT_NE(htod, nullptr);
  EXPECT_EQ(htod->category, "memcpy");
  EXPECT_EQ(htod->calls, 2u);
  ASSERT_TRUE(htod->bandwidth_gbps.has_value());
  EXPECT_DOUBLE_EQ(*htod->bandwidth_gbps, 10.0);  // 2 MB in 200 us
  // The row of a single-rank operation: only rank 0 has it; mean over the 4 ranks read.
  EXPECT_DOUBLE_EQ(*htod->imbalance, 4.0);
  EXPECT_EQ(*htod->max_rank, 0u);

  const OpStatsRow* sr = Find(s, "MPI_Sendrecv");
  ASSERT_NE(sr, nullptr);
  EXPECT_EQ(sr->calls, 1u);
  EXPECT_EQ(sr->bytes, 4096u);  // the bytes sent
  const OpStatsRow* wait = Find(s, "MPI_Wait");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->bytes, 0u);
  EXPECT_FALSE(wait->bandwidth_gbps.has_value());
  const OpStatsRow* gemm = Find(s, "gemm_kernel");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->category, "kernel");
  EXPECT_EQ(gemm->bytes, 0u);
  EXPECT_EQ(Find(s, "MPI_Isend"), nullptr);
  EXPECT_EQ(s.incomplete_skipped, 1u);
}

TEST_F(OpStatsGolden, SizeBucketsSplitRowsAndCountTheHistogram) {
  StatsOptions o;
  o.by_size = true;
  o.kinds = {"mpi"};
  const OpStats s = Compute(o);
  const int small = SizeBucketOf(kSmall), big = SizeBucketOf(kBig);
  EXPECT_EQ(small, 11);
  EXPECT_EQ(SizeBucketLow(small), 1024u);
  EXPECT_EQ(SizeBucketHigh(small), 2048u);
  EXPECT_EQ(SizeBucketLabel(small), "[1 KiB, 2 KiB)");
  const OpStatsRow* lo = Find(s, "MPI_Allreduce", small);
  const OpStatsRow* hi = Find(s, "MPI_Allreduce", big);
  ASSERT_TRUE(lo && hi);
  EXPECT_EQ(lo->calls, 12u);
  EXPECT_EQ(lo->total_ns, 4 * (100 + 200 + 300));
  EXPECT_EQ(hi->calls, 8u);
  EXPECT_EQ(hi->total_ns, 3 * 900 + 5400);
  EXPECT_EQ(*hi->max_rank, 2u);
  for (const OpStatsRow& row : s.rows) {
    EXPECT_EQ(row.category, "mpi") << row.name;
  }
  const SizeHistogram* h = nullptr;
  for (const SizeHistogram& x : s.size_histograms) {
    h = x.name == "MPI_Allreduce" ? &x : h;
  }
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(h->buckets.size(), 2u);
  EXPECT_EQ(h->buckets[0], std::make_pair(small, uint64_t{12}));
  EXPECT_EQ(h->buckets[1], std::make_pair(big, uint64_t{8}));
}

TEST_F(OpStatsGolden, ByRankAndRanksFilterKeepOnlyThoseRanks) {
  StatsOptions o;
  o.by_rank = true;
  o.ranks = {1, 2};
  o.kinds = {"mpi"};
  const OpStats s = Compute(o);
  EXPECT_EQ(s.ranks, (std::vector<uint32_t>{1, 2}));
  const OpStatsRow* r2 = Find(s, "MPI_Allreduce", std::nullopt, 2u);
  const OpStatsRow* r1 = Find(s, "MPI_Allreduce", std::nullopt, 1u);
  ASSERT_TRUE(r1 && r2);
  EXPECT_EQ(r2->total_ns, 6000);
  EXPECT_EQ(r1->total_ns, 1500);
  EXPECT_FALSE(r2->imbalance.has_value());
  EXPECT_EQ(Find(s, "MPI_Allreduce", std::nullopt, 0u), nullptr);
  EXPECT_EQ(Find(s, "MPI_Sendrecv", std::nullopt, 0u), nullptr);
}

TEST_F(OpStatsGolden, PastTheExactLimitPercentilesComeFromTheHistogramWithinOnePercent) {
  StatsOptions o;
  o.exact_samples = 8;
  const OpStats s = Compute(o);
  const OpStatsRow* ar = Find(s, "MPI_Allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_FALSE(ar->percentiles_exact);
  EXPECT_NEAR(ar->p50_ns, 300, 300 * DurationSketch::kRelativeError);
  EXPECT_EQ(ar->p99_ns, 5000);  // clamped to the max
}

TEST(DurationSketch, HistogramQuantilesStayWithinTheStatedRelativeErrorOfExactOnes) {
  DurationSketch sketch(100);
  std::vector<int64_t> all;
  uint64_t x = 88172645463325252ull;  // xorshift: the same spread of durations on every run
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    // Log-uniform from 1 us to 100 ms, plus a few instants.
    const double u = static_cast<double>(x % 1'000'000) / 1e6;
    const int64_t ns = i % 1000 == 0 ? 0 : static_cast<int64_t>(std::pow(10.0, 3.0 + 5.0 * u));
    sketch.Add(ns);
    all.push_back(ns);
  }
  ASSERT_FALSE(sketch.exact());
  for (double q : {0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0}) {
    const auto exact = static_cast<double>(NearestRank(all, q));
    const auto got = static_cast<double>(sketch.Quantile(q));
    EXPECT_LE(std::abs(got - exact), exact * DurationSketch::kRelativeError + 0.5) << "q=" << q;
  }
}

TEST(DurationSketch, BelowTheLimitQuantilesAreExact) {
  DurationSketch sketch(10);
  for (int64_t v : {50, 10, 40, 20, 30}) {
    sketch.Add(v);
  }
  EXPECT_TRUE(sketch.exact());
  EXPECT_EQ(sketch.Quantile(0.5), 30);
  EXPECT_EQ(sketch.Quantile(0.2), 10);
  EXPECT_EQ(sketch.Quantile(0.99), 50);
  EXPECT_EQ(DurationSketch().Quantile(0.5), 0);
}

}  // namespace
}  // namespace commprof
