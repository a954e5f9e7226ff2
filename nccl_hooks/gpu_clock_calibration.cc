#include "nccl_hooks/gpu_clock_calibration.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace commprof::nccl {

GpuClockCalibration::GpuClockCalibration(CalibrationOptions options) : options_(options) {
  if (options_.window < 2) {
    options_.window = 2;
  }
  if (options_.buckets < 1) {
    options_.buckets = 1;
  }
  if (options_.refit_every < 1) {
    options_.refit_every = 1;
  }
  ring_.reserve(options_.window);
  scratch_.reserve(options_.buckets);
  // Blocks: when the window splits into `buckets` equal blocks and refits come every whole number
  // of blocks, a refit of the full window always finds its head on a block boundary, so its
  // buckets are the blocks and their minima can be kept as pairs arrive.
  const size_t b = options_.window / options_.buckets;
  if (options_.window % options_.buckets == 0 && b > 0 && options_.refit_every % b == 0) {
    block_ = b;
    blocks_.resize(options_.buckets);
  }
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
  size_t pos;
  bool filled = false;
  if (ring_.size() < options_.window) {
    pos = ring_.size();
    ring_.push_back(p);
    filled = ring_.size() == options_.window;
  } else {
    pos = head_;
    ring_[head_] = p;
    if (++head_ == ring_.size()) {
      head_ = 0;
    }
  }
  if (block_ != 0) {
    // pos runs 0, 1, ..., window - 1, 0, ...: the block index and offset follow it without a division.
    if (pos == 0) {
      block_at_ = 0, block_fill_ = 0;
    }
    if (block_fill_ == block_) {
      ++block_at_, block_fill_ = 0;
    }
    Block& k = blocks_[block_at_];
    if (block_fill_++ == 0) {
      k = {pos, p.dy, p.dx, p.dx};
    } else {
      if (p.dy < k.min_dy) {
        k.min_at = pos, k.min_dy = p.dy;
      }
      k.dx_lo = std::min(k.dx_lo, p.dx);
      k.dx_hi = std::max(k.dx_hi, p.dx);
    }
  }
  ++pairs_seen_;
  ++since_fit_;
  // Early on every pair refits (cheap: few pairs), every 8 pairs while the window fills, once when
  // it is full (so later refits start on a block boundary), then every refit_every pairs but at
  // most once per min_refit_gpu_ns of GPU time (at a high event rate the line cannot have moved).
  if (ring_.size() < options_.window) {
    if (ring_.size() < 4 * options_.buckets || since_fit_ >= std::min<size_t>(8, options_.refit_every)) {
      Refit();
    }
  } else if (filled || (since_fit_ >= options_.refit_every && (block_ == 0 || head_ % block_ == 0) &&
                        p.dx - last_fit_dx_ >= options_.min_refit_gpu_ns)) {
    // (Held back by min_refit_gpu_ns, a refit waits for the next block boundary, so that it can
    // read the block minima.)
    Refit();
  }
  if (since_fit_ == 0) {
    last_fit_dx_ = p.dx;
  }
}

// The index of the first smallest dy in p[0, n), n >= 1. Four lanes, each keeping its first
// minimum in registers: one running minimum through a pointer is a chain of dependent loads.
size_t GpuClockCalibration::FirstMinDy(const Pair* p, size_t n) {
  double v0 = p[0].dy, v1 = 1e300, v2 = 1e300, v3 = 1e300;
  size_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  size_t j = 1;
  for (; j + 4 <= n; j += 4) {
    if (p[j].dy < v0) {
      v0 = p[j].dy, i0 = j;
    }
    if (p[j + 1].dy < v1) {
      v1 = p[j + 1].dy, i1 = j + 1;
    }
    if (p[j + 2].dy < v2) {
      v2 = p[j + 2].dy, i2 = j + 2;
    }
    if (p[j + 3].dy < v3) {
      v3 = p[j + 3].dy, i3 = j + 3;
    }
  }
  for (; j < n; ++j) {
    if (p[j].dy < v0) {
      v0 = p[j].dy, i0 = j;
    }
  }
  // Each lane saw its indices in order; across lanes, ties go to the earliest index.
  auto better = [](double va, size_t ia, double vb, size_t ib) { return va < vb || (va == vb && ia < ib); };
  if (better(v1, i1, v0, i0)) {
    v0 = v1, i0 = i1;
  }
  if (better(v3, i3, v2, i2)) {
    v2 = v3, i2 = i3;
  }
  if (better(v2, i2, v0, i0)) {
    i0 = i2;
  }
  return i0;
}

