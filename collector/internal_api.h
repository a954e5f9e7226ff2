/* The internal C entry points of libcommprof.so for in-process sources that live in another shared
 * object (the NCCL profiler plugin): they record through the process's one runtime, whether
 * LD_PRELOAD or the plugin loaded the library first. Not a public API: no header under include/. */
#ifndef COMMPROF_COLLECTOR_INTERNAL_API_H
#define COMMPROF_COLLECTOR_INTERNAL_API_H

#include <stdint.h>

#include "commprof/event.h"

#define COMMPROF_INTERNAL_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* Makes sure the process runtime exists if the environment asks for profiling (the plugin may be
 * loaded before MPI_Init); 1 when a runtime is active and records `activity` (an enum Activity bit
 * of core/config.h, chosen by `commprof run --activities`), 0 otherwise. */
COMMPROF_INTERNAL_API int commprof_internal_attach(uint32_t activity);
/* Records one event as given (thread_id is stamped by the runtime); a no-op without a runtime. */
COMMPROF_INTERNAL_API void commprof_internal_record(const commprof_event* e);
/* The id of `text` in the rank's string table (0 without a runtime). */
COMMPROF_INTERNAL_API uint32_t commprof_internal_intern(const char* text);
/* The rank's host clock (Runtime::Now()); the steady clock without a runtime. */
COMMPROF_INTERNAL_API uint64_t commprof_internal_now(void);
/* Adds `delta` to a named counter reported in the rank's bye frame. */
COMMPROF_INTERNAL_API void commprof_internal_add_counter(const char* name, uint64_t delta);
/* 1 when the runtime captures call sites (`commprof run --stacks`), 0 otherwise. */
COMMPROF_INTERNAL_API int commprof_internal_stacks(void);
/* Captures the calling thread's stack and records the kind 31 CALL_SITE of `api` (its kind, start_ns and
 * comm_id); the frames inside libcommprof, NCCL and its plugin are dropped. A no-op without --stacks. */
COMMPROF_INTERNAL_API void commprof_internal_call_site(const commprof_event* api);

/* Hang diagnosis (docs/hangs.md): `provider(ctx, emit, arg)` is called on the runtime's shipper
 * thread and calls emit(arg, e) for each operation of `ctx` in flight now (an NCCL collective
 * started whose kernel has not finished), as it will be recorded, start_ns = its start. Remove
 * before `ctx` is freed: it waits for a running call to return. No-ops without a runtime. */
typedef void (*commprof_inflight_emit)(void* arg, const commprof_event* e);
typedef void (*commprof_inflight_provider)(void* ctx, commprof_inflight_emit emit, void* arg);
COMMPROF_INTERNAL_API void commprof_internal_add_inflight_provider(commprof_inflight_provider provider, void* ctx);
COMMPROF_INTERNAL_API void commprof_internal_remove_inflight_provider(void* ctx);

#ifdef __cplusplus
}
#endif

#endif
