// The GPU tracer of a build without the CUDA toolkit: says so once and records nothing.
#include "collector/gpu_tracer.h"
#include "collector/runtime.h"
#include "core/log.h"

namespace commprof {

std::unique_ptr<GpuTracer> StartGpuTracer(Runtime& rt) {
  COMMPROF_LOG_WARN(
      "GPU tracing unavailable: this commprof was built without the CUDA toolkit (no CUPTI); the job runs on "
      "without CUDA records");
  rt.SetCounter("gpu_tracing_unavailable", 1);
  return nullptr;
}

}  // namespace commprof