// min(dy - slope * dx) over p[0, n). Four independent minima: one running minimum is a chain of
// dependent instructions.
double GpuClockCalibration::FloorOf(const Pair* r, size_t n, double slope) {
  double f0 = 1e300, f1 = 1e300, f2 = 1e300, f3 = 1e300;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    f0 = std::min(f0, r[i].dy - slope * r[i].dx);
    f1 = std::min(f1, r[i + 1].dy - slope * r[i + 1].dx);
    f2 = std::min(f2, r[i + 2].dy - slope * r[i + 2].dx);
    f3 = std::min(f3, r[i + 3].dy - slope * r[i + 3].dx);
  }
  for (; i < n; ++i) {
    f0 = std::min(f0, r[i].dy - slope * r[i].dx);
  }
  return std::min(std::min(f0, f1), std::min(f2, f3));
}

size_t GpuClockCalibration::PairsUntilRefit() const {
  if (ring_.size() + 1 < 4 * options_.buckets || ring_.size() + 1 == options_.window) {
    return 1;
  }
  // (Throttled by min_refit_gpu_ns, a due refit may wait longer: then this is a lower bound.)
  size_t every = ring_.size() + 1 < options_.window ? std::min<size_t>(8, options_.refit_every) : options_.refit_every;
  // Past due but held back by min_refit_gpu_ns: the next block (or refit_every pairs) as one batch.
  size_t left = since_fit_ >= every       ? (block_ != 0 ? block_ - head_ % block_ : every)
                : since_fit_ + 1 >= every ? 1
                                          : every - since_fit_;
  if (ring_.size() < options_.window) {
    left = std::min(left, options_.window - ring_.size());  // the fill refit
  }
  return left;
}

void GpuClockCalibration::Refit() {
  since_fit_ = 0;
  ++fits_;
  const size_t n = ring_.size();
  if (n == 0) {
    return;
  }
  // Lower envelope: the smallest residual per bucket of consecutive pairs (in arrival order).
  size_t buckets = std::min(options_.buckets, n);
  scratch_.clear();
  const bool by_block = block_ != 0 && n == options_.window && head_ % block_ == 0;
  if (by_block) {
    // Bucket b is block (head_ / block_ + b) mod buckets, its minimum kept by AddPair.
    for (size_t b = 0, k = head_ / block_; b < buckets; ++b, k = k + 1 == buckets ? 0 : k + 1) {
      scratch_.push_back(ring_[blocks_[k].min_at]);
    }
  } else {
    for (size_t b = 0; b < buckets; ++b) {
      size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
      if (lo == hi) {
        continue;
      }
      // The bucket in arrival order is ring_[head_ + lo, head_ + hi) modulo n: at most two
      // contiguous runs; the first smallest pair wins (ties: the earlier pair).
      size_t first = head_ + lo;
      if (first >= n) {
        first -= n;
      }
      size_t count = hi - lo;
      size_t run1 = std::min(count, n - first);
      const Pair* best = &ring_[first + FirstMinDy(&ring_[first], run1)];
      if (count > run1) {
        const Pair* wrapped = &ring_[FirstMinDy(ring_.data(), count - run1)];
        if (wrapped->dy < best->dy) {
          best = wrapped;
        }
      }
      scratch_.push_back(*best);
    }
  }
  // Slope: Theil-Sen (the median of the pairwise slopes) over the bucket minima, so one bucket
  // that is late as a whole (a partly stalled one) cannot tilt the line; intercept: the median of
  // what the slope leaves.
  auto fit = [&](double& offset, double& slope) {
    slopes_.clear();
    for (size_t i = 0; i < scratch_.size(); ++i) {
      for (size_t j = i + 1; j < scratch_.size(); ++j) {
        if (scratch_[j].dx != scratch_[i].dx) {
          slopes_.push_back((scratch_[j].dy - scratch_[i].dy) / (scratch_[j].dx - scratch_[i].dx));
        }
      }
    }
    slope = 0.0;
    if (!slopes_.empty()) {
      auto mid = slopes_.begin() + static_cast<std::ptrdiff_t>(slopes_.size() / 2);
      std::nth_element(slopes_.begin(), mid, slopes_.end());
      slope = *mid;
      if (slopes_.size() % 2 == 0) {
        slope = 0.5 * (slope + *std::max_element(slopes_.begin(), mid));
      }
    }
    if (std::fabs(slope) * 1e6 > options_.max_drift_ppm) {
      slope = 0.0;
    }
    slopes_.clear();
    for (const Pair& q : scratch_) {
      slopes_.push_back(q.dy - slope * q.dx);
    }
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
    if (worst_excess <= options_.reject_ns) {
      break;
    }
    scratch_.erase(scratch_.begin() + static_cast<std::ptrdiff_t>(worst));
    ++outliers_rejected_;
    fit(offset, slope);
  }
  // The envelope is a floor under every pair of the window (no callback runs before the GPU wrote
  // its value): with the slope fixed, the line goes through the lowest pair.
  if (by_block) {
    // Exact, without walking every pair: a block's pairs lie at or above its lowest dy minus the
    // most slope * dx can take off in its dx range, so only blocks whose bound is under the best
    // value seen so far (that of some block's lowest pair) are walked.
    double best = 1e300;
    for (const Block& k : blocks_) {
      best = std::min(best, k.min_dy - slope * ring_[k.min_at].dx);
    }
    for (size_t k = 0; k < blocks_.size(); ++k) {
      const Block& blk = blocks_[k];
      double bound = blk.min_dy - std::max(slope * blk.dx_lo, slope * blk.dx_hi);
      if (bound > best + 1e-3) {
        continue;  // margin: rounding of the bound itself
      }
      best = std::min(best, FloorOf(&ring_[k * block_], block_, slope));
    }
    offset_ns_ = best;
  } else {
    offset_ns_ = FloorOf(ring_.data(), n, slope);
  }
  drift_ = slope;
}

