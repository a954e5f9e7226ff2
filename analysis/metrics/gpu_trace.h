// One rank's GPU records and CUDA API calls, collected in one pass over its events for the
// HTA-compatible analyses (gpu_breakdown.h, gpu_launch_analysis.h; docs/metrics.md §8).
//
// Only what those analyses read is kept: per GPU record (kinds 10-13 and 20) its interval, kind,
// device, stream, name and correlation (32 bytes), per CUDA API call with a correlation (kind 24)
// its interval, correlation and whether it is a launch (24 bytes). Host records, NCCL API and
// collective records, annotations and everything else are skipped as they stream past.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "commprof/event.h"
#include "core/status.h"

namespace commprof {

// HTA's kernel types (docs/metrics.md §8), here taken from the record's kind: the
// importer and the native sources already classified each record (10 computation, 11
// communication, 12/13 memory, 20 synchronization = HTA's "other").
enum class GpuKernelType : uint8_t { kComputation = 0, kCommunication = 1, kMemory = 2, kOther = 3 };
const char* GpuKernelTypeName(GpuKernelType type);  // "computation", "communication", ...

struct GpuRecord {
  int64_t start = 0;
  int64_t end = 0;
  uint32_t stream = 0;       // thread_id of a GPU record
  uint32_t correlation = 0;  // 0: none
  uint32_t name_id = 0;
  uint16_t device = 0;
  GpuKernelType type = GpuKernelType::kOther;
  uint8_t kind = 0;
  int64_t duration() const { return end - start; }
};

struct ApiCall {
  int64_t start = 0;
  int64_t end = 0;
  uint32_t correlation = 0;
  bool launch = false;  // a launch call (IsLaunchCallName)
};

// HTA's launch calls for queue length and launch statistics (docs/metrics.md §8.6): cudaLaunchKernel,
// cudaLaunchKernelExC, cuLaunchKernel, cuLaunchKernelEx, cudaMemcpyAsync, cudaMemsetAsync and
// the hip equivalents (hipLaunchKernel, hipExtLaunchKernel, hipModuleLaunchKernel,
// hipMemcpyAsync, hipMemsetAsync). Kineto names some of them with a "_v7000"/"_ptsz" suffix
// (cudaLaunchKernel_v7000); the suffix after the base name is ignored.
bool IsLaunchCallName(std::string_view name);

struct RankGpuTrace {
  uint32_t rank = 0;
  std::vector<GpuRecord> records;  // in stored order
  std::vector<ApiCall> api_calls;  // kind 24 with a correlation, in stored order
  std::vector<std::string> strings;
  uint64_t events_read = 0;
  int64_t trace_begin = 0;  // first start / last end over all the rank's events (0/0: none)
  int64_t trace_end = 0;
};

// Streams the rank's events once (ProfileReader::ForEachEventChunk). Kind-11 correlations are
// used only for imported ranks (clock method "imported ..."): in a native file they come from the
// NCCL plugin and hold channel ids.
Result<RankGpuTrace> CollectRankGpuTrace(const ProfileReader& reader, uint32_t rank);

// The same from records already in memory (tests, benchmarks); `strings` is the rank's table.
class RankGpuTraceBuilder {
 public:
  // `comm_kernel_correlation`: whether kind-11 records carry a launch correlation. True for
  // imported and CUPTI records; the native NCCL plugin stores the kernel channel id in that field
  // (docs/file-format.md), which must not be mistaken for a launch call's correlation.
  RankGpuTraceBuilder(uint32_t rank, std::vector<std::string> strings, bool comm_kernel_correlation = true);
  void Add(std::span<const commprof_event> events);
  RankGpuTrace Finish() { return std::move(trace_); }

 private:
  RankGpuTrace trace_;
  bool comm_kernel_correlation_ = true;
  std::vector<int8_t> launch_name_;  // per name id: -1 unknown yet, 0/1 IsLaunchCallName
};

}  // namespace commprof
