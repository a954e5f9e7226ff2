#include "core/clock_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace commprof {

int64_t DriftAllowanceNs(int64_t elapsed_ns) {
  // |elapsed| in unsigned arithmetic (INT64_MIN has no signed magnitude), then ceil(e x ppm / 1e6)
  // without overflow: the result is at most about 9.2e14
  const auto u = static_cast<uint64_t>(elapsed_ns);
  const uint64_t e = elapsed_ns < 0 ? ~u + 1 : u;
  constexpr auto kPpm = static_cast<uint64_t>(kUnmeasuredDriftPpm);
  return static_cast<int64_t>(e / 1'000'000 * kPpm + (e % 1'000'000 * kPpm + 999'999) / 1'000'000);
}

bool EstimateEpoch(std::span<const ClockSample> samples, ClockPoint& out) {
  bool found = false;
  int64_t best_rtt = 0;
  for (const auto& s : samples) {
    int64_t rtt = static_cast<int64_t>(s.local_recv_ns - s.local_send_ns);
    if (rtt < 0) {
      continue;
    }
    if (!found || rtt < best_rtt) {
      found = true;
      best_rtt = rtt;
      // Midpoint without overflow: send + rtt/2.
      int64_t mid = static_cast<int64_t>(s.local_send_ns) + rtt / 2;
      out.local_ns = mid;
      out.offset_ns = static_cast<int64_t>(s.reference_ns) - mid;
      // Round up: the bound must hold. The reference read its clock somewhere inside the round
      // trip, up to half of it from the midpoint: the drift allowance of that too.
      out.half_rtt_ns = (rtt + 1) / 2 + DriftAllowanceNs((rtt + 1) / 2);
    }
  }
  if (!found) {
    return false;
  }
  // Each sample confines the offset AT THE MOMENT THE REFERENCE READ ITS CLOCK (somewhere in that
  // sample's round trip) to [ref - recv, ref - send]; at the kept midpoint the offset may have
  // moved by the unmeasured drift over the distance, at most |midpoint - kept| + half the round
  // trip, so each interval is widened by that much. All of them then hold at once, so their
  // intersection does too, and it is never wider than the kept sample's own.
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  for (const auto& s : samples) {
    int64_t rtt = static_cast<int64_t>(s.local_recv_ns - s.local_send_ns);
    if (rtt < 0) {
      continue;
    }
    const int64_t from_kept = static_cast<int64_t>(s.local_send_ns) + rtt / 2 - out.local_ns;
    const int64_t widen = DriftAllowanceNs(std::llabs(from_kept) + (rtt + 1) / 2);
    auto ref = static_cast<int64_t>(s.reference_ns);
    lo = std::max(lo, ref - static_cast<int64_t>(s.local_recv_ns) - widen);
    hi = std::min(hi, ref - static_cast<int64_t>(s.local_send_ns) + widen);
  }
  if (lo <= hi && hi - lo < 2 * out.half_rtt_ns) {
    // Tighter than the minimum-round-trip sample alone, and still guaranteed. (An empty
    // intersection means a clock stepped during the epoch: then the min-RTT sample stands.)
    out.offset_ns = lo + (hi - lo) / 2;
    out.half_rtt_ns = (hi - lo + 1) / 2;
  }
  return true;
}

namespace {
// llround (half away from zero) of y, without the library call or the rounding-mode switch a
// truncating conversion costs on x87: the export and the analyses align every event's times
// through here. llrint rounds to nearest (ties to even) under the default rounding mode, in one
// instruction where math errno is off (core/CMakeLists.txt); y - llrint(y) is exact (|y - r| <= 1/2,
// Sterbenz), so an exact tie is seen and moved away from zero. The result is llround's to the bit.
int64_t RoundHalfAway(long double y) {
  auto r = static_cast<int64_t>(std::llrint(y));
  const long double d = y - static_cast<long double>(r);
  if (d == 0.5L && y > 0) {
    ++r;
  } else if (d == -0.5L && y < 0) {
    --r;
  }
  return r;
}

// The slope of the line through a and b (a.local_ns != b.local_ns).
long double Slope(const ClockPoint& a, const ClockPoint& b) {
  return static_cast<long double>(b.offset_ns - a.offset_ns) / static_cast<long double>(b.local_ns - a.local_ns);
}

// Offset at t on the line through a and b of slope `slope`.
int64_t OnLine(const ClockPoint& a, long double slope, int64_t t) {
  return a.offset_ns + RoundHalfAway(slope * static_cast<long double>(t - a.local_ns));
}

// Offset on the line through a and b at t (a.local_ns != b.local_ns).
int64_t Interpolate(const ClockPoint& a, const ClockPoint& b, int64_t t) {
  if (a.offset_ns == b.offset_ns) {
    return a.offset_ns;  // no drift between them (ranks sharing a host clock): what the slope gives, exactly
  }
  return OnLine(a, Slope(a, b), t);
}
}  // namespace

ClockModel::ClockModel(std::vector<ClockPoint> points) : points_(std::move(points)) {
  std::stable_sort(points_.begin(), points_.end(),
                   [](const ClockPoint& a, const ClockPoint& b) { return a.local_ns < b.local_ns; });
  // Each segment's slope, divided once here rather than on every event aligned through it.
  slopes_.resize(points_.empty() ? 0 : points_.size() - 1);
  for (size_t i = 0; i + 1 < points_.size(); ++i) {
    const ClockPoint& a = points_[i];
    const ClockPoint& b = points_[i + 1];
    if (a.local_ns != b.local_ns && a.offset_ns != b.offset_ns) {
      slopes_[i] = Slope(a, b);
    }
  }
}

int64_t ClockModel::Offset(int64_t t) const {
  if (points_.empty()) {
    return 0;
  }
  if (points_.size() == 1) {
    return points_[0].offset_ns;
  }
  // Segment containing t; before the first / after the last, extend the end segments.
  auto it = std::upper_bound(points_.begin(), points_.end(), t,
                             [](int64_t v, const ClockPoint& p) { return v < p.local_ns; });
  size_t hi = static_cast<size_t>(it - points_.begin());
  if (hi == 0) {
    hi = 1;
  }
  if (hi >= points_.size()) {
    hi = points_.size() - 1;
  }
  const ClockPoint& a = points_[hi - 1];
  const ClockPoint& b = points_[hi];
  if (a.local_ns == b.local_ns || a.offset_ns == b.offset_ns) {
    // Two readings at one moment, or no drift between them (ranks sharing a host clock): what the
    // slope gives, exactly.
    return a.offset_ns;
  }
  return OnLine(a, slopes_[hi - 1], t);
}

double ClockModel::DriftPpm() const {
  if (points_.size() < 2) {
    return 0.0;
  }
  const ClockPoint& a = points_.front();
  const ClockPoint& b = points_.back();
  if (a.local_ns == b.local_ns) {
    return 0.0;
  }
  return 1e6 * static_cast<double>(b.offset_ns - a.offset_ns) / static_cast<double>(b.local_ns - a.local_ns);
}

int64_t ClockModel::ErrorBoundNs() const {
  if (points_.empty()) {
    return -1;
  }
  int64_t half = 0;
  for (const auto& p : points_) {
    half = std::max(half, p.half_rtt_ns);
  }
  int64_t residual = 0;
  if (points_.size() > 2 && points_.front().local_ns != points_.back().local_ns) {
    for (const auto& p : points_) {
      residual = std::max(residual, std::abs(p.offset_ns - Interpolate(points_.front(), points_.back(), p.local_ns)));
    }
  }
  return half + residual;
}

}  // namespace commprof
