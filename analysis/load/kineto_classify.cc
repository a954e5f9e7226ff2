#include "analysis/load/kineto_classify.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/hash.h"

namespace commprof::kineto {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool Contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// Lower-case with '_' removed, so "all_reduce", "allreduce" and "AllReduce" compare equal.
std::string Fold(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '_') {
      continue;
    }
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

}  // namespace

Category CategoryOf(std::string_view cat) {
  if (TextIs(cat, "kernel") || TextIs(cat, "Kernel")) {
    return Category::kKernel;
  }
  if (TextIs(cat, "gpu_memcpy") || TextIs(cat, "Memcpy")) {
    return Category::kMemcpy;
  }
  if (TextIs(cat, "gpu_memset") || TextIs(cat, "Memset")) {
    return Category::kMemset;
  }
  if (TextIs(cat, "cuda_sync")) {
    return Category::kCudaSync;
  }
  if (TextIs(cat, "cuda_runtime") || TextIs(cat, "cuda_driver") || TextIs(cat, "Runtime")) {
    return Category::kRuntime;
  }
  if (TextIs(cat, "cpu_op") || TextIs(cat, "operator")) {
    return Category::kCpuOp;
  }
  if (TextIs(cat, "user_annotation")) {
    return Category::kUserAnnotation;
  }
  if (TextIs(cat, "gpu_user_annotation")) {
    return Category::kGpuAnnotation;
  }
  if (TextIs(cat, "python_function")) {
    return Category::kPythonFunction;
  }
  if (TextIs(cat, "cpu_instant_event")) {
    return Category::kInstant;
  }
  if (TextIs(cat, "ac2g") || TextIs(cat, "async_cpu_to_gpu") || TextIs(cat, "fwdbwd")) {
    return Category::kFlow;
  }
  if (TextIs(cat, "Trace")) {
    return Category::kTraceSpan;
  }
  if (TextIs(cat, "cuda_profiler_range") || TextStartsWith(cat, "mtia_")) {
    return Category::kOther;
  }
  return Category::kUnknown;
}

KernelClass ClassifyKernel(std::string_view n) {
  // Rule 1: (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*). Unlike HTA, `hipMemcpy...`/`hipMemset...`
  // go to memory (HTA's ^hip catches them as communication: a quirk, not a definition).
  const bool hip_memory = TextStartsWith(n, "hipMemcpy") || TextStartsWith(n, "hipMemset");
  if (!hip_memory && (TextStartsWith(n, "nccl") || TextStartsWith(n, "rccl") || TextStartsWith(n, "hip") ||
                      TextStartsWith(n, "hccl") || Contains(n, "ncclKernel") || Contains(n, "ncclDevKernel"))) {
    return KernelClass::kCommunication;
  }
  // Rule 2: (^(hip)?Memcpy)|(^(hip)?Memset)|(^dma).
  if (TextStartsWith(n, "Memcpy") || TextStartsWith(n, "Memset") || hip_memory || TextStartsWith(n, "dma")) {
    return KernelClass::kMemory;
  }
  // Rule 3: computation unless one of HTA's exclusions matches.
  static constexpr std::string_view kPrefixes[] = {"Stream Wait Event",
                                                   "runFunction",
                                                   "job_exe",
                                                   "packet",
                                                   "pe_exe",
                                                   "cpum_exe_subgraph",
                                                   "collective_subgraph_execution"};
  static constexpr std::string_view kAnywhere[] = {"Memcpy", "Memset", "dma"};
  bool excluded = false;
  for (auto p : kPrefixes) {
    excluded = excluded || StartsWith(n, p);
  }
  for (auto p : kAnywhere) {
    excluded = excluded || Contains(n, p);
  }
  // (^.*Sync): any name containing "Sync"; (cuda.*LaunchKernel).
  excluded = excluded || Contains(n, "Sync") || (Contains(n, "cuda") && Contains(n, "LaunchKernel"));
  return excluded ? KernelClass::kOther : KernelClass::kComputation;
}

uint8_t OpFromCollectiveName(std::string_view name) {
  std::string f = Fold(name);
  if (StartsWith(f, "nccl:")) {
    f = f.substr(5);
  }
  // Coalesced / base / tensor variants keep the collective's own prefix.
  if (StartsWith(f, "allreduce")) {
    return COMMPROF_OP_ALLREDUCE;
  }
  if (StartsWith(f, "allgather")) {
    return COMMPROF_OP_ALLGATHER;
  }
  if (StartsWith(f, "reducescatter")) {
    return COMMPROF_OP_REDUCE_SCATTER;
  }
  if (StartsWith(f, "alltoall")) {
    return COMMPROF_OP_ALLTOALL;
  }
  if (StartsWith(f, "broadcast") || f == "bcast") {
    return COMMPROF_OP_BCAST;
  }
  if (StartsWith(f, "reduce")) {
    return COMMPROF_OP_REDUCE;
  }
  if (StartsWith(f, "barrier")) {
    return COMMPROF_OP_BARRIER;
  }
  if (StartsWith(f, "gather")) {
    return COMMPROF_OP_GATHER;
  }
  if (StartsWith(f, "scatter")) {
    return COMMPROF_OP_SCATTER;
  }
  if (StartsWith(f, "sendrecv")) {
    return COMMPROF_OP_SENDRECV;
  }
  if (StartsWith(f, "send")) {
    return COMMPROF_OP_SEND;
  }
  if (StartsWith(f, "recv")) {
    return COMMPROF_OP_RECV;
  }
  return COMMPROF_OP_NONE;
}

uint8_t OpFromKernelName(std::string_view name) {
  for (std::string_view prefix : {"ncclDevKernel_", "ncclKernel_"}) {
    size_t at = name.find(prefix);
    if (at == std::string_view::npos) {
      continue;
    }
    std::string_view rest = name.substr(at + prefix.size());
    rest = rest.substr(0, rest.find_first_of("_("));
    if (rest == "Generic") {
      return COMMPROF_OP_NONE;
    }
    return OpFromCollectiveName(rest);
  }
  return COMMPROF_OP_NONE;
}

Dtype DtypeFromName(std::string_view name) {
  std::string f = Fold(name);
  if (f == "float" || f == "float32") {
    return {COMMPROF_DT_FLOAT32, 4};
  }
  if (f == "double" || f == "float64") {
    return {COMMPROF_DT_FLOAT64, 8};
  }
  if (f == "half" || f == "float16") {
    return {COMMPROF_DT_FLOAT16, 2};
  }
  if (f == "bfloat16") {
    return {COMMPROF_DT_BFLOAT16, 2};
  }
  if (f == "int" || f == "int32") {
    return {COMMPROF_DT_INT32, 4};
  }
  if (f == "long" || f == "int64") {
    return {COMMPROF_DT_INT64, 8};
  }
  if (f == "short" || f == "int16") {
    return {COMMPROF_DT_INT16, 2};
  }
  if (f == "char" || f == "int8") {
    return {COMMPROF_DT_INT8, 1};
  }
  if (f == "byte" || f == "uint8" || f == "bool") {
    return {COMMPROF_DT_UINT8, 1};
  }
  if (StartsWith(f, "float8")) {
    return {COMMPROF_DT_OTHER, 1};
  }
  return {};
}

uint64_t ProcessGroupId(std::string_view pg_name) {
  uint64_t h = Fnv1a64(pg_name);
  h &= ~(1ull << 63);
  return h <= COMMPROF_COMM_WORLD_ID ? h + 2 : h;
}

}  // namespace commprof::kineto
