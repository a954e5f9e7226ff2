// Clock-condition violations (analysis/match/clock_violations.h) on small files written with the
// real Hdf5Writer: hand-made blocking collectives with hand-computed expected counts for every
// dependency rule, plus clock models (SetClock with points) that turn violating raw times into
// consistent aligned ones. Also the clock tables' round trip through the file.
#include "analysis/match/clock_violations.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "analysis/load/profile_reader.h"
#include "support/test_support.h"

namespace commprof {
namespace {

namespace fs = std::filesystem;

using test_support::RankData;
using test_support::TempDir;
using test_support::events::CollectiveFields;
using test_support::events::CommCreated;

// A collective that moves 8 bytes unless the test gives its size (a barrier moves none): calls of
// count 0 are never checked (ZeroByteCollectivesAreNotCheckedButZeroByteBarriersAre).
commprof_event Collective(uint8_t op, uint64_t seq, uint64_t start, uint64_t end, CollectiveFields f = {}) {
  if (f.bytes == 0 && op != COMMPROF_OP_BARRIER) {
    f.bytes = 8;
  }
  return test_support::events::Collective(op, seq, start, end, f);
}
// One of count 0.
commprof_event ZeroByte(uint8_t op, uint64_t seq, uint64_t start, uint64_t end, int32_t root) {
  return test_support::events::Collective(op, seq, start, end, {.root = root});
}

struct Counts {
  uint64_t checked_aligned, violations_aligned, checked_raw, violations_raw;
};

Counts Count(const ProfileReader& r) {
  auto a = CountClockViolations(r, true);
  auto raw = CountClockViolations(r, false);
  EXPECT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(raw.ok()) << raw.status().message();
  if (!a.ok() || !raw.ok()) return {};
  return {a->instances_checked, a->violations, raw->instances_checked, raw->violations};
}

class ClockViolationsTest : public ::testing::Test {
 protected:
  // Counts on a file of `ranks` without clock models: aligned and raw must agree.
  ClockViolations CountUnaligned(const std::vector<RankData>& ranks) {
    auto r = test_support::WriteProfile(dir_ / ("f" + std::to_string(n_++) + ".h5"), ranks);
    if (r == nullptr) return {};
    Counts c = Count(*r);
    EXPECT_EQ(c.checked_aligned, c.checked_raw);
    EXPECT_EQ(c.violations_aligned, c.violations_raw) << "without clock models alignment changes nothing";
    return {c.checked_raw, c.violations_raw};
  }
  TempDir dir_{"commprof-cv"};
  int n_ = 0;
};

// ---- the dependency rules, one operation at a time (no clock models: raw = aligned) ----

TEST_F(ClockViolationsTest, AllreduceViolatesWhenAnyRankEndsBeforeTheLastStart) {
  // seq 0: last start 300, every end 400: fine
  // seq 1: last start 1200, rank 0 ends at 1150: violation
  // seq 2: rank 0 ends exactly at the last start 2200: not a violation (strictly before only)
  // seq 3: two ranks end early: still one violating instance
  std::vector<RankData> r(3);
  r[0].events = {Collective(COMMPROF_OP_ALLREDUCE, 0, 100, 400), Collective(COMMPROF_OP_ALLREDUCE, 1, 1000, 1150),
                 Collective(COMMPROF_OP_ALLREDUCE, 2, 2000, 2200), Collective(COMMPROF_OP_ALLREDUCE, 3, 3000, 3050)};
  r[1].events = {Collective(COMMPROF_OP_ALLREDUCE, 0, 200, 400), Collective(COMMPROF_OP_ALLREDUCE, 1, 1100, 1300),
                 Collective(COMMPROF_OP_ALLREDUCE, 2, 2100, 2300), Collective(COMMPROF_OP_ALLREDUCE, 3, 3010, 3060)};
  r[2].events = {Collective(COMMPROF_OP_ALLREDUCE, 0, 300, 400), Collective(COMMPROF_OP_ALLREDUCE, 1, 1200, 1300),
                 Collective(COMMPROF_OP_ALLREDUCE, 2, 2200, 2300), Collective(COMMPROF_OP_ALLREDUCE, 3, 3100, 3200)};
  ClockViolations v = CountUnaligned(r);
  EXPECT_EQ(v.instances_checked, 4u);
  EXPECT_EQ(v.violations, 2u);
}

TEST_F(ClockViolationsTest, BarrierAllgatherAlltoallAndReduceScatterFollowTheAllreduceRule) {
  const uint8_t ops[] = {
      COMMPROF_OP_BARRIER,   COMMPROF_OP_ALLGATHER,      COMMPROF_OP_ALLGATHERV,          COMMPROF_OP_ALLTOALL,
      COMMPROF_OP_ALLTOALLV, COMMPROF_OP_REDUCE_SCATTER, COMMPROF_OP_REDUCE_SCATTER_BLOCK};
  for (uint8_t op : ops) {
    SCOPED_TRACE(static_cast<int>(op));
    // seq 0 fine; seq 1: rank 1 ends (550) before rank 0 starts (600)
    std::vector<RankData> r(2);
    r[0].events = {Collective(op, 0, 100, 300), Collective(op, 1, 600, 700)};
    r[1].events = {Collective(op, 0, 200, 300), Collective(op, 1, 500, 550)};
    ClockViolations v = CountUnaligned(r);
    EXPECT_EQ(v.instances_checked, 2u);
    EXPECT_EQ(v.violations, 1u);
  }
}

TEST_F(ClockViolationsTest, ZeroByteCollectivesAreNotCheckedButZeroByteBarriersAre) {
  // Rank 1 leaves every call (550) before rank 0 enters it (600). With count 0 on every rank
  // (Open MPI returns at once) that is no violation and the instance is not checked; one rank with
  // data, or a barrier (0 bytes by definition, but it synchronises), or an Alltoallv (Open MPI
  // still exchanges empty messages with every peer) is checked as usual.
  const uint8_t ops[] = {COMMPROF_OP_ALLREDUCE, COMMPROF_OP_BCAST, COMMPROF_OP_REDUCE, COMMPROF_OP_ALLGATHERV,
                         COMMPROF_OP_SCAN};
  for (uint8_t op : ops) {
    SCOPED_TRACE(static_cast<int>(op));
    // Bcast from rank 0: rank 1 ends before the root starts; Reduce to rank 1: the root ends
    // before rank 0 starts.
    const int32_t root = op == COMMPROF_OP_REDUCE ? 1 : 0;
    std::vector<RankData> r(2);
    r[0].events = {ZeroByte(op, 0, 600, 700, root), Collective(op, 1, 1600, 1700, {.root = root})};
    r[1].events = {ZeroByte(op, 0, 500, 550, root), Collective(op, 1, 1500, 1550, {.root = root})};
    ClockViolations v = CountUnaligned(r);
    EXPECT_EQ(v.instances_checked, 1u) << "only the call with data";
    EXPECT_EQ(v.violations, 1u);
    // data on one rank only (an Allgatherv where rank 1 contributes nothing) is still a real exchange
    r[0].events[0].bytes = 4;
    v = CountUnaligned(r);
    EXPECT_EQ(v.instances_checked, 2u);
  }
  for (uint8_t op : {COMMPROF_OP_BARRIER, COMMPROF_OP_ALLTOALLV}) {
    SCOPED_TRACE(static_cast<int>(op));
    std::vector<RankData> b(2);
    b[0].events = {ZeroByte(op, 0, 600, 700, -1)};
    b[1].events = {ZeroByte(op, 0, 500, 550, -1)};
    ClockViolations v = CountUnaligned(b);
    EXPECT_EQ(v.instances_checked, 1u);
    EXPECT_EQ(v.violations, 1u);
  }
}

TEST_F(ClockViolationsTest, BcastViolatesOnlyWhenANonRootEndsBeforeTheRootStarts) {
  // root is rank 1 (peer = 1 on every rank)
  // seq 0: rank 0 ends at 4990, root starts at 5000: violation
  // seq 1: non-roots end after the root's start: fine
  // seq 2: rank 2 ends (7005) before rank 0 starts (7500) and the root ends (7010) before that
  //        too: a violation under the all-wait rule, but a bcast only waits for its root: fine
  // seq 3: the root's record is missing (rank 1 has no seq 3): nothing to compare with: fine,
  //        though the instance is checked (two ranks saw it)
  std::vector<RankData> r(3);
  r[0].events = {Collective(COMMPROF_OP_BCAST, 0, 4900, 4990, {.root = 1}),
                 Collective(COMMPROF_OP_BCAST, 1, 5500, 6001, {.root = 1}),
                 Collective(COMMPROF_OP_BCAST, 2, 7500, 7600, {.root = 1}),
                 Collective(COMMPROF_OP_BCAST, 3, 9000, 9001, {.root = 1})};
  r[1].events = {Collective(COMMPROF_OP_BCAST, 0, 5000, 5010, {.root = 1}),
                 Collective(COMMPROF_OP_BCAST, 1, 6000, 6005, {.root = 1}),
                 Collective(COMMPROF_OP_BCAST, 2, 7000, 7010, {.root = 1})};
  r[2].events = {Collective(COMMPROF_OP_BCAST, 0, 4000, 5020, {.root = 1}),
                 Collective(COMMPROF_OP_BCAST, 1, 5800, 6050, {.root = 1}),
                 Collective(COMMPROF_OP_BCAST, 2, 6900, 7005, {.root = 1}),
                 Collective(COMMPROF_OP_BCAST, 3, 9500, 9501, {.root = 1})};
  ClockViolations v = CountUnaligned(r);
  EXPECT_EQ(v.instances_checked, 4u);
  EXPECT_EQ(v.violations, 1u);
}

TEST_F(ClockViolationsTest, ScatterAndScattervFollowTheBcastRule) {
  for (uint8_t op : {uint8_t{COMMPROF_OP_SCATTER}, uint8_t{COMMPROF_OP_SCATTERV}}) {
    SCOPED_TRACE(static_cast<int>(op));
    // root 0. seq 0: rank 1 ends (90) before the root starts (100): violation.
    // seq 1: the root ends (210) before rank 1 starts (300): fine for a scatter.
    std::vector<RankData> r(2);
    r[0].events = {Collective(op, 0, 100, 150, {.root = 0}), Collective(op, 1, 200, 210, {.root = 0})};
    r[1].events = {Collective(op, 0, 50, 90, {.root = 0}), Collective(op, 1, 300, 310, {.root = 0})};
    ClockViolations v = CountUnaligned(r);
    EXPECT_EQ(v.instances_checked, 2u);
    EXPECT_EQ(v.violations, 1u);
  }
}

TEST_F(ClockViolationsTest, ReduceViolatesOnlyWhenTheRootEndsBeforeTheLastStart) {
  // root 0.
  // seq 0: the root ends at 150, rank 1 starts at 200: violation
  // seq 1: the last start is rank 1's (500); rank 2 ends at 460, before it, which the all-wait
  //        rule would flag, but only the root waits and it ends at 600: fine
  // seq 2: the root ends exactly at the last start: fine
  std::vector<RankData> r(3);
  r[0].events = {Collective(COMMPROF_OP_REDUCE, 0, 100, 150, {.root = 0}),
                 Collective(COMMPROF_OP_REDUCE, 1, 400, 600, {.root = 0}),
                 Collective(COMMPROF_OP_REDUCE, 2, 700, 900, {.root = 0})};
  r[1].events = {Collective(COMMPROF_OP_REDUCE, 0, 200, 300, {.root = 0}),
                 Collective(COMMPROF_OP_REDUCE, 1, 500, 510, {.root = 0}),
                 Collective(COMMPROF_OP_REDUCE, 2, 900, 905, {.root = 0})};
  r[2].events = {Collective(COMMPROF_OP_REDUCE, 0, 120, 130, {.root = 0}),
                 Collective(COMMPROF_OP_REDUCE, 1, 450, 460, {.root = 0}),
                 Collective(COMMPROF_OP_REDUCE, 2, 800, 801, {.root = 0})};
  ClockViolations v = CountUnaligned(r);
  EXPECT_EQ(v.instances_checked, 3u);
  EXPECT_EQ(v.violations, 1u);
}

TEST_F(ClockViolationsTest, GatherAndGathervFollowTheReduceRule) {
  for (uint8_t op : {uint8_t{COMMPROF_OP_GATHER}, uint8_t{COMMPROF_OP_GATHERV}}) {
    SCOPED_TRACE(static_cast<int>(op));
    // root 1. seq 0: the root ends (150) before rank 0 starts (200): violation.
    // seq 1: rank 0 ends (320) before the root starts (400): fine for a gather.
    std::vector<RankData> r(2);
    r[0].events = {Collective(op, 0, 200, 250, {.root = 1}), Collective(op, 1, 300, 320, {.root = 1})};
    r[1].events = {Collective(op, 0, 100, 150, {.root = 1}), Collective(op, 1, 400, 450, {.root = 1})};
    ClockViolations v = CountUnaligned(r);
    EXPECT_EQ(v.instances_checked, 2u);
    EXPECT_EQ(v.violations, 1u);
  }
}

TEST_F(ClockViolationsTest, ScanAndExscanRanksWaitOnlyForTheRanksBelowThem) {
  // Scan: rank i waits for ranks 0 ... i; Exscan: for ranks 0 ... i-1 (rank 0 for nobody). Before,
  // Exscan fell under the all-wait default and counted seq 0 below as a violation.
  // seq 0: starts 100, 200, 300; rank 0 ends 150, rank 1 250, rank 2 350: fine, though rank 0
  //        ends before rank 2 starts (all-wait would flag it)
  // seq 1: starts 1000, 1200, 1100; rank 2 ends at 1150 < rank 1's start 1200: violation
  // seq 2: rank 1 ends (2050) before rank 2 starts (2100), which it need not wait for: fine
  for (const uint8_t op : {COMMPROF_OP_SCAN, COMMPROF_OP_EXSCAN}) {
    SCOPED_TRACE(static_cast<int>(op));
    std::vector<RankData> r(3);
    r[0].events = {Collective(op, 0, 100, 150), Collective(op, 1, 1000, 1050), Collective(op, 2, 2000, 2010)};
    r[1].events = {Collective(op, 0, 200, 250), Collective(op, 1, 1200, 1300), Collective(op, 2, 2001, 2050)};
    r[2].events = {Collective(op, 0, 300, 350), Collective(op, 1, 1100, 1150), Collective(op, 2, 2100, 2200)};
    ClockViolations v = CountUnaligned(r);
    EXPECT_EQ(v.instances_checked, 3u);
    EXPECT_EQ(v.violations, 1u);
    // rank 1 ending (90) before rank 0 starts (100) is one for both
    std::vector<RankData> late(2);
    late[0].events = {Collective(op, 0, 100, 150)};
    late[1].events = {Collective(op, 0, 50, 90)};
    EXPECT_EQ(CountUnaligned(late).violations, 1u);
  }
}

TEST_F(ClockViolationsTest, NonBlockingIncompleteUntrackedAndNonCollectiveEventsAreIgnored) {
  // Every ignored event below would violate if it were counted.
  const uint16_t nb = COMMPROF_FLAG_NONBLOCKING, inc = COMMPROF_FLAG_INCOMPLETE, un = COMMPROF_FLAG_UNTRACKED_COMM;
  std::vector<RankData> r(3);
  // seq 0: rank 0 non-blocking, ends at 10; ranks 1 and 2 fine -> checked, no violation
  // seq 1: rank 0 incomplete (issue time as its end) -> checked (ranks 1, 2), no violation
  // seq 2: ranks 0 and 1 non-blocking -> only rank 2 left -> not checked
  // seq 3: rank 0's event is on an untracked communicator -> checked (1, 2), no violation
  // seq 4: a point-to-point event with comm 1 / seq 4 on rank 0 -> ignored; 1, 2 fine
  // seq 5: only rank 2 took part -> not checked
  r[0].events = {Collective(COMMPROF_OP_ALLREDUCE, 0, 5, 10, {.flags = nb}),
                 Collective(COMMPROF_OP_ALLREDUCE, 1, 15, 15, {.flags = nb | inc}),
                 Collective(COMMPROF_OP_ALLREDUCE, 2, 20, 21, {.flags = nb}),
                 Collective(COMMPROF_OP_ALLREDUCE, 3, 30, 31, {.flags = un})};
  commprof_event p2p = Collective(COMMPROF_OP_SEND, 4, 40, 41);
  p2p.kind = COMMPROF_KIND_MPI_P2P;
  r[0].events.push_back(p2p);
  commprof_event blocking_incomplete = Collective(COMMPROF_OP_ALLREDUCE, 1, 15, 16);
  blocking_incomplete.flags = inc;
  r[1].events = {Collective(COMMPROF_OP_ALLREDUCE, 0, 100, 300), Collective(COMMPROF_OP_ALLREDUCE, 1, 400, 600),
                 Collective(COMMPROF_OP_ALLREDUCE, 2, 700, 701, {.flags = nb}),
                 Collective(COMMPROF_OP_ALLREDUCE, 3, 1000, 1200), Collective(COMMPROF_OP_ALLREDUCE, 4, 1300, 1500)};
  r[2].events = {Collective(COMMPROF_OP_ALLREDUCE, 0, 200, 300),   Collective(COMMPROF_OP_ALLREDUCE, 1, 500, 600),
                 Collective(COMMPROF_OP_ALLREDUCE, 2, 800, 900),   Collective(COMMPROF_OP_ALLREDUCE, 3, 1100, 1200),
                 Collective(COMMPROF_OP_ALLREDUCE, 4, 1400, 1500), Collective(COMMPROF_OP_ALLREDUCE, 5, 1, 2)};
  ClockViolations v = CountUnaligned(r);
  EXPECT_EQ(v.instances_checked, 4u);
  EXPECT_EQ(v.violations, 0u);
  // an INCOMPLETE flag alone (without NONBLOCKING) is ignored too
  r[0].events = {blocking_incomplete};
  r[1].events = {Collective(COMMPROF_OP_ALLREDUCE, 1, 400, 600)};
  r[2].events = {Collective(COMMPROF_OP_ALLREDUCE, 1, 500, 600)};
  v = CountUnaligned(r);
  EXPECT_EQ(v.instances_checked, 1u);
  EXPECT_EQ(v.violations, 0u);
}

TEST_F(ClockViolationsTest, RootsOfSubCommunicatorCollectivesAreRanksInThatCommunicator) {
  // Communicator X = {world 2 (rank 0 in X), world 1 (rank 1 in X)}; world 0 is not a member.
  // Bcast on X with root 0 = world rank 2. World rank 1 ends (450) before world rank 2 starts
  // (500): a violation. (Taking the root as world rank 0, which has no record, would find none.)
  const uint64_t x = (uint64_t{3} << 32) | 1;
  std::vector<RankData> r(3);
  r[0].events = {};
  r[1].events = {CommCreated(x, 1, 2), Collective(COMMPROF_OP_BCAST, 0, 400, 450, {.root = 0, .comm = x})};
  r[2].events = {CommCreated(x, 0, 2), Collective(COMMPROF_OP_BCAST, 0, 500, 510, {.root = 0, .comm = x})};
  ClockViolations v = CountUnaligned(r);
  EXPECT_EQ(v.instances_checked, 1u);
  EXPECT_EQ(v.violations, 1u);
  // same comm id and seq on MPI_COMM_WORLD is a different instance: it is fine on its own
  r[0].events = {Collective(COMMPROF_OP_BCAST, 0, 100, 200, {.root = 0})};
  r[1].events.push_back(Collective(COMMPROF_OP_BCAST, 0, 150, 200, {.root = 0}));
  v = CountUnaligned(r);
  EXPECT_EQ(v.instances_checked, 2u);
  EXPECT_EQ(v.violations, 1u);
}

// ---- alignment ----

// Three ranks run 10 allreduces. In reference time (rank 0's clock) instance k starts on rank 0
// at T_k = 200 ms + k x 50 ms, on rank 1 at T_k + 10 us, on rank 2 at T_k + 20 us; all end at
// T_k + 30, 31, 32 us. So every rank ends at least 10 us after the last start.
// Rank 1's clock is 5 ms behind: local = ref - 5 ms, model offset +5 ms (constant).
// Rank 2's clock drifts: offset(L) = -3 ms + 100 ppm x L, from two epoch points (L = 0 and 1 s).
// Its local time for reference time t solves L + offset(L) = t: L = (t + 3 ms) / 1.0001; the test
// takes L = (t + 3 ms) x 10000 / 10001 rounded down, which lands within 1 ns of t.
struct AlignedJob {
  static constexpr int kInstances = 10;
  static uint64_t T(int k) { return 200'000'000ull + static_cast<uint64_t>(k) * 50'000'000ull; }
  static uint64_t Rank2Local(uint64_t ref) { return (ref + 3'000'000ull) * 10000ull / 10001ull; }

