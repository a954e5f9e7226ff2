// Maps NCCL KernelCh pTimer values (PTX %globaltimer, ns) onto the rank's host clock.
//
// Purpose: NCCL hands the GPU start/stop of each kernel channel but no host time (reference §3);
// the plugin pairs each such GPU reading with a host reading taken in the callback that delivered
// it and fits host = gpu + offset + drift * (gpu - gpu_ref) over a sliding window of pairs.
// Concepts: the callback arrives *after* the GPU wrote the value (the proxy thread polls a ring),
// never before, so host - gpu = offset + delay with delay >= 0: the fit follows the lower envelope
// of the residuals: the minimum per bucket of consecutive pairs gives a few floor points, their
// Theil-Sen slope is the drift, floor points still far above that line (a proxy thread stalled for
// a whole bucket) are rejected and the line refitted, and the offset puts the line through the
// lowest pair of the window.
// Bias: a constant minimum callback latency cannot be told apart from the offset, so converted
// times are late by that minimum (the proxy poll latency, typically a few microseconds).
// Not thread-safe: the owner (one per communicator context) serialises calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace commprof::nccl {

struct CalibrationOptions {
  size_t window = 512;           // pairs kept (oldest dropped)
  size_t buckets = 8;            // lower-envelope points per fit
  size_t refit_every = 64;       // pairs between refits once the window is full (8 while it fills)
  double reject_ns = 5000.0;     // a bucket minimum this far above the line is an outlier
  double max_drift_ppm = 1000.0; // a steeper fit is not a clock: fall back to offset only
};

class GpuClockCalibration {
 public:
  explicit GpuClockCalibration(CalibrationOptions options = {});

  // One pairing: `gpu_ns` read on the device, `host_ns` read when its callback ran.
  void AddPair(uint64_t gpu_ns, uint64_t host_ns);
  // The host time for a GPU time; `gpu_ns` itself while no pair has been seen.
  uint64_t ToHost(uint64_t gpu_ns) const;

  bool calibrated() const { return pairs_seen_ > 0; }
  uint64_t pairs_seen() const { return pairs_seen_; }
  uint64_t outliers_rejected() const { return outliers_rejected_; }
  double offset_ns() const { return static_cast<double>(residual_ref_) + offset_ns_; }  // host - gpu at gpu_ref
  double drift_ppm() const { return drift_ * 1e6; }
  uint64_t gpu_ref() const { return gpu_ref_; }

 private:
  struct Pair {
    double dx;  // gpu - gpu_ref_
    double dy;  // (host - gpu) - residual_ref_
  };
  void Refit();

  CalibrationOptions options_;
  std::vector<Pair> ring_;  // capacity options_.window, oldest at head_ when full
  size_t head_ = 0;
  uint64_t pairs_seen_ = 0;
  uint64_t since_fit_ = 0;
  uint64_t outliers_rejected_ = 0;
  uint64_t gpu_ref_ = 0;
  int64_t residual_ref_ = 0;  // host - gpu of the first pair
  double offset_ns_ = 0.0;   // the fit's host - gpu at gpu_ref_, relative to residual_ref_
  double drift_ = 0.0;  // dimensionless (ns per ns)
  std::vector<Pair> scratch_;
  std::vector<double> slopes_;
};

}  // namespace commprof::nccl
