// Maps NCCL KernelCh pTimer values (PTX %globaltimer, ns) onto the rank's host clock.
//
// Purpose: NCCL hands the GPU start/stop of each kernel channel but no host time (docs/nccl-plugin.md §3);
// the plugin pairs each such GPU reading with a host reading taken in the callback that delivered
// it and fits host = gpu + offset + drift * (gpu - gpu_ref) over a sliding window of pairs.
// Concepts: the callback arrives *after* the GPU wrote the value (the proxy thread polls a ring),
// never before, so host - gpu = offset + delay with delay >= 0: the fit follows the lower envelope
// of the residuals: the minimum per bucket of consecutive pairs gives a few floor points, their
// Theil-Sen slope is the drift, floor points still far above that line (a proxy thread stalled for
// a whole bucket) are rejected and the line refitted, and the offset puts the line through the
// lowest pair of the window.
// Cost: a full window splits into blocks (one per bucket) whose minima and dx ranges are kept as
// pairs arrive, so a refit of it reads the block minima and walks only the blocks that can hold
// the floor; refits are also spaced by GPU time (min_refit_gpu_ns), so a high event rate does not
// refit every few microseconds.
// Bias: a constant minimum callback latency cannot be told apart from the offset, so converted
// times are late by that minimum (the proxy poll latency, typically a few microseconds).
// GpuClockCalibration is not thread-safe; SharedGpuClock (below) shares one between concurrent
// callbacks without a lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace commprof::nccl {

struct CalibrationOptions {
  size_t window = 512;                 // pairs kept (oldest dropped)
  size_t buckets = 8;                  // lower-envelope points per fit
  size_t refit_every = 64;             // pairs between refits once the window is full (8 while it fills)
  double min_refit_gpu_ns = 100000.0;  // ... and GPU ns between them (a high event rate refits less)
  double reject_ns = 5000.0;           // a bucket minimum this far above the line is an outlier
  double max_drift_ppm = 1000.0;       // a steeper fit is not a clock: fall back to offset only
};

class GpuClockCalibration {
 public:
  explicit GpuClockCalibration(CalibrationOptions options = {});

  // One pairing: `gpu_ns` read on the device, `host_ns` read when its callback ran.
  void AddPair(uint64_t gpu_ns, uint64_t host_ns);
  // The host time for a GPU time; `gpu_ns` itself while no pair has been seen.
  uint64_t ToHost(uint64_t gpu_ns) const;
  // The shift ToHost adds: residual_ref + round(offset + drift * (gpu - gpu_ref)).
  int64_t residual_ref() const { return residual_ref_; }
  double fit_offset_ns() const { return offset_ns_; }  // relative to residual_ref()
  double drift() const { return drift_; }

  // About how many more pairs AddPair takes before it refits (1 while every pair refits).
  size_t PairsUntilRefit() const;

  bool calibrated() const { return pairs_seen_ > 0; }
  uint64_t pairs_seen() const { return pairs_seen_; }
  uint64_t outliers_rejected() const { return outliers_rejected_; }
  uint64_t fits() const { return fits_; }
  size_t window() const { return options_.window; }
  double offset_ns() const { return static_cast<double>(residual_ref_) + offset_ns_; }  // host - gpu at gpu_ref
  double drift_ppm() const { return drift_ * 1e6; }
  uint64_t gpu_ref() const { return gpu_ref_; }

 private:
  struct Pair {
    double dx;  // gpu - gpu_ref_
    double dy;  // (host - gpu) - residual_ref_
  };
  void Refit();
  // Per block of the window (when it has blocks): where its lowest dy is and its dx range.
  struct Block {
    size_t min_at;
    double min_dy;
    double dx_lo, dx_hi;
  };
  static size_t FirstMinDy(const Pair* p, size_t n);
  static double FloorOf(const Pair* p, size_t n, double slope);

  CalibrationOptions options_;
  std::vector<Pair> ring_;  // capacity options_.window, oldest at head_ when full
  size_t head_ = 0;
  uint64_t pairs_seen_ = 0;
  uint64_t since_fit_ = 0;
  uint64_t outliers_rejected_ = 0;
  uint64_t fits_ = 0;
  double last_fit_dx_ = 0.0;  // dx of the pair that triggered the last refit
  uint64_t gpu_ref_ = 0;
  int64_t residual_ref_ = 0;  // host - gpu of the first pair
  double offset_ns_ = 0.0;    // the fit's host - gpu at gpu_ref_, relative to residual_ref_
  double drift_ = 0.0;        // dimensionless (ns per ns)
  size_t block_ = 0;          // pairs per block, 0: no blocks (the window does not split evenly)
  std::vector<Block> blocks_;
  size_t block_at_ = 0, block_fill_ = 0;  // the block the last pair went into, and its pairs so far
  std::vector<Pair> scratch_;
  std::vector<double> slopes_;
};

