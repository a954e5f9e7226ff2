// IntervalSet (analysis/metrics/interval_set.h): golden cases for normalization, the three set
// operations, their lengths and the sweep, then a randomized comparison of everything against a
// brute-force reference that marks each nanosecond of a small range.
#include "analysis/metrics/interval_set.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

namespace commprof {
namespace {

using Pieces = std::vector<Interval>;

IntervalSet Set(Pieces p) { return IntervalSet::FromIntervals(std::move(p)); }

struct SweptPiece {
  Interval piece;
  uint32_t mask;
  bool operator==(const SweptPiece&) const = default;
};

std::vector<SweptPiece> SweepAll(const std::vector<const IntervalSet*>& sets) {
  std::vector<SweptPiece> out;
  Sweep(sets, [&](Interval iv, uint32_t mask) { out.push_back({iv, mask}); });
  return out;
}

TEST(IntervalSet, FromIntervalsSortsMergesOverlapsAndTouchingAndDropsEmpty) {
  // [5,7) and [6,9) overlap -> [5,9); [9,12) touches it -> [5,12); [0,2) stays; [3,3) and the
  // reversed [4,1) are empty; [20,30) contains [22,25) and a duplicate [20,30).
  IntervalSet s = Set({{9, 12}, {5, 7}, {3, 3}, {0, 2}, {6, 9}, {4, 1}, {20, 30}, {22, 25}, {20, 30}});
  EXPECT_EQ(s.intervals(), (Pieces{{0, 2}, {5, 12}, {20, 30}}));
  EXPECT_EQ(s.Length(), 2 + 7 + 10);
  EXPECT_FALSE(s.empty());
}

TEST(IntervalSet, EmptyInputsGiveEmptySetsAndZeroLengths) {
  IntervalSet none;
  IntervalSet only_empty = Set({{4, 4}, {9, 2}});
  IntervalSet a = Set({{0, 10}});
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(only_empty.empty());
  EXPECT_EQ(none.Length(), 0);
  EXPECT_EQ(Union(none, a).intervals(), a.intervals());
  EXPECT_TRUE(Intersection(none, a).empty());
  EXPECT_TRUE(Intersection(a, none).empty());
  EXPECT_EQ(Difference(a, none).intervals(), a.intervals());
  EXPECT_TRUE(Difference(none, a).empty());
  EXPECT_EQ(IntersectionLength(a, none), 0);
  EXPECT_EQ(DifferenceLength(a, none), 10);
  EXPECT_TRUE(SweepAll({&none, &only_empty}).empty());
}

TEST(IntervalSet, NegativeAndLargeTimesAreOrdinaryValues) {
  // Aligned times may be negative before the reference's zero; sums of lengths stay exact.
  const int64_t big = int64_t{1} << 60;
  IntervalSet s = Set({{-50, -10}, {-20, 5}, {big, big + 7}});
  EXPECT_EQ(s.intervals(), (Pieces{{-50, 5}, {big, big + 7}}));
  EXPECT_EQ(s.Length(), 55 + 7);
}

TEST(IntervalSet, UnionMergesAcrossTheTwoLists) {
  // a = [0,4) [10,14); b = [3,11) [14,16) [20,21): [0,4)+[3,11)+[10,14)+[14,16) chain into [0,16).
  IntervalSet u = Union(Set({{0, 4}, {10, 14}}), Set({{3, 11}, {14, 16}, {20, 21}}));
  EXPECT_EQ(u.intervals(), (Pieces{{0, 16}, {20, 21}}));
}

TEST(IntervalSet, IntersectionKeepsOnlyCommonTime) {
  // a = [0,10) [20,30); b = [5,25) [28,40): common [5,10) [20,25) [28,30) = 5 + 5 + 2 = 12.
  IntervalSet a = Set({{0, 10}, {20, 30}}), b = Set({{5, 25}, {28, 40}});
  EXPECT_EQ(Intersection(a, b).intervals(), (Pieces{{5, 10}, {20, 25}, {28, 30}}));
  EXPECT_EQ(IntersectionLength(a, b), 12);
  EXPECT_EQ(IntersectionLength(b, a), 12);
  // Touching is not intersecting.
  EXPECT_EQ(IntersectionLength(Set({{0, 5}}), Set({{5, 9}})), 0);
}

TEST(IntervalSet, DifferenceCutsHolesAndHandlesOneIntervalCoveringSeveral) {
  // a = [0,10) [12,14) [16,30); b = [2,3) [5,17) [29,35):
  // [0,10) - b = [0,2) [3,5); [12,14) is covered by [5,17); [16,30) - b = [17,29).
  IntervalSet a = Set({{0, 10}, {12, 14}, {16, 30}}), b = Set({{2, 3}, {5, 17}, {29, 35}});
  EXPECT_EQ(Difference(a, b).intervals(), (Pieces{{0, 2}, {3, 5}, {17, 29}}));
  EXPECT_EQ(DifferenceLength(a, b), 2 + 2 + 12);
  // b - a = [10,12) [14,16) [30,35).
  EXPECT_EQ(Difference(b, a).intervals(), (Pieces{{10, 12}, {14, 16}, {30, 35}}));
  EXPECT_EQ(DifferenceLength(b, a), 2 + 2 + 5);
}

TEST(IntervalSet, SweepReportsMaximalPiecesWithTheirMembership) {
  // s0 = [0,10); s1 = [5,15); s2 = [20,25) [25,30) (merged to [20,30)):
  // [0,5) {0}, [5,10) {0,1}, [10,15) {1}, gap, [20,30) {2}.
  IntervalSet s0 = Set({{0, 10}}), s1 = Set({{5, 15}}), s2 = Set({{20, 25}, {25, 30}});
  std::vector<SweptPiece> want = {{{0, 5}, 0b001}, {{5, 10}, 0b011}, {{10, 15}, 0b010}, {{20, 30}, 0b100}};
  EXPECT_EQ(SweepAll({&s0, &s1, &s2}), want);
  // Two sets that hand over at one instant: [0,5) {0} then [5,9) {1}, not merged (masks differ).
  IntervalSet t0 = Set({{0, 5}}), t1 = Set({{5, 9}});
  std::vector<SweptPiece> handover = {{{0, 5}, 0b01}, {{5, 9}, 0b10}};
  EXPECT_EQ(SweepAll({&t0, &t1}), handover);
  // The same set twice: one piece with both bits.
  std::vector<SweptPiece> twice = {{{0, 10}, 0b11}};
  EXPECT_EQ(SweepAll({&s0, &s0}), twice);
}

// ---- randomized comparison with a per-nanosecond reference ----

constexpr int64_t kLo = -8, kHi = 56;  // the range the random intervals live in
constexpr size_t kWidth = static_cast<size_t>(kHi - kLo);
using Bits = std::array<bool, kWidth>;

Bits Mark(const Pieces& raw) {
  Bits b{};
  for (const Interval& iv : raw) {
    for (int64_t t = iv.begin; t < iv.end; ++t) b[static_cast<size_t>(t - kLo)] = true;
  }
  return b;
}

// The normalized intervals of a bit row: maximal runs of true.
Pieces Runs(const Bits& b) {
  Pieces out;
  for (size_t i = 0; i < kWidth;) {
    if (!b[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < kWidth && b[j]) ++j;
    out.push_back({static_cast<int64_t>(i) + kLo, static_cast<int64_t>(j) + kLo});
    i = j;
  }
  return out;
}

int64_t Count(const Bits& b) {
  int64_t n = 0;
  for (bool x : b) n += x ? 1 : 0;
  return n;
}

Pieces RandomPieces(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> count(0, 7);
  std::uniform_int_distribution<int64_t> at(kLo, kHi);
  std::uniform_int_distribution<int64_t> len(-3, 12);  // some empty and reversed ones too
  Pieces p;
  for (int n = count(rng); n > 0; --n) {
    int64_t b = at(rng);
    int64_t e = std::min(kHi, b + len(rng));
    p.push_back({b, e});
  }
  return p;
}

TEST(IntervalSet, RandomSetsAgreeWithAPerNanosecondReference) {
  std::mt19937_64 rng(20240611);
  for (int trial = 0; trial < 5000; ++trial) {
    Pieces ra = RandomPieces(rng), rb = RandomPieces(rng), rc = RandomPieces(rng);
    Bits ba = Mark(ra), bb = Mark(rb), bc = Mark(rc);
    IntervalSet a = Set(ra), b = Set(rb), c = Set(rc);
    SCOPED_TRACE("trial " + std::to_string(trial));
    Bits bu{}, bi{}, bd{};
    for (size_t t = 0; t < kWidth; ++t) {
      bu[t] = ba[t] || bb[t];
      bi[t] = ba[t] && bb[t];
      bd[t] = ba[t] && !bb[t];
    }
    // Normalized form is exactly the runs of the reference (sorted, disjoint, not touching).
    ASSERT_EQ(a.intervals(), Runs(ba));
    ASSERT_EQ(a.Length(), Count(ba));
    ASSERT_EQ(Union(a, b).intervals(), Runs(bu));
    ASSERT_EQ(Intersection(a, b).intervals(), Runs(bi));
    ASSERT_EQ(Difference(a, b).intervals(), Runs(bd));
    ASSERT_EQ(IntersectionLength(a, b), Count(bi));
    ASSERT_EQ(DifferenceLength(a, b), Count(bd));

    // The sweep: the pieces tile exactly the covered nanoseconds with each one's membership, in
    // order, and two adjacent pieces never carry the same mask (maximality).
    std::array<uint32_t, kWidth> want{};
    for (size_t t = 0; t < kWidth; ++t) want[t] = (ba[t] ? 1u : 0u) | (bb[t] ? 2u : 0u) | (bc[t] ? 4u : 0u);
    std::array<uint32_t, kWidth> got{};
    std::vector<SweptPiece> pieces = SweepAll({&a, &b, &c});
    for (size_t k = 0; k < pieces.size(); ++k) {
      const SweptPiece& p = pieces[k];
      ASSERT_LT(p.piece.begin, p.piece.end);
      ASSERT_NE(p.mask, 0u);
      if (k > 0) {
        ASSERT_LE(pieces[k - 1].piece.end, p.piece.begin);
        ASSERT_FALSE(pieces[k - 1].piece.end == p.piece.begin && pieces[k - 1].mask == p.mask);
      }
      for (int64_t t = p.piece.begin; t < p.piece.end; ++t) got[static_cast<size_t>(t - kLo)] = p.mask;
    }
    ASSERT_EQ(got, want);
  }
}

}  // namespace
}  // namespace commprof
