// The seam between the runtime and its GPU activity source: CUPTI when commprof is
// built with the CUDA toolkit (cupti_source.cc), nothing otherwise (gpu_tracer_absent.cc); CMake
// picks the file, so no #ifdef spreads through the runtime.
#pragma once

#include <memory>

namespace commprof {

class Runtime;

class GpuTracer {
 public:
  virtual ~GpuTracer() = default;
  // Hands CUPTI's completed buffers over now (step boundaries). Never called with a lock held.
  virtual void Flush() = 0;
  // Disables the activity kinds and delivers everything still buffered (process end, before the
  // runtime's final drain); sets the source's counters for the bye frame. Idempotent.
  virtual void Stop() = 0;
};

// Starts GPU activity tracing for `rt` (which activities: rt.Records(kActivityCuda/Memory)).
// Null, with one log line naming the failed call and a `gpu_tracing_unavailable` counter, when
// tracing is not possible (no GPU or driver, no libcupti, another CUPTI subscriber, ...): the job
// runs on without GPU records.
std::unique_ptr<GpuTracer> StartGpuTracer(Runtime& rt);

// Whether the process has loaded the CUDA runtime or driver library (checked without loading
// either): the runtime's cue to start GPU tracing when the driver's injection hook cannot fire.
bool ProcessHasCuda();

}  // namespace commprof
