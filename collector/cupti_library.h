// The narrow interface around the CUPTI calls commprof makes (the Kineto habit): a table of
// function pointers, resolved from libcupti at run time. Everything else in the CUPTI source talks
// to this table, so tests can drive the source with a table whose GPU-dependent entries are test
// doubles while the buffer walker stays the real libcupti's.
//
// Why dlopen instead of linking: libcommprof.so is LD_PRELOADed into every process of a job,
// including launchers, CPU-only ranks and nodes without the CUDA toolkit. A hard NEEDED entry on
// libcupti.so.13 would make the dynamic loader refuse the whole library there (and LD_PRELOAD
// would silently drop it), taking MPI and NCCL profiling down with it. dlopen lets the library
// load everywhere and turn GPU tracing off, with one log line, where CUPTI cannot be found.
#pragma once

#include <cupti.h>

#include <string>

namespace commprof {

struct CuptiLibrary {
  CUptiResult (*GetNextRecord)(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record) = nullptr;
  CUptiResult (*Enable)(CUpti_ActivityKind kind) = nullptr;
  CUptiResult (*Disable)(CUpti_ActivityKind kind) = nullptr;
  CUptiResult (*EnableRuntimeApi)(CUpti_CallbackId cbid, uint8_t enable) = nullptr;
  CUptiResult (*EnableDriverApi)(CUpti_CallbackId cbid, uint8_t enable) = nullptr;
  CUptiResult (*RegisterCallbacks)(CUpti_BuffersCallbackRequestFunc request,
                                   CUpti_BuffersCallbackCompleteFunc complete) = nullptr;
  CUptiResult (*RegisterTimestampCallback)(CUpti_TimestampCallbackFunc clock) = nullptr;
  CUptiResult (*SetAttribute)(CUpti_ActivityAttribute attribute, size_t* value_size, void* value) = nullptr;
  CUptiResult (*FlushAll)(uint32_t flag) = nullptr;
  CUptiResult (*GetNumDroppedRecords)(CUcontext context, uint32_t stream_id, size_t* dropped) = nullptr;
  CUptiResult (*GetCallbackName)(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult result, const char** text) = nullptr;
};

// The process's libcupti, loaded once: first by soname (libcupti.so.13, found through the usual
// search path), then by the toolkit path known when commprof was built. Null with `error` set
// (the dlopen/dlsym message) when it cannot be loaded; the answer is cached for the process.
const CuptiLibrary* LoadCuptiLibrary(std::string& error);

// "CUPTI_ERROR_UNKNOWN (999)", through the library's own table when it has one.
std::string CuptiResultText(const CuptiLibrary& lib, CUptiResult result);

}  // namespace commprof
