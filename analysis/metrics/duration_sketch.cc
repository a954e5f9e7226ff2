#include "analysis/metrics/duration_sketch.h"

#include <algorithm>
#include <cmath>

#include "analysis/metrics/nearest_rank.h"

namespace commprof {

size_t DurationSketch::BucketOf(int64_t ns) {
  // Bucket b holds [kGrowth^b, kGrowth^(b+1)); ns >= 1 here.
  return static_cast<size_t>(std::floor(std::log(static_cast<double>(ns)) / std::log(kGrowth)));
}

void DurationSketch::AddToHistogram(int64_t ns) {
  if (ns <= 0) {
    ++zeros_;
    return;
  }
  const size_t b = BucketOf(ns);
  if (b >= histogram_.size()) {
    histogram_.resize(b + 1, 0);
  }
  ++histogram_[b];
}

void DurationSketch::Add(int64_t ns) {
  min_ = count_ == 0 ? ns : std::min(min_, ns);
  max_ = count_ == 0 ? ns : std::max(max_, ns);
  ++count_;
  if (!overflowed_) {
    if (samples_.size() < exact_limit_) {
      samples_.push_back(ns);
      return;
    }
    // The row outgrew the exact regime: from now on only the histogram (bounded memory).
    overflowed_ = true;
    for (int64_t s : samples_) {
      AddToHistogram(s);
    }
    samples_.clear();
    samples_.shrink_to_fit();
  }
  AddToHistogram(ns);
}

int64_t DurationSketch::Quantile(double q) const {
  if (count_ == 0) {
    return 0;
  }
  if (!overflowed_) {
    return NearestRank(samples_, q);
  }
  const auto k = std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))), 1, count_);
  uint64_t seen = zeros_;
  if (seen >= k) {
    return std::max<int64_t>(0, min_);
  }
  for (size_t b = 0; b < histogram_.size(); ++b) {
    seen += histogram_[b];
    if (seen >= k) {
      const double mid = std::pow(kGrowth, static_cast<double>(b) + 0.5);
      return std::clamp(static_cast<int64_t>(std::llround(mid)), min_, max_);
    }
  }
  return max_;
}

}  // namespace commprof
