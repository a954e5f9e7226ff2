#include "analysis/compare/noise_guard.h"

#include <algorithm>
#include <cmath>

namespace commprof {
namespace {

// The nearest-rank quantile of sorted `v` (docs/metrics.md §4): the ceil(q n)-th smallest.
size_t Rank(size_t n, double q) {
  auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  return std::clamp<size_t>(k, 1, n);
}

double Quantile(const std::vector<double>& v, double q) { return v[Rank(v.size(), q) - 1]; }

}  // namespace

Repetitions SummarizeRepetitions(std::vector<double>& values) {
  Repetitions r;
  r.n = values.size();
  if (values.empty()) {
    return r;
  }
  std::sort(values.begin(), values.end());
  r.p10 = Quantile(values, 0.10);
  r.p50 = Quantile(values, 0.50);
  r.p90 = Quantile(values, 0.90);
  r.min = values.front();
  r.max = values.back();
  // The middle half: a shift of half the calls (a late root's waiting peers on 2 ranks, one of two
  // sub-communicators) moves its mean by half the shift while the nearest-rank median stays, and
  // a slow quarter (hiccups) is left out of it as it is of the median.
  const size_t lo = Rank(values.size(), 0.25), hi = Rank(values.size(), 0.75);
  double sum = 0;
  for (size_t i = lo; i <= hi; ++i) {
    sum += values[i - 1];
  }
  r.mid_mean = sum / static_cast<double>(hi - lo + 1);
  return r;
}

bool WithinNoise(const Repetitions& base, const Repetitions& next, double floor) {
  const bool median = next.p50 >= base.p10 - floor && next.p50 <= base.p90 + floor;
  // The mid-mean may move by the width of the base's spread: it is a mean, which a broad mode of
  // time-sliced calls (0 or ~3 ms each) shifts by a little more than its p90 allows.
  const bool mid = std::isnan(next.mid_mean) || std::isnan(base.mid_mean) ||
                   std::fabs(next.mid_mean - base.mid_mean) <= base.p90 - base.p10 + floor;
  return base.n >= kMinRepetitions && next.n > 0 && median && mid;
}

bool SingleWithinNoise(const Repetitions& base, double next, double floor) {
  return base.n >= kMinRepetitions && next >= base.min - floor && next <= base.max + floor;
}

std::optional<double> RelativeChange(double base, double next) {
  if (base == 0) {
    return next == 0 ? std::optional<double>(0.0) : std::nullopt;
  }
  return (next - base) / std::fabs(base);
}

}  // namespace commprof