uint64_t GpuClockCalibration::ToHost(uint64_t gpu_ns) const {
  if (pairs_seen_ == 0) {
    return gpu_ns;
  }
  double dx = static_cast<double>(static_cast<int64_t>(gpu_ns - gpu_ref_));
  int64_t shift = residual_ref_ + RoundToInt64(offset_ns_ + drift_ * dx);
  return gpu_ns + static_cast<uint64_t>(shift);
}

// ------------------------------------------------------------------ SharedGpuClock

namespace {
size_t PowerOfTwoAtLeast(size_t n) {
  size_t p = 2;
  while (p < n) {
    p <<= 1;
  }
  return p;
}
}  // namespace

SharedGpuClock::SharedGpuClock(CalibrationOptions options, size_t queue_samples)
    : mask_(PowerOfTwoAtLeast(queue_samples) - 1), cells_(new Cell[mask_ + 1]), calibration_(options) {
  for (size_t i = 0; i <= mask_; ++i) {
    cells_[i].seq.store(i, std::memory_order_relaxed);
  }
}

void SharedGpuClock::Add(const Sample& s) {
  if (s.gpu_start == 0 && s.gpu_stop == 0) {
    return;
  }
  if (!has_first_.load(std::memory_order_acquire)) {
    // Until a fit is published, conversions use the first pair's offset (the lower residual of
    // this sample's pairs). Racing first samples may each store theirs: any one is right.
    int64_t r = INT64_MAX;
    if (s.gpu_start != 0) {
      r = static_cast<int64_t>(s.host_start - s.gpu_start);
    }
    if (s.gpu_stop != 0) {
      r = std::min(r, static_cast<int64_t>(s.host_stop - s.gpu_stop));
    }
    first_residual_.store(r, std::memory_order_relaxed);
    has_first_.store(true, std::memory_order_release);
  }
  // Claim a cell (Vyukov's bounded queue): its seq equals our position when it is free.
  uint64_t pos = tail_.load(std::memory_order_relaxed);
  Cell* cell;
  bool drained = false;
  for (;;) {
    cell = &cells_[pos & mask_];
    uint64_t seq = cell->seq.load(std::memory_order_acquire);
    auto dif = static_cast<int64_t>(seq - pos);
    if (dif == 0) {
      if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        break;
      }
    } else if (dif < 0) {
      // Full: drain it ourselves if nobody is fitting (once), else drop the sample and count it
      // (the fitter is behind by a whole queue).
      if (!drained && !fitting_.exchange(true, std::memory_order_acquire)) {
        Drain();
        fitting_.store(false, std::memory_order_release);
        drained = true;
        pos = tail_.load(std::memory_order_relaxed);
        continue;
      }
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    } else {
      pos = tail_.load(std::memory_order_relaxed);
    }
  }
  cell->sample = s;
  cell->seq.store(pos + 1, std::memory_order_release);
  // Fit when enough samples wait and nobody else is fitting; otherwise go on.
  if (pos + 1 - consumed_.load(std::memory_order_relaxed) >= due_.load(std::memory_order_relaxed) &&
      !fitting_.exchange(true, std::memory_order_acquire)) {
    Drain();
    fitting_.store(false, std::memory_order_release);
  }
}

