// Clock alignment math (core/clock_model.h): every expected value below is computed by hand from
// the stated true offset and delays, not taken from the code under test.
#include "core/clock_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace commprof {
namespace {

// One ping-pong against a reference whose clock reads local + `offset` (constant over the sample):
// the rank sends at local `send`, the ping takes `out` ns, the pong `in` ns (both in local ns).
ClockSample Sample(int64_t send, int64_t offset, int64_t out, int64_t in) {
  ClockSample s;
  s.local_send_ns = static_cast<uint64_t>(send);
  s.reference_ns = static_cast<uint64_t>(send + out + offset);
  s.local_recv_ns = static_cast<uint64_t>(send + out + in);
  return s;
}

void ExpectPoint(const ClockPoint& p, int64_t local, int64_t offset, int64_t half) {
  EXPECT_EQ(p.local_ns, local);
  EXPECT_EQ(p.offset_ns, offset);
  EXPECT_EQ(p.half_rtt_ns, half);
}

// ---- EstimateEpoch ----

TEST(EstimateEpoch, SymmetricDelaysGiveTheExactOffsetAtTheMidpoint) {
  // true offset 1000; 50 ns each way: reference read at local 10050, i.e. reference 11050
  std::vector<ClockSample> one = {Sample(10000, 1000, 50, 50)};
  EXPECT_EQ(one[0].reference_ns, 11050u);
  EXPECT_EQ(one[0].local_recv_ns, 10100u);
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(one, p));
  // half: 50, plus the drift allowance of 50 ns (the reference read within 50 ns of the
  // midpoint: 100 ppm of it, rounded up, 1 ns). Every half below carries that 1 ns.
  ExpectPoint(p, 10050, 1000, 51);
}

TEST(EstimateEpoch, AmongSymmetricSamplesTheMinimumRoundTripOneIsKept) {
  // Symmetric intervals [1000 - d, 1000 + d] all nest inside one another: the intersection is the
  // minimum-RTT sample's own interval, so nothing narrows.
  std::vector<ClockSample> s = {Sample(0, 1000, 30, 30), Sample(1000, 1000, 20, 20), Sample(2000, 1000, 80, 80)};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 1020, 1000, 21);
}

TEST(EstimateEpoch, AsymmetricDelaysGiveAnOffsetWithinHalfTheRoundTripOfTheTruth) {
  // true offset 1000, 90 ns out and 10 ns back: rtt 100, midpoint local 10050, reference read
  // 10000 + 90 + 1000 = 11090, so the estimate is 11090 - 10050 = 1040 (40 from the truth, <= 50).
  std::vector<ClockSample> s = {Sample(10000, 1000, 90, 10)};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 10050, 1040, 51);
  EXPECT_LE(std::llabs(p.offset_ns - 1000), p.half_rtt_ns);
  // the mirror image errs the other way by the same amount
  std::vector<ClockSample> m = {Sample(10000, 1000, 10, 90)};
  ASSERT_TRUE(EstimateEpoch(m, p));
  ExpectPoint(p, 10050, 960, 51);
}

TEST(EstimateEpoch, AnOddRoundTripRoundsTheHalfUpSoTheBoundStillHolds) {
  // rtt 101: midpoint send + 50, half (101 + 1) / 2 = 51, plus 1 ns of drift allowance: 52.
  // Truth -700, 101 ns out, 0 back: reference read at local 10101 -> 9401. The sample's own
  // interval [9401 - 10101, 9401 - 10000] = [-700, -599], widened by the 1 ns to [-701, -598], is
  // 103 wide, narrower than 2 x 52, so the intersection rule takes over even for one sample:
  // offset -701 + 103 / 2 = -650 (not the midpoint estimate 9401 - 10050 = -649), half
  // (103 + 1) / 2 = 52; 50 from the truth.
  std::vector<ClockSample> s = {Sample(10000, -700, 101, 0)};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 10050, -650, 52);
  EXPECT_LE(std::llabs(p.offset_ns - (-700)), p.half_rtt_ns);
}

