// HTA's whole-trace GPU breakdowns of one rank, to HTA's definitions (docs/metrics.md
// §8.1, 8.2, 8.4 is the authoritative text):
//  - comm/comp overlap: |C ∩ M| / |M|, C = union of computation kernels (kind 10), M = union of
//    communication kernels (kind 11);
//  - temporal breakdown over all GPU records (kinds 10-13, 20): kernel_time = the span of GPU
//    activity, idle = kernel_time - |union|, compute = |C|, non_compute = the rest;
//  - kernel breakdown: time per kernel-type bitmask (computation 1, communication 2, memory 4)
//    and the per-type kernels by total duration, with HTA's `others` bucket.
// All in int64 ns on the rank's own clock; nothing is rounded to µs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/metrics/gpu_trace.h"

namespace commprof {

struct CommCompOverlap {
  bool has_comm = false;   // false: no communication kernels, ratio undefined (HTA gives NaN)
  int64_t comm_ns = 0;     // |M|
  int64_t compute_ns = 0;  // |C|
  int64_t overlap_ns = 0;  // |C ∩ M|
  double ratio = 0.0;      // overlap_ns / comm_ns
  double pctg = 0.0;       // round(100 * ratio, 2)
};

struct TemporalBreakdown {
  int64_t kernel_time_ns = 0;  // last end - first start of the GPU records
  int64_t idle_ns = 0;
  int64_t compute_ns = 0;
  int64_t non_compute_ns = 0;
  double idle_pctg = 0.0;  // round(100 * x / kernel_time, 2)
  double compute_pctg = 0.0;
  double non_compute_pctg = 0.0;
};

// Bits of a kernel-type mask (HTA's KernelType bits).
constexpr uint32_t kMaskComputation = 1, kMaskCommunication = 2, kMaskMemory = 4;
// "computation", "communication overlapping computation", ... for a non-zero mask.
std::string KernelTypeMaskName(uint32_t mask);

struct KernelTypeTime {
  uint32_t mask = 0;
  std::string name;
  int64_t time_ns = 0;
  double pctg = 0.0;  // round(100 * time / Σ time over all masks, 2)
};

struct KernelStats {
  std::string name;  // "others" for the bucket
  uint64_t count = 0;
  int64_t sum_ns = 0;
  int64_t max_ns = 0;
  int64_t min_ns = 0;
  double mean_ns = 0.0;
  double std_ns = 0.0;  // sample standard deviation (n - 1); 0 for a single kernel
};

struct KernelTypeTop {
  GpuKernelType type = GpuKernelType::kComputation;
  uint64_t distinct_names = 0;
  std::vector<KernelStats> kernels;  // by sum, descending; `others` last when present
};

struct KernelBreakdown {
  std::vector<KernelTypeTime> by_mask;  // by mask, only masks with time
  std::vector<KernelTypeTop> top;       // computation, communication, memory (types with kernels)
};

struct KernelBreakdownOptions {
  uint32_t num_kernels = 10;    // HTA's num_kernels
  double duration_ratio = 0.8;  // HTA's duration_ratio
};

struct GpuBreakdown {
  uint64_t gpu_records = 0;  // 0: every part below is "no GPU records"
  CommCompOverlap overlap;
  TemporalBreakdown temporal;
  KernelBreakdown kernels;
};

// round(100 * num / den, 2), 0 when den == 0.
double Pctg(double num, double den);

GpuBreakdown ComputeGpuBreakdown(const RankGpuTrace& trace, const KernelBreakdownOptions& options = {});

}  // namespace commprof
