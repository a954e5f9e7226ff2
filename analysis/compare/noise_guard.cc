#include "analysis/compare/noise_guard.h"

#include <algorithm>
#include <cmath>

namespace commprof {
namespace {

// The nearest-rank quantile of sorted `v` (docs/metrics.md §4): the ceil(q n)-th smallest.
double Quantile(const std::vector<double>& v, double q) {
  auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(k, 1, v.size()) - 1];
}

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
  return r;
}

bool WithinNoise(const Repetitions& base, const Repetitions& next, double floor) {
  return base.n >= kMinRepetitions && next.n > 0 && next.p50 >= base.p10 - floor && next.p50 <= base.p90 + floor;
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
