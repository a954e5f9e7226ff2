// How GPU tracing gets switched on in a profiled process (docs/cupti.md "Switching it on"):
// - the CUDA driver calls InitializeInjection() while it initializes (cuInit) when
//   CUDA_INJECTION64_PATH names libcommprof.so, as `commprof run --activities ...cuda...` sets it;
// - the runtime starts it itself when it comes up in a process that has already loaded the CUDA
//   runtime or driver library (EnsureRuntime), because without a working driver the injection
//   variable is never read and the job must still learn why there are
//   no GPU records.
// Both paths end in Runtime::StartGpuTracing, which runs at most once per runtime.
#include <dlfcn.h>

#include "collector/gpu_tracer.h"
#include "collector/runtime.h"
#include "core/config.h"

namespace commprof {

bool ProcessHasCuda() {
  // RTLD_NOLOAD: only asks whether the library is already mapped; never loads it.
  for (const char* soname : {"libcudart.so.13", "libcuda.so.1"}) {
    if (void* h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD)) {
      dlclose(h);
      return true;
    }
  }
  return false;
}

}  // namespace commprof

// The CUDA driver's injection entry point; 1 = success (the driver ignores a failing tool, but the
// job must never notice us, so it is always 1). Idempotent: the driver may initialize more than
// once per process (fork children, cuInit after cudaDeviceReset).
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  commprof::Runtime* rt = commprof::EnsureRuntime(-1, -1);
  if (rt != nullptr) {
    rt->StartGpuTracing();
  }
  return 1;
}