  static std::vector<RankData> Make(bool rank2_drift_in_model) {
    std::vector<RankData> r(3);
    for (int k = 0; k < kInstances; ++k) {
      uint64_t t = T(k);
      r[0].events.push_back(Collective(COMMPROF_OP_ALLREDUCE, static_cast<uint64_t>(k), t, t + 30'000));
      r[1].events.push_back(
          Collective(COMMPROF_OP_ALLREDUCE, static_cast<uint64_t>(k), t + 10'000 - 5'000'000, t + 31'000 - 5'000'000));
      r[2].events.push_back(
          Collective(COMMPROF_OP_ALLREDUCE, static_cast<uint64_t>(k), Rank2Local(t + 20'000), Rank2Local(t + 32'000)));
    }
    r[0].points = {{1'000'000, 0, 0}, {900'000'000, 0, 0}};
    r[1].points = {{1'000'000, 5'000'000, 800}, {900'000'000, 5'000'000, 900}};
    if (rank2_drift_in_model) {
      r[2].points = {{0, -3'000'000, 500}, {1'000'000'000, -2'900'000, 700}};
    } else {
      r[2].points = {{0, -3'000'000, 500}};  // the offset of the first epoch only
    }
    return r;
  }
};

TEST_F(ClockViolationsTest, AlignedTimesRemoveTheViolationsThatRawClocksShow) {
  // The hand-computed inverse really is within 1 ns: L + offset(L) for the model's own line.
  for (int k = 0; k < AlignedJob::kInstances; ++k) {
    uint64_t t = AlignedJob::T(k) + 20'000;
    int64_t l = static_cast<int64_t>(AlignedJob::Rank2Local(t));
    int64_t back = l - 3'000'000 + (l + 5'000) / 10'000;  // 100 ppm of l, rounded to nearest
    EXPECT_LE(std::llabs(back - static_cast<int64_t>(t)), 1) << k;
  }
  auto r = test_support::WriteProfile(dir_ / "aligned.h5", AlignedJob::Make(true));
  ASSERT_NE(r, nullptr);
  // the models came back from the file
  ASSERT_EQ(r->info().ranks.size(), 3u);
  EXPECT_EQ(r->info().ranks[2].clock_points.size(), 2u);
  EXPECT_EQ(r->info().ranks[2].clock_model().Offset(500'000'000), -2'950'000);
  Counts c = Count(*r);
  EXPECT_EQ(c.checked_aligned, 10u);
  EXPECT_EQ(c.checked_raw, 10u);
  // raw: rank 1 ends ~5 ms "before" everyone else starts in every instance
  EXPECT_EQ(c.violations_raw, 10u);
  EXPECT_EQ(c.violations_aligned, 0u);
}

TEST_F(ClockViolationsTest, AConstantOffsetAloneLeavesTheDriftToShowAsViolations) {
  // With only rank 2's first point its model is offset -3 ms everywhere, missing 100 ppm x L:
  // its aligned times come out early by L x 1e-4 = (T_k + 3 ms) x 1e-4 / 1.0001, i.e. 20.3 us at
  // k = 0 growing by 5 us per instance. Its end (true T_k + 32 us) then lands before rank 1's
  // start (T_k + 10 us) once the shift exceeds 22 us: for k = 1..9 (25.3 us, ...), not for k = 0.
  auto r = test_support::WriteProfile(dir_ / "constant.h5", AlignedJob::Make(false));
  ASSERT_NE(r, nullptr);
  Counts c = Count(*r);
  EXPECT_EQ(c.checked_aligned, 10u);
  EXPECT_EQ(c.violations_aligned, 9u);
  EXPECT_EQ(c.violations_raw, 10u);
}

// ---- the clock tables in the file ----

TEST_F(ClockViolationsTest, EachClockUpdateReplacesThePointsAndAppendsItsNewSamples) {
  std::string path = dir_ / "replace.h5";
  {
    JobMeta meta;
    meta.world_size = 1;
    auto w = Hdf5Writer::Create(path, meta, WriterOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    RankDescription h;
    h.world_size = 1;
    h.host = "h";
    ASSERT_TRUE(w.value()->OpenRank(h).ok());
    RankClock c;
    c.method = "tcp-pingpong";
    c.points = {{10, 1, 2}, {20, 3, 4}, {30, 5, 6}};
    c.samples = {{1, 2, 3}, {4, 5, 6}};
    ASSERT_TRUE(w.value()->SetClock(0, c).ok());
    c.points = {{100, -7, 8}, {200, -9, 10}};
    c.samples = {{7, 8, 9}};
    c.offset_ns = -7;
    c.error_bound_ns = 10;
    ASSERT_TRUE(w.value()->SetClock(0, c).ok());
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const RankInfo& k = r.value()->info().ranks.at(0);
  ASSERT_EQ(k.clock_points.size(), 2u) << "the second update replaced the 3-row table";
  EXPECT_EQ(k.clock_points[0].local_ns, 100);
  EXPECT_EQ(k.clock_points[0].offset_ns, -7);
  EXPECT_EQ(k.clock_points[0].half_rtt_ns, 8);
  EXPECT_EQ(k.clock_points[1].local_ns, 200);
  EXPECT_EQ(k.clock_points[1].offset_ns, -9);
  EXPECT_EQ(k.clock_points[1].half_rtt_ns, 10);
  EXPECT_EQ(k.clock_offset_ns, -7);
  EXPECT_EQ(k.clock_error_bound_ns, 10);
  EXPECT_EQ(k.clock_method, "tcp-pingpong");
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_TRUE(f.valid());
  h5::Handle d(H5Dopen2(f.get(), "/ranks/0/clock_samples", H5P_DEFAULT));
  ASSERT_TRUE(d.valid());
  h5::Handle space(H5Dget_space(d.get()));
  hsize_t dims[2] = {0, 0};
  ASSERT_EQ(H5Sget_simple_extent_ndims(space.get()), 2);
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  EXPECT_EQ(dims[0], 3u) << "clock frames carry only their new samples: the table grows";
  EXPECT_EQ(dims[1], 3u);
  uint64_t v[9] = {};
  ASSERT_GE(H5Dread(d.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), 0);
  EXPECT_EQ(std::vector<uint64_t>(v, v + 9), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST_F(ClockViolationsTest, AClockUpdateWithoutPointsRemovesTheModelAndKeepsTheSamples) {
  std::string path = dir_ / "none.h5";
  {
    JobMeta meta;
    meta.world_size = 1;
    auto w = Hdf5Writer::Create(path, meta, WriterOptions{});
    ASSERT_TRUE(w.ok());
    RankDescription h;
    h.world_size = 1;
    ASSERT_TRUE(w.value()->OpenRank(h).ok());
    RankClock c;
    c.points = {{10, 1, 2}};
    c.samples = {{1, 2, 3}};
    ASSERT_TRUE(w.value()->SetClock(0, c).ok());
    ASSERT_TRUE(w.value()->SetClock(0, RankClock{}).ok());
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const RankInfo& k = r.value()->info().ranks.at(0);
  EXPECT_TRUE(k.clock_points.empty());
  EXPECT_EQ(k.clock_model().ToReference(12345), 12345);
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_GT(H5Lexists(f.get(), "/ranks/0/clock_samples", H5P_DEFAULT), 0) << "samples taken are history";
  EXPECT_EQ(H5Lexists(f.get(), "/ranks/0/clock_points", H5P_DEFAULT), 0);
}

}  // namespace
}  // namespace commprof
