// The public C API (include/commprof/commprof.h). Outside a profiled run every call is a no-op.
// Also the internal entry points of collector/internal_api.h (the NCCL profiler plugin's way in).
#include "collector/event_builder.h"
#include "collector/internal_api.h"
#include "collector/nvtx_tool.h"
#include "collector/runtime.h"
#include "commprof/commprof.h"

using commprof::EnsureRuntime;
using commprof::Runtime;

namespace {

Runtime* Rt() {
  Runtime* rt = commprof::ActiveRuntime();
  return rt != nullptr ? rt : EnsureRuntime(-1, -1);
}

commprof_event Instant(uint8_t kind, uint64_t now) { return commprof::BlankEvent(kind, now, now); }

// The runtime when it records the C API's ranges, marks and steps (`--activities` includes cpu).
Runtime* CpuRt() {
  Runtime* rt = Rt();
  return rt != nullptr && rt->Records(commprof::kActivityCpu) ? rt : nullptr;
}

}  // namespace

extern "C" {

uint32_t commprof_register_string(const char* name) {
  Runtime* rt = Rt();
  return rt != nullptr ? rt->Intern(name) : 0;
}

void commprof_range_push_id(uint32_t name_id) {
  Runtime* rt = CpuRt();
  if (rt == nullptr) {
    return;
  }
  commprof::ThreadState* t = rt->Thread();
  if (t->range_depth >= commprof::ThreadState::kMaxRangeDepth) {
    ++t->range_depth;  // keep push/pop balanced; the overflowing range itself is dropped
    rt->CountRangeOverflow();
    return;
  }
  t->range_start[t->range_depth] = rt->Now();
  t->range_name[t->range_depth] = name_id;
  ++t->range_depth;
}

void commprof_range_push(const char* name) {
  Runtime* rt = CpuRt();
  if (rt != nullptr) {
    commprof_range_push_id(rt->Intern(name));
  }
}

void commprof_range_pop(void) {
  Runtime* rt = CpuRt();
  if (rt == nullptr) {
    return;
  }
  commprof::ThreadState* t = rt->Thread();
  if (t->range_depth == 0) {
    return;
  }
  --t->range_depth;
  if (t->range_depth >= commprof::ThreadState::kMaxRangeDepth) {
    return;
  }
  commprof_event e = Instant(COMMPROF_KIND_USER_RANGE, t->range_start[t->range_depth]);
  e.end_ns = rt->Now();
  e.name_id = t->range_name[t->range_depth];
  e.seq = static_cast<uint64_t>(t->range_depth);  // nesting depth, 0 = outermost
  rt->Record(e);
}

void commprof_mark(const char* name) {
  Runtime* rt = CpuRt();
  if (rt == nullptr) {
    return;
  }
  commprof_event e = Instant(COMMPROF_KIND_USER_MARK, rt->Now());
  e.name_id = rt->Intern(name);
  rt->Record(e);
}

void commprof_step(uint64_t step) {
  if (Runtime* rt = Rt()) {
    // The schedule moves on with every step; the STEP event itself is the cpu activity's.
    rt->BeginStep(step, COMMPROF_STEP_C_API, rt->Now(), rt->Records(commprof::kActivityCpu));
  }
}

void commprof_disable(void) {
  if (Runtime* rt = Rt()) {
    rt->SetUserEnabled(false);
  }
}

void commprof_enable(void) {
  if (Runtime* rt = Rt()) {
    rt->SetUserEnabled(true);
  }
}

void commprof_flush(void) {
  if (Runtime* rt = Rt()) {
    rt->RequestFlush();
  }
}

}  // extern "C"

// ---- internal entry points for the NCCL profiler plugin (collector/internal_api.h)

extern "C" {

int commprof_internal_attach(uint32_t activity) {
  Runtime* rt = Rt();
  const bool on = rt != nullptr && rt->Records(activity);
  // The NCCL profiler plugin records NCCL's API calls from now on: NCCL's own NVTX ranges of the
  // same calls are dropped (docs/nvtx.md, dedupe).
  if (on && (activity & commprof::kActivityNccl) != 0) {
    commprof::ProcessNvtxTool().NoteNcclPluginAttached();
  }
  return on ? 1 : 0;
}

void commprof_internal_record(const commprof_event* e) {
  if (e == nullptr) {
    return;
  }
  if (Runtime* rt = commprof::ActiveRuntime()) {
    if (e->kind == COMMPROF_KIND_MPI_COMM) {
      rt->RecordStructural(*e);  // an NCCL communicator's init: kept outside capture windows
    } else {
      rt->Record(*e);
    }
  }
}

uint32_t commprof_internal_intern(const char* text) {
  Runtime* rt = commprof::ActiveRuntime();
  return rt != nullptr ? rt->Intern(text) : 0;
}

uint64_t commprof_internal_now(void) {
  Runtime* rt = commprof::ActiveRuntime();
  return rt != nullptr ? rt->Now() : commprof::SteadyNowNs();
}

int commprof_internal_stacks(void) {
  Runtime* rt = commprof::ActiveRuntime();
  return rt != nullptr && rt->call_stacks() != nullptr ? 1 : 0;
}

void commprof_internal_call_site(const commprof_event* api) {
  Runtime* rt = commprof::ActiveRuntime();
  if (api != nullptr && rt != nullptr) {
    rt->RecordCallSite(rt->CaptureStack(), *api);
  }
}

void commprof_internal_add_inflight_provider(commprof_inflight_provider provider, void* ctx) {
  if (Runtime* rt = commprof::ActiveRuntime()) {
    rt->AddInflightProvider(provider, ctx);
  }
}

void commprof_internal_remove_inflight_provider(void* ctx) {
  // After the shutdown there is no runtime here, and no shipper thread calls providers any more.
  if (Runtime* rt = commprof::ActiveRuntime()) {
    rt->RemoveInflightProvider(ctx);
  }
}

void commprof_internal_add_counter(const char* name, uint64_t delta) {
  if (name == nullptr) {
    return;
  }
  if (Runtime* rt = commprof::ActiveRuntime()) {
    rt->AddCounter(name, delta);
  }
}

}  // extern "C"
