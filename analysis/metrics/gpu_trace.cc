#include "analysis/metrics/gpu_trace.h"

#include <algorithm>
#include <array>
#include <utility>

namespace commprof {

const char* GpuKernelTypeName(GpuKernelType type) {
  switch (type) {
    case GpuKernelType::kComputation:
      return "computation";
    case GpuKernelType::kCommunication:
      return "communication";
    case GpuKernelType::kMemory:
      return "memory";
    case GpuKernelType::kOther:
      return "other";
  }
  return "other";
}

bool IsLaunchCallName(std::string_view name) {
  static constexpr std::array<std::string_view, 12> kLaunchCalls = {
      "cudaLaunchKernel",      "cudaLaunchKernelExC", "cuLaunchKernel",  "cuLaunchKernelEx",
      "cudaMemcpyAsync",       "cudaMemsetAsync",     "hipLaunchKernel", "hipExtLaunchKernel",
      "hipModuleLaunchKernel", "hipMemcpyAsync",      "hipMemsetAsync",  "hipExtModuleLaunchKernel"};
  for (std::string_view base : kLaunchCalls) {
    // Exactly the base, or the base with a version/stream suffix ("cudaLaunchKernel_v7000",
    // "cudaMemcpyAsync_ptsz"); "cudaLaunchKernelExC" is its own entry, not a suffix.
    if (name == base) {
      return true;
    }
    if (name.size() > base.size() + 1 && name.starts_with(base) && name[base.size()] == '_') {
      return true;
    }
  }
  return false;
}

namespace {

bool TypeOfKind(uint8_t kind, GpuKernelType* type) {
  switch (kind) {
    case COMMPROF_KIND_COMPUTE_KERNEL:
      *type = GpuKernelType::kComputation;
      return true;
    case COMMPROF_KIND_COMM_KERNEL:
      *type = GpuKernelType::kCommunication;
      return true;
    case COMMPROF_KIND_MEMCPY:
    case COMMPROF_KIND_MEMSET:
      *type = GpuKernelType::kMemory;
      return true;
    case COMMPROF_KIND_SYNC:
      *type = GpuKernelType::kOther;
      return true;
    default:
      return false;
  }
}

}  // namespace

RankGpuTraceBuilder::RankGpuTraceBuilder(uint32_t rank, std::vector<std::string> strings, bool comm_kernel_correlation)
    : comm_kernel_correlation_(comm_kernel_correlation) {
  trace_.rank = rank;
  trace_.strings = std::move(strings);
  launch_name_.assign(trace_.strings.size(), -1);
}

void RankGpuTraceBuilder::Add(std::span<const commprof_event> events) {
  for (const commprof_event& e : events) {
    const auto start = static_cast<int64_t>(e.start_ns);
    const auto end = std::max(start, static_cast<int64_t>(e.end_ns));
    if (trace_.events_read == 0) {
      trace_.trace_begin = start;
      trace_.trace_end = end;
    } else {
      trace_.trace_begin = std::min(trace_.trace_begin, start);
      trace_.trace_end = std::max(trace_.trace_end, end);
    }
    ++trace_.events_read;
    GpuKernelType type;
    if (TypeOfKind(e.kind, &type)) {
      const bool linked = e.kind != COMMPROF_KIND_COMM_KERNEL || comm_kernel_correlation_;
      trace_.records.push_back(
          GpuRecord{start, end, e.thread_id, linked ? e.correlation : 0u, e.name_id, e.device, type, e.kind});
    } else if (e.kind == COMMPROF_KIND_CUDA_API && e.correlation != 0) {
      bool launch = false;
      if (e.name_id < launch_name_.size()) {
        int8_t& known = launch_name_[e.name_id];
        if (known < 0) {
          known = IsLaunchCallName(trace_.strings[e.name_id]) ? 1 : 0;
        }
        launch = known == 1;
      }
      trace_.api_calls.push_back(ApiCall{start, end, e.correlation, launch});
    }
  }
}

Result<RankGpuTrace> CollectRankGpuTrace(const ProfileReader& reader, uint32_t rank) {
  auto strings = reader.Strings(rank);
  if (!strings.ok()) {
    return strings.status();
  }
  bool imported = false;
  for (const RankInfo& r : reader.info().ranks) {
    if (r.rank == rank) {
      imported = r.clock_method.starts_with("imported");
    }
  }
  RankGpuTraceBuilder builder(rank, std::move(strings.value()), imported);
  Status st = reader.ForEachEventChunk(rank, [&](std::span<const commprof_event> chunk) { builder.Add(chunk); });
  if (!st.ok()) {
    return st;
  }
  return builder.Finish();
}

}  // namespace commprof
