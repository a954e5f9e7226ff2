// The nearest-rank quantile every figure of docs/metrics.md that names one uses (§4): the
// ⌈q·n⌉-th smallest of n values (the smallest for q ≤ 1/n), 0 for none.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace commprof {

template <typename T>
T NearestRank(std::vector<T> values, double q) {
  if (values.empty()) {
    return T{};
  }
  std::sort(values.begin(), values.end());
  auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(k, 1, values.size()) - 1];
}

}  // namespace commprof
