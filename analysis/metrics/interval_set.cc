#include "analysis/metrics/interval_set.h"

#include <algorithm>
#include <array>
#include <cassert>

namespace commprof {
namespace {

// Appends `iv` to a sorted list, merging it into the last interval when they overlap or touch,
// so the list stays normalized whatever the caller's pieces look like at their seams.
void Append(std::vector<Interval>& out, Interval iv) {
  if (iv.end <= iv.begin) {
    return;
  }
  if (!out.empty() && iv.begin <= out.back().end) {
    out.back().end = std::max(out.back().end, iv.end);
    return;
  }
  out.push_back(iv);
}

// Walks the pieces of a ∩ b in order (two-pointer merge of two normalized lists).
template <typename Fn>
void ForEachIntersection(const std::vector<Interval>& a, const std::vector<Interval>& b, Fn&& fn) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].begin, b[j].begin);
    int64_t hi = std::min(a[i].end, b[j].end);
    if (lo < hi) {
      fn(Interval{lo, hi});
    }
    // The one that ends first cannot meet anything further in the other list.
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
}

}  // namespace

IntervalSet IntervalSet::FromIntervals(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(), [](const Interval& x, const Interval& y) { return x.begin < y.begin; });
  // Merge in place (the write position never passes the read position): no second copy.
  size_t n = 0;
  for (const Interval& iv : intervals) {
    if (iv.end <= iv.begin) {
      continue;
    }
    if (n > 0 && iv.begin <= intervals[n - 1].end) {
      intervals[n - 1].end = std::max(intervals[n - 1].end, iv.end);
    } else {
      intervals[n++] = iv;
    }
  }
  intervals.resize(n);
  intervals.shrink_to_fit();
  return IntervalSet(std::move(intervals));
}

int64_t IntervalSet::Length() const {
  int64_t n = 0;
  for (const Interval& iv : intervals_) {
    n += iv.length();
  }
  return n;
}

IntervalSet Union(const IntervalSet& a, const IntervalSet& b) {
  const auto& x = a.intervals_;
  const auto& y = b.intervals_;
  std::vector<Interval> out;
  out.reserve(x.size() + y.size());
  size_t i = 0, j = 0;
  while (i < x.size() || j < y.size()) {
    bool take_x = j == y.size() || (i < x.size() && x[i].begin <= y[j].begin);
    Append(out, take_x ? x[i++] : y[j++]);
  }
  return IntervalSet(std::move(out));
}

IntervalSet Intersection(const IntervalSet& a, const IntervalSet& b) {
  std::vector<Interval> out;
  ForEachIntersection(a.intervals_, b.intervals_, [&](Interval iv) { Append(out, iv); });
  return IntervalSet(std::move(out));
}

IntervalSet Difference(const IntervalSet& a, const IntervalSet& b) {
  const auto& y = b.intervals_;
  std::vector<Interval> out;
  size_t j = 0;
  for (Interval cur : a.intervals_) {
    // Skip what of b ends before this piece of a; b's intervals are sorted and disjoint.
    while (j < y.size() && y[j].end <= cur.begin) {
      ++j;
    }
    size_t k = j;
    while (k < y.size() && y[k].begin < cur.end) {
      Append(out, Interval{cur.begin, y[k].begin});
      cur.begin = std::max(cur.begin, y[k].end);
      if (y[k].end > cur.end) {
        break;  // it also covers the start of a's next interval: keep j there
      }
      ++k;
    }
    j = k;
    Append(out, cur);
  }
  return IntervalSet(std::move(out));
}

int64_t IntersectionLength(const IntervalSet& a, const IntervalSet& b) {
  int64_t n = 0;
  ForEachIntersection(a.intervals(), b.intervals(), [&](Interval iv) { n += iv.length(); });
  return n;
}

int64_t DifferenceLength(const IntervalSet& a, const IntervalSet& b) { return a.Length() - IntersectionLength(a, b); }

void Sweep(std::span<const IntervalSet* const> sets, const std::function<void(Interval, uint32_t)>& fn) {
  assert(sets.size() <= 32);
  // Each set is sorted and disjoint, so its edges (begin, end, begin, end, ...) already ascend:
  // merging the sets' edge sequences replaces sorting all edges (which was a seventh of a
  // report's time on an MPI-heavy file).
  struct Cursor {
    const Interval* at;
    const Interval* end;
    bool closing;  // the next edge is *at's end, else its begin
    int64_t Next() const { return closing ? at->end : at->begin; }
  };
  std::array<Cursor, 32> cursors{};
  const size_t k = sets.size();
  for (size_t i = 0; i < k; ++i) {
    const auto& iv = sets[i]->intervals();
    cursors[i] = Cursor{iv.data(), iv.data() + iv.size(), false};
  }
  uint32_t mask = 0;
  Interval piece{};
  uint32_t piece_mask = 0;  // 0: no piece open
  for (;;) {
    bool any = false;
    int64_t at = 0;
    for (size_t i = 0; i < k; ++i) {
      if (cursors[i].at != cursors[i].end && (!any || cursors[i].Next() < at)) {
        at = cursors[i].Next();
        any = true;
      }
    }
    if (!any) {
      break;
    }
    // Every edge at this instant first: a normalized set never closes and opens at one point, so
    // the order among them does not matter.
    for (size_t i = 0; i < k; ++i) {
      Cursor& c = cursors[i];
      while (c.at != c.end && c.Next() == at) {
        if (c.closing) {
          mask &= ~(1u << i);
          ++c.at;
        } else {
          mask |= 1u << i;
        }
        c.closing = !c.closing;
      }
    }
    if (mask == piece_mask) {
      continue;  // membership unchanged: the open piece goes on
    }
    if (piece_mask != 0) {
      piece.end = at;
      fn(piece, piece_mask);
    }
    piece = Interval{at, at};
    piece_mask = mask;
  }
}

}  // namespace commprof
