// HTA's per-stream and launch analyses of one rank (docs/metrics.md
// §8.3, 8.5, 8.6): where each stream's idle time goes (host_wait / kernel_wait / other), the
// launch-queue length step function, and the launch-call to GPU-record statistics. All three
// link a GPU record to the CUDA API call (kind 24) with the same correlation id.
//
// A stream is (device, thread_id) of a GPU record. Times are int64 ns on the rank's own clock.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/metrics/gpu_trace.h"

namespace commprof {

// ---- idle time per stream (HTA get_idle_time_breakdown) ----

struct StreamIdle {
  uint16_t device = 0;
  uint32_t stream = 0;
  uint64_t records = 0;  // kernels, memcpy and memset on the stream (sync records are not)
  int64_t span_ns = 0;   // first start to last end on the stream
  int64_t busy_ns = 0;   // |union of its records|; idle = span - busy
  int64_t host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
  uint64_t host_wait_gaps = 0, kernel_wait_gaps = 0, other_gaps = 0;
  int64_t idle_ns() const { return host_wait_ns + kernel_wait_ns + other_ns; }
};

struct IdleBreakdownOptions {
  // HTA's consecutive_kernel_delay: its docs say 30 ns, but HTA compares in trace units (µs), so
  // its effective default is 30 µs.
  int64_t consecutive_kernel_delay_ns = 30'000;
};

// Per stream, sorted by (device, stream): each gap between a record and the latest end before
// it is host_wait when the record's launch call started after that end, else kernel_wait when
// the gap is shorter than the threshold, else other.
std::vector<StreamIdle> ComputeIdleBreakdown(const RankGpuTrace& trace, const IdleBreakdownOptions& options = {});

// ---- queue length per stream (HTA trace_counters) ----

constexpr int64_t kCudaMaxLaunchQueuePerStream = 1024;  // CUDA_MAX_LAUNCH_QUEUE_PER_STREAM in HTA

struct StreamQueueLength {
  uint16_t device = 0;
  uint32_t stream = 0;
  uint64_t count = 0;  // samples: one per change of the step function
  double mean = 0.0, min = 0.0, p25 = 0.0, p50 = 0.0, p75 = 0.0, max = 0.0;  // over the samples
  int64_t blocked_ns = 0;                                                    // time with queue length >= 1024
  double blocked_ratio = 0;  // blocked_ns / the rank's trace span (first to last event of any kind)
};

std::vector<StreamQueueLength> ComputeQueueLength(const RankGpuTrace& trace);

// ---- launch statistics (HTA cuda_kernel_analysis) ----

struct DurationSummary {
  uint64_t count = 0;
  double mean = 0.0, p50 = 0.0, p95 = 0.0;
  int64_t max = 0;
};

constexpr int64_t kLaunchDelayOutlierNs = 100'000;  // HTA flags launch delays over 100 µs
constexpr int64_t kRuntimeOutlierNs = 50'000;       // and launch calls over 50 µs (runtime_cutoff)

struct LaunchStats {
  uint64_t pairs = 0;                  // GPU records whose correlation names a launch call
  uint64_t launches_without_gpu = 0;   // launch calls no GPU record correlates with
  DurationSummary cpu_duration;        // launch.end - launch.start
  DurationSummary gpu_duration;        // record.end - record.start
  DurationSummary launch_delay;        // max(0, record.start - launch.end)
  uint64_t launch_delay_outliers = 0;  // launch_delay > 100 µs
  uint64_t cpu_duration_outliers = 0;  // cpu_duration > 50 µs
  uint64_t short_kernels = 0;          // gpu_duration < cpu_duration
};

LaunchStats ComputeLaunchStats(const RankGpuTrace& trace);

// The q-quantile (0..1) of sorted values with linear interpolation between the two nearest
// ranks (numpy's and pandas' default); 0 for no values.
double Quantile(const std::vector<int64_t>& sorted, double q);

}  // namespace commprof