void SharedGpuClock::Drain() {
  uint64_t pos = consumed_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & mask_];
    if (cell.seq.load(std::memory_order_acquire) != pos + 1) {
      break;  // empty, or still being written
    }
    const Sample s = cell.sample;
    cell.seq.store(pos + mask_ + 1, std::memory_order_release);  // free for the next lap
    ++pos;
    if (s.gpu_start != 0) {
      calibration_.AddPair(s.gpu_start, s.host_start);
    }
    if (s.gpu_stop != 0) {
      calibration_.AddPair(s.gpu_stop, s.host_stop);
    }
  }
  consumed_.store(pos, std::memory_order_relaxed);
  if (calibration_.pairs_seen() >= calibration_.window()) {
    warm_.store(true, std::memory_order_relaxed);
  }
  // The next drain is due when GpuClockCalibration will refit (a sample is one pair, the kernel
  // channel's start, unless a pTimer was missing): every sample while it refits on every pair (so
  // a single thread's conversions include its own pairs), then about every refit_every pairs.
  due_.store(std::clamp<size_t>(calibration_.PairsUntilRefit(), 1, (mask_ + 1) / 2), std::memory_order_relaxed);
  if (calibration_.fits() != published_fits_) {
    Publish();
  }
}

void SharedGpuClock::Publish() {
  published_fits_ = calibration_.fits();
  // Write the copy readers are not directed to, then direct them to it.
  const uint32_t idx = published_.load(std::memory_order_relaxed) ? newest_.load(std::memory_order_relaxed) ^ 1u : 0u;
  FitCopy& c = copies_[idx];
  const uint32_t v = c.version.load(std::memory_order_relaxed);
  c.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  c.gpu_ref.store(calibration_.gpu_ref(), std::memory_order_relaxed);
  c.residual_ref.store(calibration_.residual_ref(), std::memory_order_relaxed);
  c.offset_ns.store(calibration_.fit_offset_ns(), std::memory_order_relaxed);
  c.drift.store(calibration_.drift(), std::memory_order_relaxed);
  c.version.store(v + 2, std::memory_order_release);
  newest_.store(idx, std::memory_order_release);
  published_.store(true, std::memory_order_release);
}

SharedGpuClock::Fit SharedGpuClock::Current() const {
  Fit f;
  if (!published_.load(std::memory_order_acquire)) {
    if (has_first_.load(std::memory_order_acquire)) {
      f.residual_ref = first_residual_.load(std::memory_order_relaxed);
      f.valid = true;  // offset only: gpu_ref, offset_ns and drift stay 0
    }
    return f;
  }
  for (;;) {
    const FitCopy& c = copies_[newest_.load(std::memory_order_acquire)];
    const uint32_t v1 = c.version.load(std::memory_order_acquire);
    f.gpu_ref = c.gpu_ref.load(std::memory_order_relaxed);
    f.residual_ref = c.residual_ref.load(std::memory_order_relaxed);
    f.offset_ns = c.offset_ns.load(std::memory_order_relaxed);
    f.drift = c.drift.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    // A torn read means the writer started on this copy again, so the other one is now whole.
    if ((v1 & 1u) == 0 && c.version.load(std::memory_order_relaxed) == v1) {
      break;
    }
  }
  f.valid = true;
  return f;
}

void SharedGpuClock::Flush() {
  while (fitting_.exchange(true, std::memory_order_acquire)) {
    std::this_thread::yield();
  }
  Drain();
  fitting_.store(false, std::memory_order_release);
}

}  // namespace commprof::nccl
