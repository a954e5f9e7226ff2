#include "nccl_hooks/gpu_clock_calibration.h"

#include <algorithm>
#include <cmath>

namespace commprof::nccl {

GpuClockCalibration::GpuClockCalibration(CalibrationOptions options) : options_(options) {
  if (options_.window < 2) options_.window = 2;
  if (options_.buckets < 1) options_.buckets = 1;
  if (options_.refit_every < 1) options_.refit_every = 1;
  ring_.reserve(options_.window);
  scratch_.reserve(options_.buckets);
}

void GpuClockCalibration::AddPair(uint64_t gpu_ns, uint64_t host_ns) {
  // Relative to the first pair: absolute values (~1e18 ns for an epoch-based %globaltimer) would
  // lose 256 ns of precision as doubles.
  auto residual = static_cast<int64_t>(host_ns - gpu_ns);
  if (pairs_seen_ == 0) {
    gpu_ref_ = gpu_ns;
    residual_ref_ = residual;
    offset_ns_ = 0.0;
  }
  Pair p{static_cast<double>(static_cast<int64_t>(gpu_ns - gpu_ref_)), static_cast<double>(residual - residual_ref_)};
  if (ring_.size() < options_.window) {
    ring_.push_back(p);
  } else {
    ring_[head_] = p;
    head_ = (head_ + 1) % ring_.size();
  }
  ++pairs_seen_;
  ++since_fit_;
  // Early on every pair refits (cheap: few pairs), every 8 pairs while the window fills, then
  // every refit_every pairs (a refit walks the window twice: ~1000 steps).
  size_t every = ring_.size() < options_.window ? std::min<size_t>(8, options_.refit_every) : options_.refit_every;
  if (ring_.size() < 4 * options_.buckets || since_fit_ >= every) Refit();
}

void GpuClockCalibration::Refit() {
  since_fit_ = 0;
  const size_t n = ring_.size();
  if (n == 0) return;
  // Lower envelope: the smallest residual per bucket of consecutive pairs (in arrival order).
  size_t buckets = std::min(options_.buckets, n);
  scratch_.clear();
  for (size_t b = 0; b < buckets; ++b) {
    size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
    const Pair* best = nullptr;
    size_t idx = head_ + lo;
    if (idx >= n) idx -= n;
    for (size_t i = lo; i < hi; ++i, ++idx) {
      if (idx == n) idx = 0;
      const Pair& q = ring_[idx];
      if (best == nullptr || q.dy < best->dy) best = &q;
    }
    if (best != nullptr) scratch_.push_back(*best);
  }
  // Slope: Theil-Sen (the median of the pairwise slopes) over the bucket minima, so one bucket
  // that is late as a whole (a partly stalled one) cannot tilt the line; intercept: the median of
  // what the slope leaves.
  auto fit = [&](double& offset, double& slope) {
    slopes_.clear();
    for (size_t i = 0; i < scratch_.size(); ++i)
      for (size_t j = i + 1; j < scratch_.size(); ++j)
        if (scratch_[j].dx != scratch_[i].dx) slopes_.push_back((scratch_[j].dy - scratch_[i].dy) / (scratch_[j].dx - scratch_[i].dx));
    slope = 0.0;
    if (!slopes_.empty()) {
      auto mid = slopes_.begin() + static_cast<std::ptrdiff_t>(slopes_.size() / 2);
      std::nth_element(slopes_.begin(), mid, slopes_.end());
      slope = *mid;
      if (slopes_.size() % 2 == 0) slope = 0.5 * (slope + *std::max_element(slopes_.begin(), mid));
    }
    if (std::fabs(slope) * 1e6 > options_.max_drift_ppm) slope = 0.0;
    slopes_.clear();
    for (const Pair& q : scratch_) slopes_.push_back(q.dy - slope * q.dx);
    auto mid = slopes_.begin() + static_cast<std::ptrdiff_t>(slopes_.size() / 2);
    std::nth_element(slopes_.begin(), mid, slopes_.end());
    offset = *mid;
  };
  double offset = 0, slope = 0;
  fit(offset, slope);
  // Reject the highest point above the line while it is an outlier, keeping at least 3 points.
  while (scratch_.size() > 3) {
    size_t worst = 0;
    double worst_excess = -1e300;
    for (size_t i = 0; i < scratch_.size(); ++i) {
      double excess = scratch_[i].dy - (offset + slope * scratch_[i].dx);
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = i;
      }
    }
    if (worst_excess <= options_.reject_ns) break;
    scratch_.erase(scratch_.begin() + static_cast<std::ptrdiff_t>(worst));
    ++outliers_rejected_;
    fit(offset, slope);
  }
  // The envelope is a floor under every pair of the window (no callback runs before the GPU wrote
  // its value): with the slope fixed, the line goes through the lowest pair.
  double floor = 1e300;
  for (size_t i = 0; i < n; ++i) floor = std::min(floor, ring_[i].dy - slope * ring_[i].dx);
  offset_ns_ = floor;
  drift_ = slope;
}

uint64_t GpuClockCalibration::ToHost(uint64_t gpu_ns) const {
  if (pairs_seen_ == 0) return gpu_ns;
  double dx = static_cast<double>(static_cast<int64_t>(gpu_ns - gpu_ref_));
  int64_t shift = residual_ref_ + static_cast<int64_t>(std::llround(offset_ns_ + drift_ * dx));
  return gpu_ns + static_cast<uint64_t>(shift);
}

}  // namespace commprof::nccl
