// Operation statistics (docs/metrics.md §12) on a small 4-rank file written with the real
// Hdf5Writer, every figure computed by hand: nested NVTX, user and imported ranges (self time),
// percentiles of a known set, the imbalance of a planted slow rank, size buckets and bandwidth;
// and the percentile sketch's histogram regime against exact values.
#include "analysis/metrics/op_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analysis/metrics/duration_sketch.h"
#include "analysis/metrics/nearest_rank.h"
#include "analysis/op_stats_golden.h"
#include "core/part_bytes.h"
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

TEST_F(OpStatsGolden, RangesStoredOutOfEndOrderGetTheSameSelfTimesBySorting) {
  const OpStats s = Compute();
  const OpStatsRow* parent = Find(s, "late_parent");
  const OpStatsRow* child = Find(s, "late_child");
  ASSERT_TRUE(parent && child);
  EXPECT_EQ(parent->total_ns, 900);
  EXPECT_EQ(parent->self_ns, 900 - 300);
  EXPECT_EQ(child->self_ns, 300);
  ASSERT_EQ(parent->per_rank.size(), 1u);
  EXPECT_EQ(parent->per_rank[0].rank, 1u);
  EXPECT_EQ(parent->per_rank[0].self_ns, 600);
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

TEST(OpStats, WindowKCountsOnlyTheEventsThatStartInsideIt) {
  TempDir dir;
  auto ranks = GoldenRanks();
  // Window 0 of every rank: [1.0 ms, 1.25 ms] holds the starts of MPI_Allreduce calls 0-2 (at
  // 1.0, 1.1 and 1.2 ms); everything else of the golden file starts outside it.
  for (auto& r : ranks) {
    commprof_event w = op_stats_golden::Range(COMMPROF_KIND_WINDOW, 0, 1'000'000, 1'250'000);
    w.subtype = 1;
    r.events.push_back(w);
  }
  auto reader = test_support::WriteProfile(dir / "window.h5", ranks);
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(reader->SelectWindow(0).ok());
  auto s = ComputeOpStats(*reader, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->rows.size(), 1u);
  const OpStatsRow& ar = s->rows[0];
  EXPECT_EQ(ar.name, "MPI_Allreduce");
  EXPECT_EQ(ar.calls, 12u);
  EXPECT_EQ(ar.total_ns, 4 * (100 + 200 + 300));
  EXPECT_EQ(s->incomplete_skipped, 0u);
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

// The sketches of two halves of a series, merged, answer every quantile as the sketch of the whole
// series does, in both regimes and at the boundary between them (docs/scale.md: the distributed
// stats equal one process's), and survive the bytes that carry them between processes.
TEST(DurationSketch, MergedHalvesEqualTheWholeSeriesAtEverySplitAndThroughBytes) {
  std::vector<int64_t> series;
  uint64_t x = 2463534242ull;
  for (int i = 0; i < 40; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    series.push_back(i % 9 == 0 ? 0 : static_cast<int64_t>(x % 100000));
  }
  for (size_t limit : {size_t{8}, size_t{20}, size_t{40}, size_t{64}}) {
    DurationSketch whole(limit);
    for (int64_t v : series) {
      whole.Add(v);
    }
    for (size_t split = 0; split <= series.size(); ++split) {
      DurationSketch a(limit), b(limit);
      for (size_t i = 0; i < series.size(); ++i) {
        (i < split ? a : b).Add(series[i]);
      }
      PartWriter w;
      b.Encode(w);
      const std::string bytes = w.Take();
      DurationSketch carried;
      PartReader r(bytes);
      ASSERT_TRUE(carried.Decode(r) && r.done());
      a.Merge(carried);
      EXPECT_EQ(a.count(), whole.count());
      EXPECT_EQ(a.exact(), whole.exact()) << "limit " << limit << " split " << split;
      for (double q : {0.0, 0.01, 0.25, 0.5, 0.75, 0.99, 1.0}) {
        EXPECT_EQ(a.Quantile(q), whole.Quantile(q)) << "limit " << limit << " split " << split << " q " << q;
      }
    }
  }
  // Short or oversized bytes are refused, never read past their end.
  DurationSketch s(4);
  s.Add(7);
  PartWriter w;
  s.Encode(w);
  const std::string bytes = w.Take();
  for (size_t n = 0; n < bytes.size(); ++n) {
    DurationSketch got;
    PartReader r(std::string_view(bytes).substr(0, n));
    EXPECT_FALSE(got.Decode(r) && r.done()) << n << " of " << bytes.size() << " bytes";
  }
}

// Blocks of the golden file's ranks accumulated apart, carried as bytes and merged in rank order
// give exactly what one pass over every rank gives, for every way of cutting the ranks in two or
// three and every split of the rows (`mpirun -np K commprof stats`).
TEST_F(OpStatsGolden, BlocksOfRanksMergedInOrderEqualOnePassOverAll) {
  auto same = [](const OpStats& x, const OpStats& y, const std::string& what) {
    ASSERT_EQ(x.rows.size(), y.rows.size()) << what;
    for (size_t i = 0; i < x.rows.size(); ++i) {
      const OpStatsRow& a = x.rows[i];
      const OpStatsRow& b = y.rows[i];
      EXPECT_TRUE(a.category == b.category && a.name == b.name && a.comm == b.comm && a.size_bucket == b.size_bucket &&
                  a.rank == b.rank && a.calls == b.calls && a.total_ns == b.total_ns && a.self_ns == b.self_ns &&
                  a.min_ns == b.min_ns && a.max_ns == b.max_ns && a.mean_ns == b.mean_ns && a.p50_ns == b.p50_ns &&
                  a.p99_ns == b.p99_ns && a.percentiles_exact == b.percentiles_exact && a.bytes == b.bytes &&
                  a.bandwidth_gbps == b.bandwidth_gbps && a.imbalance == b.imbalance && a.max_rank == b.max_rank &&
                  a.per_rank.size() == b.per_rank.size())
          << what << ": row " << i << " (" << a.name << ")";
      for (size_t k = 0; k < a.per_rank.size() && k < b.per_rank.size(); ++k) {
        EXPECT_TRUE(a.per_rank[k].rank == b.per_rank[k].rank && a.per_rank[k].calls == b.per_rank[k].calls &&
                    a.per_rank[k].total_ns == b.per_rank[k].total_ns &&
                    a.per_rank[k].self_ns == b.per_rank[k].self_ns && a.per_rank[k].bytes == b.per_rank[k].bytes)
            << what << ": row " << i << " rank share " << k;
      }
    }
    ASSERT_EQ(x.size_histograms.size(), y.size_histograms.size()) << what;
    for (size_t i = 0; i < x.size_histograms.size(); ++i) {
      EXPECT_EQ(x.size_histograms[i].name, y.size_histograms[i].name) << what;
      EXPECT_EQ(x.size_histograms[i].buckets, y.size_histograms[i].buckets) << what;
    }
    EXPECT_EQ(x.ranks, y.ranks) << what;
    EXPECT_EQ(x.events_read, y.events_read) << what;
    EXPECT_EQ(x.events_counted, y.events_counted) << what;
    EXPECT_EQ(x.incomplete_skipped, y.incomplete_skipped) << what;
  };
  for (int splits : {0, 1, 2, 3}) {  // no split, by comm, by size and rank, all three
    for (size_t exact : {size_t{8}, DurationSketch::kDefaultExactLimit}) {
      StatsOptions o;
      o.by_comm = splits == 1 || splits == 3;
      o.by_size = splits >= 2;
      o.by_rank = splits >= 2;
      o.exact_samples = exact;
      const OpStats whole = Compute(o);
      ASSERT_FALSE(whole.rows.empty());
      const std::vector<uint32_t> ranks = StatsRanks(*reader_, o);
      ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
      for (size_t cut1 = 0; cut1 <= ranks.size(); ++cut1) {
        for (size_t cut2 = cut1; cut2 <= ranks.size(); ++cut2) {
          std::span<const uint32_t> all(ranks);
          OpStatsPartial merged;
          merged.exact_samples = exact;
          for (auto block : {all.subspan(0, cut1), all.subspan(cut1, cut2 - cut1), all.subspan(cut2)}) {
            auto part = AccumulateOpStats(*reader_, o, block);
            ASSERT_TRUE(part.ok()) << part.status().message();
            auto carried = DecodeOpStatsPart(EncodeOpStatsPart(part));
            ASSERT_TRUE(carried.ok()) << carried.status().message();
            merged.Merge(std::move(carried.value()));
          }
          same(whole, FinishOpStats(*reader_, o, std::move(merged)),
               "splits " + std::to_string(splits) + ", exact " + std::to_string(exact) + ", blocks cut at " +
                   std::to_string(cut1) + " and " + std::to_string(cut2));
        }
      }
    }
  }
}

TEST_F(OpStatsGolden, ABlocksErrorCrossesAsItselfAndBadBytesAreRefused) {
  auto failed = DecodeOpStatsPart(EncodeOpStatsPart(Result<OpStatsPartial>(Corrupt("f.h5: rank 2: bad chunk"))));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(failed.status().message(), "f.h5: rank 2: bad chunk");
  const std::vector<uint32_t> ranks = StatsRanks(*reader_, {});
  const std::string bytes = EncodeOpStatsPart(AccumulateOpStats(*reader_, {}, ranks));
  for (size_t n : {size_t{0}, size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    auto got = DecodeOpStatsPart(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(got.ok()) << n;
    EXPECT_NE(got.status().message().find("malformed"), std::string::npos) << got.status().message();
  }
  EXPECT_FALSE(DecodeOpStatsPart(bytes + "x").ok());
}

}  // namespace
}  // namespace commprof
