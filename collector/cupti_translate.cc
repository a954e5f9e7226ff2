#include "collector/cupti_translate.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "collector/event_builder.h"

namespace commprof {

namespace {

// The newest record structs of the toolkit we build against (docs/cupti.md). A later
// toolkit appends fields (Kernel11 in 13.2) without moving these, so a newer libcupti that still
// hands these kinds is read correctly through the common prefix.
#if CUPTI_API_VERSION < 130000
#error "commprof's CUPTI source reads the CUDA 13.0 record structs (CUPTI_API_VERSION >= 130000)"
#endif
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using PeerMemcpyRecord = CUpti_ActivityMemcpyPtoP4;
using MemsetRecord = CUpti_ActivityMemset4;
using MemoryRecord = CUpti_ActivityMemory4;
using SyncRecord = CUpti_ActivitySynchronization2;
using OverheadRecord = CUpti_ActivityOverhead3;
using ApiRecord = CUpti_ActivityAPI;

constexpr uint32_t kUnknownStream = 0xFFFFFFFFu;  // CUPTI_INVALID_STREAM_ID

uint16_t Device(uint32_t cupti_device) {
  return cupti_device >= COMMPROF_HOST_DEVICE ? COMMPROF_HOST_DEVICE : static_cast<uint16_t>(cupti_device);
}

// The fields a copy (MEMCPY) and a peer copy (MEMCPY2) record share, by the same names.
template <typename CopyRecord>
commprof_event CopyEvent(const CopyRecord& r) {
  commprof_event e = BlankEvent(COMMPROF_KIND_MEMCPY, r.start, r.end);
  e.subtype = r.copyKind;
  e.datatype = r.srcKind;
  e.reduce_op = r.dstKind;
  e.bytes = r.bytes;
  e.thread_id = r.streamId;
  e.correlation = r.correlationId;
  if ((r.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0) {
    e.flags = COMMPROF_FLAG_NONBLOCKING;
  }
  return e;
}

const char* OverheadName(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
      return "driver_compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
      return "cupti_buffer_flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
      return "cupti_instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
      return "cupti_resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
      return "runtime_triggered_module_loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
      return "lazy_function_loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
      return "command_buffer_full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
      return "activity_buffer_request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
      return "uvm_activity_init";
    default:
      return "unknown_overhead";
  }
}

}  // namespace

bool IsNcclKernelName(const char* name) {
  if (name == nullptr) {
    return false;
  }
  const char* p = name;
  // Itanium mangling of a function at global scope, as NCCL declares its kernels: _Z<len><name>.
  if (p[0] == '_' && p[1] == 'Z') {
    p += 2;
    if (*p < '0' || *p > '9') {
      return false;
    }
    while (*p >= '0' && *p <= '9') {
      ++p;
    }
  }
  return std::strncmp(p, "nccl", 4) == 0;
}

uint32_t CuptiTranslator::CachedName(const char* name) {
  if (name == nullptr) {
    name = "(unnamed kernel)";
  }
  auto h = reinterpret_cast<uintptr_t>(name);
  NameSlot& slot = names_[(h >> 3 ^ h >> 12) & 511u];
  if (slot.key != name) {
    slot.key = name;
    slot.id = context_.Intern(name);
  }
  return slot.id;
}

uint32_t CuptiTranslator::ApiNameId(CUpti_ActivityKind kind, uint32_t cbid) {
  uint32_t* table = kind == CUPTI_ACTIVITY_KIND_RUNTIME ? runtime_names_ : driver_names_;
  uint32_t* cached = cbid < kApiSlots ? &table[cbid] : nullptr;
  if (cached != nullptr && *cached != 0) {
    return *cached;
  }
  // Once per function: the name without CUPTI's version suffix ("cudaLaunchKernel_v7000" ->
  // "cudaLaunchKernel"), as users know it from the CUDA documentation.
  const char* raw = context_.ApiName(kind, cbid);
  char text[128];
  if (raw == nullptr) {
    std::snprintf(text, sizeof text, "%s_api_%u", kind == CUPTI_ACTIVITY_KIND_RUNTIME ? "cuda_runtime" : "cuda_driver",
                  cbid);
  } else {
    std::snprintf(text, sizeof text, "%s", raw);
    char* v = std::strrchr(text, '_');
    if (v != nullptr && v[1] == 'v' && v[2] >= '0' && v[2] <= '9' &&
        std::strspn(v + 2, "0123456789") == std::strlen(v + 2)) {
      *v = '\0';
    }
  }
  uint32_t id = context_.Intern(text);
  if (cached != nullptr) {
    *cached = id;
  }
  return id;
}

uint32_t CuptiTranslator::Thread(uint32_t cupti_thread_id) {
  ThreadSlot& slot = threads_[(cupti_thread_id ^ cupti_thread_id >> 7 ^ cupti_thread_id >> 13) & 63u];
  if (!slot.used || slot.cupti_id != cupti_thread_id) {
    slot.used = true;
    slot.cupti_id = cupti_thread_id;
    slot.index = context_.HostThread(cupti_thread_id);
  }
  return slot.index;
}

bool CuptiTranslator::Translate(const CUpti_Activity* record, commprof_event& out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* r = reinterpret_cast<const KernelRecord*>(record);
      out = BlankEvent(IsNcclKernelName(r->name) ? COMMPROF_KIND_COMM_KERNEL : COMMPROF_KIND_COMPUTE_KERNEL, r->start,
                       r->end);
      out.name_id = CachedName(r->name);
      out.thread_id = r->streamId;
      out.device = Device(r->deviceId);
      out.correlation = r->correlationId;
      out.seq =
          PackGrid(static_cast<uint32_t>(r->gridX), static_cast<uint32_t>(r->gridY), static_cast<uint32_t>(r->gridZ));
      out.peer = PackBlock(static_cast<uint32_t>(r->blockX), static_cast<uint32_t>(r->blockY),
                           static_cast<uint32_t>(r->blockZ));
      out.bytes = static_cast<uint64_t>(static_cast<uint32_t>(r->staticSharedMemory)) +
                  static_cast<uint64_t>(static_cast<uint32_t>(r->dynamicSharedMemory));
      out.datatype = static_cast<uint8_t>(r->registersPerThread > 255 ? 255 : r->registersPerThread);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* r = reinterpret_cast<const MemcpyRecord*>(record);
      out = CopyEvent(*r);
      out.device = Device(r->deviceId);
      out.seq = r->runtimeCorrelationId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto* r = reinterpret_cast<const PeerMemcpyRecord*>(record);
      out = CopyEvent(*r);
      out.device = Device(r->srcDeviceId);
      out.peer = static_cast<int32_t>(r->dstDeviceId);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* r = reinterpret_cast<const MemsetRecord*>(record);
      out = BlankEvent(COMMPROF_KIND_MEMSET, r->start, r->end);
      out.subtype = static_cast<uint8_t>(r->memoryKind);
      out.bytes = r->bytes;
      out.seq = r->value;
      out.thread_id = r->streamId;
      out.device = Device(r->deviceId);
      out.correlation = r->correlationId;
      if ((r->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) != 0) {
        out.flags = COMMPROF_FLAG_NONBLOCKING;
      }
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto* r = reinterpret_cast<const MemoryRecord*>(record);
      uint8_t kind;
      if (r->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) {
        kind = COMMPROF_KIND_MEM_ALLOC;
      } else if (r->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        kind = COMMPROF_KIND_MEM_FREE;
      } else {
        return false;
      }
      out = BlankEvent(kind, r->timestamp, r->timestamp);
      out.bytes = r->bytes;
      out.seq = r->address;
      out.subtype = static_cast<uint8_t>(r->memoryKind);
      out.device = Device(r->deviceId);
      out.thread_id = r->streamId;  // 0xFFFFFFFF unless the operation was stream-ordered
      out.correlation = r->correlationId;
      if (r->name != nullptr) {
        out.name_id = CachedName(r->name);  // CUPTI-owned, shared per symbol
      }
      if (r->isAsync != 0) {
        out.flags = COMMPROF_FLAG_NONBLOCKING;
      }
      return true;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* r = reinterpret_cast<const SyncRecord*>(record);
      out = BlankEvent(COMMPROF_KIND_SYNC, r->start, r->end);
      out.subtype = static_cast<uint8_t>(r->type);
      // A host-side wait, but the record does not say which thread waited (its API call, found by
      // correlation, does): the unknown-thread id, and the stream waited on in `peer` (-1: a
      // context or event synchronization, which is about no stream).
      out.thread_id = kUnknownHostThread;
      out.peer = r->streamId == kUnknownStream ? COMMPROF_NO_PEER : static_cast<int32_t>(r->streamId);
      out.seq = r->cudaEventId;
      out.correlation = r->correlationId;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto* r = reinterpret_cast<const OverheadRecord*>(record);
      out = BlankEvent(COMMPROF_KIND_GPU_OVERHEAD, r->start, r->end);
      out.seq = static_cast<uint64_t>(r->overheadKind);
      out.name_id = CachedName(OverheadName(static_cast<uint32_t>(r->overheadKind)));
      out.correlation = r->correlationId;
      if (r->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || r->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
        out.thread_id = Thread(r->objectId.pt.threadId);
      } else {
        out.thread_id = r->objectId.dcs.streamId;
        out.device = Device(r->objectId.dcs.deviceId);
      }
      // The one CUPTI allocation handed to the client (COMMAND_BUFFER_FULL details): ours to free.
      std::free(r->overheadData);
      return true;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API: {
      const auto* r = reinterpret_cast<const ApiRecord*>(record);
      out = BlankEvent(COMMPROF_KIND_CUDA_API, r->start, r->end);
      CUpti_ActivityKind domain =
          record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
      out.name_id = ApiNameId(domain, r->cbid);
      out.subtype = static_cast<uint8_t>(record->kind);
      out.seq = r->cbid;
      out.peer = static_cast<int32_t>(r->returnValue);
      out.thread_id = Thread(r->threadId);
      out.correlation = r->correlationId;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace commprof
