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

void DurationSketch::MoveSamplesToHistogram() {
  // The row outgrew the exact regime: from now on only the histogram (bounded memory).
  overflowed_ = true;
  for (int64_t s : samples_) {
    AddToHistogram(s);
  }
  samples_.clear();
  samples_.shrink_to_fit();
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
    MoveSamplesToHistogram();
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

void DurationSketch::Merge(const DurationSketch& other) {
  if (other.count_ == 0) {
    return;
  }
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = count_ == 0 ? other.max_ : std::max(max_, other.max_);
  count_ += other.count_;
  if (!overflowed_ && !other.overflowed_ && samples_.size() + other.samples_.size() <= exact_limit_) {
    samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
    return;
  }
  if (!overflowed_) {
    MoveSamplesToHistogram();
  }
  if (!other.overflowed_) {
    for (int64_t s : other.samples_) {
      AddToHistogram(s);
    }
    return;
  }
  zeros_ += other.zeros_;
  if (other.histogram_.size() > histogram_.size()) {
    histogram_.resize(other.histogram_.size(), 0);
  }
  for (size_t b = 0; b < other.histogram_.size(); ++b) {
    histogram_[b] += other.histogram_[b];
  }
}

void DurationSketch::Encode(PartWriter& w) const {
  w.Put<uint64_t>(exact_limit_);
  w.Put(count_);
  w.Put(min_);
  w.Put(max_);
  w.Put<uint8_t>(overflowed_ ? 1 : 0);
  w.Put(zeros_);
  w.PutVector(samples_);
  w.PutVector(histogram_);
}

bool DurationSketch::Decode(PartReader& r) {
  uint64_t limit = 0;
  uint8_t overflowed = 0;
  if (!r.Get(limit) || !r.Get(count_) || !r.Get(min_) || !r.Get(max_) || !r.Get(overflowed) || !r.Get(zeros_) ||
      !r.GetVector(samples_) || !r.GetVector(histogram_) || overflowed > 1 || samples_.size() > limit) {
    return false;
  }
  exact_limit_ = static_cast<size_t>(limit);
  overflowed_ = overflowed != 0;
  return true;
}

}  // namespace commprof