// llround(x) for |x| < 2^52, inline (libm's llround is a call): round half away from zero.
inline int64_t RoundToInt64(double x) {
  auto t = static_cast<int64_t>(x);  // toward zero; x - t is exact in this range
  double frac = x - static_cast<double>(t);
  if (frac >= 0.5) {
    return t + 1;
  }
  if (frac <= -0.5) {
    return t - 1;
  }
  return t;
}

// One GpuClockCalibration shared by the callbacks of one communicator, which arrive concurrently
// (application thread, proxy thread, CUDA callback threads), with no lock on their path.
//
// Concepts: a kernel channel's pairs (start, stop) go into a bounded lock-free multi-producer
// queue (Vyukov's: one CAS to claim a cell, a sequence number to publish it; a full queue drops
// the sample and counts it). The fit consumes the queue: whichever callback finds enough samples
// waiting (every sample while the calibration is young, then about every refit_every pairs)
// and wins a try-flag drains the queue into the GpuClockCalibration, which refits on its own
// schedule, and publishes the fit; callbacks that lose the flag go on. Conversions read the last
// published fit: two copies, each with a version (a seqlock), the newest named by an index, so a
// reader never waits for a writer (it retries only if two publishes passed during its read).
// Before the first fit is published, conversions use the first queued pair's offset (offset
// only, as GpuClockCalibration with one pair).
// Progress: producers never wait. A producer descheduled between claiming and publishing its cell
// holds the fit back (the drain stops at that cell) until it runs again: the samples behind it
// wait in the queue (or are dropped once it is full) and conversions use the last published fit.
class SharedGpuClock {
 public:
  // The pairs of one kernel channel; a gpu value 0 means "absent" (that pair is skipped).
  struct Sample {
    uint64_t gpu_start = 0, host_start = 0, gpu_stop = 0, host_stop = 0;
  };
  // A published fit: ToHost as GpuClockCalibration's at the time it was published.
  struct Fit {
    uint64_t gpu_ref = 0;
    int64_t residual_ref = 0;
    double offset_ns = 0.0;
    double drift = 0.0;
    bool valid = false;
    uint64_t ToHost(uint64_t gpu_ns) const {
      if (!valid) {
        return gpu_ns;
      }
      double dx = static_cast<double>(static_cast<int64_t>(gpu_ns - gpu_ref));
      return gpu_ns + static_cast<uint64_t>(residual_ref + RoundToInt64(offset_ns + drift * dx));
    }
  };

  explicit SharedGpuClock(CalibrationOptions options = {}, size_t queue_samples = 1024);
  SharedGpuClock(const SharedGpuClock&) = delete;
  SharedGpuClock& operator=(const SharedGpuClock&) = delete;

  // Hot path, any thread: queue the sample; fit first when due and no other thread is fitting.
  void Add(const Sample& s);
  // Any thread: the newest published fit (no lock, no wait).
  Fit Current() const;
  // Drains everything queued and fits, waiting for a concurrent fitter (not for the hot path:
  // finalize and tests).
  void Flush();

  // Any thread: true once the fit has seen a full window of pairs. Until then every pair helps
  // the young fit, so callers add the optional ones (a kernel channel's stop pair) too.
  bool warm() const { return warm_.load(std::memory_order_relaxed); }

  // Read after Flush, with no Add running.
  uint64_t pairs_seen() const { return calibration_.pairs_seen(); }
  uint64_t outliers_rejected() const { return calibration_.outliers_rejected(); }
  uint64_t samples_dropped() const { return dropped_.load(std::memory_order_relaxed); }
  const GpuClockCalibration& calibration() const { return calibration_; }  // after Flush

 private:
  struct alignas(64) Cell {
    std::atomic<uint64_t> seq{0};
    Sample sample;
  };
  struct FitCopy {
    std::atomic<uint32_t> version{0};  // odd while being written
    std::atomic<uint64_t> gpu_ref{0};
    std::atomic<int64_t> residual_ref{0};
    std::atomic<double> offset_ns{0.0};
    std::atomic<double> drift{0.0};
  };
  void Drain();  // the flag holder only
  void Publish();

  const size_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<uint64_t> tail_{0};      // next cell producers claim
  alignas(64) std::atomic<uint64_t> consumed_{0};  // next cell the fit reads (written by the flag holder)
  std::atomic<uint64_t> due_{1};                   // samples waiting that make a fit due
  std::atomic<bool> fitting_{false};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<int64_t> first_residual_{0};
  std::atomic<bool> has_first_{false};
  FitCopy copies_[2];
  std::atomic<uint32_t> newest_{0};  // index into copies_; meaningful once published_
  std::atomic<bool> published_{false};
  std::atomic<bool> warm_{false};
  GpuClockCalibration calibration_;  // the flag holder only
  uint64_t published_fits_ = 0;      // the flag holder only
};

}  // namespace commprof::nccl
