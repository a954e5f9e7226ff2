// How a Kineto event becomes a commprof record: category -> kind, GPU kernel name -> compute /
// communication / memory, collective names and dtypes -> commprof enums (docs/kineto-import.md has
// the table and the facts these rules rest on).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "commprof/event.h"

namespace commprof::kineto {

// s == lit, written so that the compiler compares the few bytes inline (std::string_view's
// operator== goes through an ordering compare: a memcmp call per test).
template <size_t N>
inline bool TextIs(std::string_view s, const char (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}
template <size_t N>
inline bool TextStartsWith(std::string_view s, const char (&lit)[N]) {
  return s.size() >= N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

// What a trace event category (`cat`) holds.
enum class Category : uint8_t {
  kKernel,          // kernel, Kernel
  kMemcpy,          // gpu_memcpy, Memcpy
  kMemset,          // gpu_memset, Memset
  kCudaSync,        // cuda_sync (GPU-side waits)
  kRuntime,         // cuda_runtime, cuda_driver, Runtime (and the hip equivalents use the same cats)
  kCpuOp,           // cpu_op, operator
  kUserAnnotation,  // user_annotation
  kGpuAnnotation,   // gpu_user_annotation
  kPythonFunction,  // python_function
  kInstant,         // cpu_instant_event
  kFlow,            // ac2g, async_cpu_to_gpu, fwdbwd (links are taken from `correlation` instead)
  kTraceSpan,       // Trace (the profiler's own window)
  kOther,           // known to exist but without a dedicated kind (cuda_profiler_range, mtia_*, ...)
  kUnknown,         // never seen in any reference trace: kept as "other" and counted
};
Category CategoryOf(std::string_view cat);

// HTA's kernel types (docs/kineto-import.md "Kernel classification"), decided by name only.
enum class KernelClass : uint8_t { kCommunication, kMemory, kComputation, kOther };
KernelClass ClassifyKernel(std::string_view name);

// `Collective name` / "nccl:<name>" annotation / kernel-name collective -> enum commprof_op_type
// (COMMPROF_OP_NONE when unknown).
uint8_t OpFromCollectiveName(std::string_view name);
// From an NCCL kernel name: ncclKernel_AllReduce_RING_LL_Sum_float(...) or
// ncclDevKernel_AllReduce_Sum_f32_RING_LL(...); SendRecv -> SENDRECV; Generic -> NONE.
uint8_t OpFromKernelName(std::string_view name);

// PyTorch dtype names ("Float", "BFloat16", ...) -> enum commprof_datatype and element size in
// bytes (0 when unknown).
struct Dtype {
  uint8_t datatype = COMMPROF_DT_NONE;
  uint32_t size = 0;
};
Dtype DtypeFromName(std::string_view name);

// Stable id of a process group: FNV-1a 64 of its name, with bit 63 clear (that bit marks rank-local
// ids) and never 0 or 1 (no communicator / MPI_COMM_WORLD).
uint64_t ProcessGroupId(std::string_view pg_name);
// The group of communication kernels that no source names a process group for.
inline constexpr std::string_view kUnknownProcessGroup = "(unknown process group)";

}  // namespace commprof::kineto