TEST(EstimateEpoch, AnOutlierWithAHugeRoundTripChangesNothing) {
  std::vector<ClockSample> s = {Sample(0, 1000, 30, 30), Sample(1000, 1000, 20, 20), Sample(2000, 1000, 80, 80)};
  ClockPoint base;
  ASSERT_TRUE(EstimateEpoch(s, base));
  // 999 us out, 1 us back: interval [0, 1000000], which contains the truth and narrows nothing
  s.insert(s.begin() + 1, Sample(5000, 1000, 999000, 1000));
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, base.local_ns, base.offset_ns, base.half_rtt_ns);
  ExpectPoint(p, 1020, 1000, 21);
}

TEST(EstimateEpoch, IntersectingIntervalsNarrowTheMinimumRoundTripSample) {
  // truth 1000. A: 10 out, 40 back (rtt 50) -> [960, 1010]; B: 45 out, 15 back (rtt 60) -> [985, 1045].
  // A alone: local 25, offset 1010 - 25 = 985, half 25 + 1. Each interval widened by 1 ns of drift
  // allowance (A: its half round trip; B: 1005 ns from A's midpoint plus its half, 1035 ns):
  // [959, 1011] and [984, 1046]. Intersection [984, 1011] (width 27 < 52): offset 984 + 27/2 = 997,
  // half (27 + 1)/2 = 14; local stays A's midpoint.
  std::vector<ClockSample> s = {Sample(0, 1000, 10, 40), Sample(1000, 1000, 45, 15)};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 25, 997, 14);
  EXPECT_LE(std::llabs(p.offset_ns - 1000), p.half_rtt_ns);
  // order does not matter
  std::vector<ClockSample> r = {s[1], s[0]};
  ASSERT_TRUE(EstimateEpoch(r, p));
  ExpectPoint(p, 25, 997, 14);
}

TEST(EstimateEpoch, AnEmptyIntersectionLeavesTheMinimumRoundTripSample) {
  // A as above [960, 1010]; C after a clock step: send 3000, recv 3100, reference 5100 -> [2000, 2100]
  std::vector<ClockSample> s = {Sample(0, 1000, 10, 40), ClockSample{3000, 5100, 3100}};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 25, 985, 26);
}

TEST(EstimateEpoch, TiesOnTheRoundTripKeepTheEarliestSample) {
  std::vector<ClockSample> s = {Sample(0, 1000, 50, 50), Sample(5000, 1000, 50, 50)};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 50, 1000, 51);
}

TEST(EstimateEpoch, NegativeRoundTripSamplesAreIgnored) {
  // recv before send: a broken clock. Its "interval" [ref - recv, ref - send] = [-400 + 9e5, ...]
  // must neither be chosen nor take part in the intersection.
  ClockSample broken{500, 900000, 400};
  std::vector<ClockSample> s = {broken, Sample(0, 1000, 10, 40), broken, Sample(1000, 1000, 45, 15), broken};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 25, 997, 14);
}

TEST(EstimateEpoch, OnlyNegativeRoundTripsOrNoSamplesAtAllGiveNoPoint) {
  ClockPoint p{7, 8, 9};
  std::vector<ClockSample> bad = {{500, 900000, 400}, {10, 0, 9}};
  EXPECT_FALSE(EstimateEpoch(bad, p));
  EXPECT_FALSE(EstimateEpoch(std::vector<ClockSample>{}, p));
}

TEST(EstimateEpoch, AZeroRoundTripIsAnExactReading) {
  std::vector<ClockSample> s = {{4000, 4123, 4000}};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 4000, 123, 0);
}

TEST(EstimateEpoch, DriftAllowanceIsAHundredNanosecondsPerMillisecondRoundedUp) {
  EXPECT_EQ(DriftAllowanceNs(0), 0);
  EXPECT_EQ(DriftAllowanceNs(1), 1);  // rounded up: the bound must hold
  EXPECT_EQ(DriftAllowanceNs(1'000'000), 100);
  EXPECT_EQ(DriftAllowanceNs(-1'000'000), 100);  // either direction
  EXPECT_EQ(DriftAllowanceNs(30'000'001), 3'001);
  // a day of elapsed time, no overflow: 86400 s x 100 ppm = 8.64 s
  EXPECT_EQ(DriftAllowanceNs(86'400'000'000'000), 8'640'000'000);
  // the extremes: 9'223'372'036'854'775'807 ns x 1e-4 = 922'337'203'685'477.58, rounded up
  EXPECT_EQ(DriftAllowanceNs(INT64_MAX), 922'337'203'685'478);
  EXPECT_EQ(DriftAllowanceNs(INT64_MIN), 922'337'203'685'478);
}

TEST(EstimateEpoch, ASampleFarFromTheKeptOneNarrowsOnlyByWhatTheDriftCannotHaveMoved) {
  // A descheduled epoch of a clock 40 ppm off: reference - local = 1000 + 40e-6 L. A at local 0
  // (out 2000, in 200, rtt 2200, kept): interval [800, 3000] at offset 1000. B 10 ms later (out
  // 2100, in 200, rtt 2300) at offset 1400: interval [1200, 3500]. Intersected as if simultaneous
  // they give [1200, 3000], offset 2100 +- 900, which misses A's truth (1000) by 1100. B's interval
  // widened by 100 ppm x (10 ms + 50 ns + its half round trip) = 1001 ns is [199, 4501]: it
  // narrows nothing (A's own, widened by 1 ns, is [799, 3001]), and A stands: offset
  // 3000 - 1100 = 1900, half 1100 + 1, 900 from the truth.
  std::vector<ClockSample> s = {Sample(0, 1000, 2000, 200), Sample(10'000'000, 1400, 2100, 200)};
  ClockPoint p;
  ASSERT_TRUE(EstimateEpoch(s, p));
  ExpectPoint(p, 1100, 1900, 1101);
  EXPECT_LE(std::llabs(p.offset_ns - 1000), p.half_rtt_ns);
}

// Epochs stretched by a loaded machine (a sample every 0-5 ms, so an epoch of 16 lasts up to 80
// ms) of a clock drifting at 90 ppm, with asymmetric random delays: every point holds the truth at
// its local time within its half, while intersecting the samples as if simultaneous (the rule
// before the drift allowance) misses it in some epochs.
TEST(EstimateEpoch, StretchedEpochsOfAClockDriftingWithinTheAllowanceHoldTheTruthAtTheirPoint) {
  constexpr double kDrift = 90e-6;
  auto truth = [&](int64_t local) { return -3'000'000 + std::llround(kDrift * static_cast<double>(local)); };
  std::mt19937_64 rng(20261206);
  std::uniform_int_distribution<int64_t> leg(200, 20'000);
  std::uniform_int_distribution<int64_t> gap(0, 5'000'000);
  int64_t local = 1'000'000'000;
  int plain_misses = 0;
  for (int epoch = 0; epoch < 200; ++epoch) {
    std::vector<ClockSample> samples;
    for (int k = 0; k < 16; ++k) {
      const int64_t out = leg(rng), in = leg(rng);
      samples.push_back(Sample(local, truth(local + out), out, in));
      local += out + in + gap(rng);
    }
    ClockPoint p;
    ASSERT_TRUE(EstimateEpoch(samples, p)) << epoch;
    EXPECT_LE(std::llabs(p.offset_ns - truth(p.local_ns)), p.half_rtt_ns) << "epoch " << epoch;
    int64_t lo = INT64_MIN, hi = INT64_MAX;  // the plain intersection
    for (const ClockSample& c : samples) {
      lo = std::max(lo, static_cast<int64_t>(c.reference_ns - c.local_recv_ns));
      hi = std::min(hi, static_cast<int64_t>(c.reference_ns - c.local_send_ns));
    }
    if (lo <= hi && (truth(p.local_ns) < lo || truth(p.local_ns) > hi)) {
      ++plain_misses;
    }
    local += 1'000'000'000;
  }
  EXPECT_GT(plain_misses, 0);  // the scenario needs the allowance
}

// ---- ClockModel ----

TEST(ClockModel, WithoutPointsItIsTheIdentityAndUnmeasured) {
  ClockModel m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.Offset(123456), 0);
  EXPECT_EQ(m.ToReference(123456), 123456);
  EXPECT_EQ(m.DriftPpm(), 0.0);
  EXPECT_EQ(m.ErrorBoundNs(), -1);
}

TEST(ClockModel, OnePointIsAConstantOffset) {
  ClockModel m({{1000, 500, 7}});
  EXPECT_FALSE(m.empty());
  for (int64_t t : {int64_t{-1000000}, int64_t{0}, int64_t{1000}, int64_t{1} << 50}) {
    EXPECT_EQ(m.Offset(t), 500) << t;
    EXPECT_EQ(m.ToReference(t), t + 500) << t;
  }
  EXPECT_EQ(m.OffsetAt(42), 500);
  EXPECT_EQ(m.DriftPpm(), 0.0);
  EXPECT_EQ(m.ErrorBoundNs(), 7);
}

TEST(ClockModel, TwoPointsGiveTheExactDriftAndInterpolateAndExtrapolateOnTheirLine) {
  // offset 5000 at 1 s, 45000 at 2 s: slope 40000 / 1e9 = 40 ppm
  ClockModel m({{1'000'000'000, 5000, 10}, {2'000'000'000, 45000, 20}});
  EXPECT_EQ(m.DriftPpm(), 40.0);
  EXPECT_EQ(m.Offset(1'000'000'000), 5000);
  EXPECT_EQ(m.Offset(2'000'000'000), 45000);
  EXPECT_EQ(m.Offset(1'500'000'000), 25000);  // 5000 + 40e-6 * 5e8
  EXPECT_EQ(m.Offset(1'250'000'000), 15000);  // 5000 + 40e-6 * 2.5e8
  EXPECT_EQ(m.Offset(1'000'012'300), 5000);   // 40e-6 * 12300 = 0.492 rounds to 0
  EXPECT_EQ(m.Offset(1'000'013'000), 5001);   // 0.52 rounds to 1
  EXPECT_EQ(m.Offset(0), -35000);             // before the first point: 5000 - 40e-6 * 1e9
  EXPECT_EQ(m.Offset(3'000'000'000), 85000);  // after the last: 45000 + 40e-6 * 1e9
  EXPECT_EQ(m.ToReference(1'500'000'000), 1'500'025'000);
  EXPECT_EQ(m.OffsetAt(500'000'000), -15000);  // the summary offset at an anchor before the first epoch
  EXPECT_EQ(m.ErrorBoundNs(), 20);             // largest half RTT; two points have no residual
}

TEST(ClockModel, PointsAreSortedByLocalTime) {
  ClockModel m({{2'000'000'000, 45000, 20}, {1'000'000'000, 5000, 10}});
  ASSERT_EQ(m.points().size(), 2u);
  EXPECT_EQ(m.points()[0].local_ns, 1'000'000'000);
  EXPECT_EQ(m.points()[1].local_ns, 2'000'000'000);
  EXPECT_EQ(m.Offset(1'500'000'000), 25000);
  EXPECT_EQ(m.DriftPpm(), 40.0);
}

TEST(ClockModel, ThreePointsArePiecewiseLinearWithTheEndSegmentsExtended) {
  // segment 1: (0, 0) -> (1 ms, 100): +100 ppm; segment 2: (1 ms, 100) -> (3 ms, -300): -200 ppm
  ClockModel m({{3'000'000, -300, 6}, {0, 0, 5}, {1'000'000, 100, 8}});
  EXPECT_EQ(m.Offset(0), 0);
  EXPECT_EQ(m.Offset(500'000), 50);
  EXPECT_EQ(m.Offset(1'000'000), 100);  // a middle point belongs to both segments
  EXPECT_EQ(m.Offset(1'500'000), 0);    // 100 - 200e-6 * 5e5
  EXPECT_EQ(m.Offset(2'000'000), -100);
  EXPECT_EQ(m.Offset(3'000'000), -300);
  EXPECT_EQ(m.Offset(-1'000'000), -100);  // first segment extended back
  EXPECT_EQ(m.Offset(4'000'000), -500);   // last segment extended forward
  // drift: the line through the first and last points, -300 / 3e6 = -100 ppm
  EXPECT_DOUBLE_EQ(m.DriftPpm(), -100.0);
  // bound: largest half RTT (8) + largest residual around that line: at 1 ms the line says -100,
  // the point says 100 -> 200. 8 + 200 = 208.
  EXPECT_EQ(m.ErrorBoundNs(), 208);
}

TEST(ClockModel, ErrorBoundIsTheLargestHalfRoundTripPlusTheLargestResidual) {
  // four points; line through first (0, 1000) and last (4e6, 1400): slope 1e-4
  // residuals: at 1e6: 1150 - 1100 = 50; at 3e6: 1270 - 1300 = -30 -> max |.| = 50
  // half RTTs 3, 11, 4, 9 -> 11. Bound 61.
  ClockModel m({{0, 1000, 3}, {1'000'000, 1150, 11}, {3'000'000, 1270, 4}, {4'000'000, 1400, 9}});
  EXPECT_EQ(m.ErrorBoundNs(), 61);
  EXPECT_DOUBLE_EQ(m.DriftPpm(), 100.0);
  EXPECT_EQ(m.Offset(2'000'000), 1210);  // between 1150 @1e6 and 1270 @3e6
}

// A simulated rank whose clock drifts linearly against the reference: offset(L) = theta0 + D * L
// (local time L), measured by epochs of ping-pongs with random delays drawn from one distribution
// for both directions (a 5 us floor plus up to 45 us). The model must recover the offset
// everywhere in the run, and the drift, within the bound it reports.
//
// Each point holds the truth within its half width (the drift within an epoch, under 1.7 ms x 40
// ppm = 68 ns here, is inside the drift allowance); the model between points adds at most that
// drift's share again, so checks between points allow 68 ns more than the bound.
TEST(ClockModel, RecoversAnInjectedLinearDriftFromSimulatedEpochsWithinItsBound) {
  constexpr double kDrift = 40e-6;          // 40 ppm: reference runs faster than local
  constexpr int64_t kTheta0 = -12'345'678;  // offset at local 0
  auto truth = [&](int64_t local) { return static_cast<double>(kTheta0) + kDrift * static_cast<double>(local); };
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<int64_t> delay(5'000, 50'000);

  std::vector<ClockPoint> points;
  int64_t local = 1'000'000'000;
  double intra_epoch = 0;  // the stated tolerance above, measured
  int64_t max_half = 0;
  for (int epoch = 0; epoch < 10; ++epoch) {
    std::vector<ClockSample> samples;
    int64_t epoch_start = local;
    for (int k = 0; k < 16; ++k) {
      int64_t out = delay(rng), in = delay(rng);
      ClockSample s;
      s.local_send_ns = static_cast<uint64_t>(local);
      int64_t at_ref = local + out;  // local time at which the reference reads its clock
      s.reference_ns = static_cast<uint64_t>(at_ref + std::llround(truth(at_ref)));
      s.local_recv_ns = static_cast<uint64_t>(at_ref + in);
      samples.push_back(s);
      local = at_ref + in + 1'000;
    }
    intra_epoch = std::max(intra_epoch, kDrift * static_cast<double>(local - epoch_start));
    ClockPoint p;
    ASSERT_TRUE(EstimateEpoch(samples, p)) << epoch;
    // the 5 us floor on both legs keeps every interval, and so their intersection, about 10 us wide
    // (less the 68 ns the offset moves within the epoch)
    EXPECT_GE(p.half_rtt_ns, 4'966) << epoch;
    EXPECT_LE(std::fabs(static_cast<double>(p.offset_ns) - truth(p.local_ns)), p.half_rtt_ns + 1.0) << epoch;
    max_half = std::max(max_half, p.half_rtt_ns);
    points.push_back(p);
    local += 1'000'000'000;  // next epoch a second later
  }
  EXPECT_LE(intra_epoch, 68.0);
  ClockModel m(points);
  int64_t bound = m.ErrorBoundNs();
  EXPECT_GE(bound, max_half);
  // Every point is within max_half (+68) of a straight line, so the first-last line strays from
  // each point by at most 2 x (max_half + 68): the bound can never exceed 3 x max_half + 204.
  EXPECT_LE(bound, 3 * max_half + 204);
  int64_t first = points.front().local_ns, last = points.back().local_ns;
  int checked = 0;
  for (int64_t t = first; t <= last; t += 37'000'000, ++checked) {
    EXPECT_LE(std::fabs(static_cast<double>(m.Offset(t)) - truth(t)), bound + 68.0 + 1.0) << "at local " << t;
  }
  EXPECT_GE(checked, 240);
  // The drift of the first-last line: each end is off by at most the bound.
  double span = static_cast<double>(last - first);
  EXPECT_NEAR(m.DriftPpm(), 40.0, 2.0 * static_cast<double>(bound + 69) / span * 1e6);
}

// Offset rounds the line's value half away from zero, as llround of the long double product of the
// segment's slope and the distance from its start: the same ns on every platform and release, so
// exported traces and stored analyses do not move by one when its arithmetic is made cheaper.
// Exact halves both ways, and many random segments and times against llroundl itself.
TEST(ClockModel, OffsetIsTheLlroundOfTheSlopeTimesTheDistanceToTheBit) {
  // A slope of 1/2: odd distances land on exact halves, which go away from zero.
  ClockModel half({{0, 0, 0}, {2, 1, 0}});
  EXPECT_EQ(half.Offset(1), 1);    // 0.5
  EXPECT_EQ(half.Offset(3), 2);    // 1.5
  EXPECT_EQ(half.Offset(-1), -1);  // -0.5, before the first point, on the first segment's line
  EXPECT_EQ(half.Offset(-3), -2);  // -1.5
  ClockModel down({{0, 0, 0}, {2, -1, 0}});
  EXPECT_EQ(down.Offset(1), -1);  // -0.5
  EXPECT_EQ(down.Offset(-1), 1);  // 0.5

  std::mt19937_64 rng(20261207);
  std::uniform_int_distribution<int64_t> local(0, int64_t{1} << 45), step(1, int64_t{1} << 40);
  std::uniform_int_distribution<int64_t> offset(-(int64_t{1} << 32), int64_t{1} << 32);
  for (int model = 0; model < 200; ++model) {
    std::vector<ClockPoint> points;
    int64_t at = local(rng);
    for (int p = 0; p < 4; ++p) {
      points.push_back({at, offset(rng), 0});
      at += step(rng);
    }
    ClockModel m(points);
    for (int k = 0; k < 200; ++k) {
      const int64_t t = points.front().local_ns - step(rng) / 4 + local(rng) / 4;
      // The reference: the segment as Offset picks it (the end segments extended), llroundl.
      size_t hi = 1;
      while (hi + 1 < points.size() && points[hi].local_ns <= t) {
        ++hi;
      }
      const ClockPoint& a = points[hi - 1];
      const ClockPoint& b = points[hi];
      const long double slope =
          static_cast<long double>(b.offset_ns - a.offset_ns) / static_cast<long double>(b.local_ns - a.local_ns);
      const int64_t want = a.offset_ns + std::llround(slope * static_cast<long double>(t - a.local_ns));
      ASSERT_EQ(m.Offset(t), want) << "model " << model << " t " << t;
    }
  }
}

}  // namespace
}  // namespace commprof
