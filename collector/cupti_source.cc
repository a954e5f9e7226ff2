#include "collector/cupti_source.h"

#include <cstdlib>
#include <thread>

#include "collector/runtime.h"
#include "core/config.h"
#include "core/log.h"

namespace commprof {

namespace {

std::atomic<CuptiSource*> g_source{nullptr};

constexpr uint32_t kWakeShipperEvery = 8192;

// The API calls recorded under COMMPROF_CUDA_API=launch: everything that puts work on a stream by
// launching a kernel, a host function or a graph (cupti_runtime_cbid.h, cupti_driver_cbid.h).
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};
constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};

}  // namespace

// ---- buffer pool

CuptiBufferPool::CuptiBufferPool(size_t buffer_bytes, uint32_t buffers)
    : buffer_bytes_((buffer_bytes + 7) & ~size_t{7}),
      buffers_(buffers == 0 ? 1 : (buffers > kMaxBuffers ? kMaxBuffers : buffers)),
      free_mask_(buffers_ == 64 ? ~uint64_t{0} : ((uint64_t{1} << buffers_) - 1)) {}

CuptiBufferPool::~CuptiBufferPool() {
  for (auto& s : slots_) {
    std::free(s.load());
  }
}

void CuptiBufferPool::Preallocate(uint32_t n) {
  for (uint32_t i = 0; i < n && i < buffers_; ++i) {
    if (slots_[i].load() == nullptr) {
      slots_[i].store(static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes_)));
    }
  }
}

uint8_t* CuptiBufferPool::Acquire() {
  uint64_t mask = free_mask_.load(std::memory_order_acquire);
  for (;;) {
    if (mask == 0) {
      return nullptr;
    }
    int slot = __builtin_ctzll(mask);
    if (free_mask_.compare_exchange_weak(mask, mask & ~(uint64_t{1} << slot), std::memory_order_acq_rel)) {
      uint8_t* b = slots_[slot].load(std::memory_order_acquire);
      if (b == nullptr) {
        // First use of this slot: its only allocation. Only the thread holding the slot writes it.
        b = static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes_));
        if (b == nullptr) {
          free_mask_.fetch_or(uint64_t{1} << slot, std::memory_order_acq_rel);
          return nullptr;
        }
        slots_[slot].store(b, std::memory_order_release);
      }
      return b;
    }
  }
}

bool CuptiBufferPool::Release(uint8_t* buffer) {
  for (uint32_t i = 0; i < buffers_; ++i) {
    if (slots_[i].load(std::memory_order_acquire) == buffer && buffer != nullptr) {
      free_mask_.fetch_or(uint64_t{1} << i, std::memory_order_acq_rel);
      return true;
    }
  }
  return false;
}

bool ParseCudaApiScope(const std::string& text, CudaApiScope& out) {
  if (text == "launch") {
    out = CudaApiScope::kLaunch;
  } else if (text == "all") {
    out = CudaApiScope::kAll;
  } else if (text == "none") {
    out = CudaApiScope::kNone;
  } else {
    return false;
  }
  return true;
}

// ---- translation context: the runtime's strings and threads, CUPTI's API names

class CuptiSource::Context final : public TranslationContext {
 public:
  Context(Runtime& rt, const CuptiLibrary& lib) : rt_(rt), lib_(lib) {}
  uint32_t Intern(const char* text) override { return rt_.Intern(text); }
  uint32_t HostThread(uint32_t cupti_thread_id) override { return rt_.HostThreadIndex(cupti_thread_id); }
  const char* ApiName(CUpti_ActivityKind api_kind, uint32_t cbid) override {
    const char* name = nullptr;
    CUpti_CallbackDomain domain =
        api_kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    if (lib_.GetCallbackName == nullptr || lib_.GetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS) {
      return nullptr;
    }
    return name;
  }

 private:
  Runtime& rt_;
  const CuptiLibrary& lib_;
};

// ---- the source

CuptiSource::CuptiSource(Runtime& rt, const CuptiLibrary& lib, Options options)
    : rt_(rt),
      lib_(lib),
      options_(options),
      pool_(options.buffer_bytes, options.buffers),
      context_(std::make_unique<Context>(rt, lib)) {
  for (auto& t : translators_) {
    t = std::make_unique<CuptiTranslator>(*context_);
  }
}

CuptiSource::~CuptiSource() {
  CuptiSource* self = this;
  g_source.compare_exchange_strong(self, nullptr);
}

bool CuptiSource::Check(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) {
    return true;
  }
  COMMPROF_LOG_WARN("GPU tracing unavailable: %s failed: %s; the job runs on without CUDA records", call,
                    CuptiResultText(lib_, result).c_str());
  rt_.SetCounter("gpu_tracing_unavailable", 1);
  // Undo what was switched on, so CUPTI stops filling buffers nobody will read.
  for (int i = 0; i < enabled_count_; ++i) {
    lib_.Disable(enabled_[i]);
  }
  enabled_count_ = 0;
  if (launch_apis_on_) {
    for (CUpti_CallbackId cbid : kRuntimeLaunches) {
      lib_.EnableRuntimeApi(cbid, 0);
    }
    for (CUpti_CallbackId cbid : kDriverLaunches) {
      lib_.EnableDriverApi(cbid, 0);
    }
    launch_apis_on_ = false;
  }
  return false;
}

bool CuptiSource::EnableKind(CUpti_ActivityKind kind, const char* name) {
  std::string call = std::string("cuptiActivityEnable(") + name + ")";
  if (!Check(lib_.Enable(kind), call.c_str())) {
    return false;
  }
  if (enabled_count_ < static_cast<int>(sizeof enabled_ / sizeof enabled_[0])) {
    enabled_[enabled_count_++] = kind;
  }
  return true;
}

bool CuptiSource::Start() {
  CuptiSource* expected = nullptr;
  if (!g_source.compare_exchange_strong(expected, this)) {
    COMMPROF_LOG_WARN("GPU tracing unavailable: another commprof CUPTI source is active in this process");
    return false;
  }
  // Shared buffers rather than 13.0's default of one per recording thread (as Kineto does): a
  // process with many CUDA threads would otherwise hold one pool buffer per thread. CUPTI wants
  // this set before the callbacks are registered and any kind is enabled.
  uint8_t per_thread = 0;
  size_t value_size = sizeof per_thread;
  if (!Check(lib_.SetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &value_size, &per_thread),
             "cuptiActivitySetAttribute(PER_THREAD_ACTIVITY_BUFFER)")) {
    return false;
  }
  // The clock next: CUPTI stamps records with it from the moment a kind is enabled.
  if (!Check(lib_.RegisterTimestampCallback(&CuptiSource::Clock), "cuptiActivityRegisterTimestampCallback")) {
    return false;
  }
  pool_.Preallocate(2);
  if (!Check(lib_.RegisterCallbacks(&CuptiSource::OnBufferRequested, &CuptiSource::OnBufferCompleted),
             "cuptiActivityRegisterCallbacks")) {
    return false;
  }
  if (options_.cuda) {
    if (!EnableKind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL") ||
        !EnableKind(CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY") || !EnableKind(CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2") ||
        !EnableKind(CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET") ||
        !EnableKind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION") ||
        !EnableKind(CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD")) {
      return false;
    }
    if (options_.api == CudaApiScope::kAll) {
      if (!EnableKind(CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME") || !EnableKind(CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER")) {
        return false;
      }
    } else if (options_.api == CudaApiScope::kLaunch) {
      // Per-function switches without the RUNTIME/DRIVER kinds: only launches are recorded.
      launch_apis_on_ = true;
      for (CUpti_CallbackId cbid : kRuntimeLaunches) {
        std::string call = "cuptiActivityEnableRuntimeApi(" + std::to_string(cbid) + ")";
        if (!Check(lib_.EnableRuntimeApi(cbid, 1), call.c_str())) {
          return false;
        }
      }
      for (CUpti_CallbackId cbid : kDriverLaunches) {
        std::string call = "cuptiActivityEnableDriverApi(" + std::to_string(cbid) + ")";
        if (!Check(lib_.EnableDriverApi(cbid, 1), call.c_str())) {
          return false;
        }
      }
    }
  }
  if (options_.memory && !EnableKind(CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2")) {
    return false;
  }
  running_ = true;
  COMMPROF_LOG_INFO("GPU tracing on: CUPTI with %u buffers of %zu KiB", pool_.buffers(), pool_.buffer_bytes() >> 10);
  return true;
}

void CuptiSource::Flush() {
  if (!running_ || stopped_.load(std::memory_order_acquire)) {
    return;
  }
  lib_.FlushAll(0);  // completed buffers only; never waits for the GPU
}

void CuptiSource::Stop() {
  if (stopped_.exchange(true)) {
    return;
  }
  if (running_) {
    for (int i = 0; i < enabled_count_; ++i) {
      lib_.Disable(enabled_[i]);
    }
    if (launch_apis_on_) {
      for (CUpti_CallbackId cbid : kRuntimeLaunches) {
        lib_.EnableRuntimeApi(cbid, 0);
      }
      for (CUpti_CallbackId cbid : kDriverLaunches) {
        lib_.EnableDriverApi(cbid, 0);
      }
    }
    // FORCED: also the buffers with records still in flight; this is the last chance.
    lib_.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    CollectDropped();
    PublishCounters();  // only where tracing ran: elsewhere gpu_tracing_unavailable says why not
  }
}

void CuptiSource::CollectDropped() {
  size_t dropped = 0;
  // NULL context: the global count of the shared buffers (CUDA >= 6); reading it resets it.
  if (lib_.GetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    dropped_.fetch_add(dropped, std::memory_order_relaxed);
  }
}

void CuptiSource::PublishCounters() {
  rt_.SetCounter("cupti_records", translated_.load());
  rt_.SetCounter("cupti_records_ignored", ignored_.load());
  rt_.SetCounter("dropped_cupti_records", dropped_.load());
  rt_.SetCounter("cupti_buffers_refused", refused_.load());
}

void CuptiSource::Complete(uint8_t* buffer, size_t valid_size) {
  if (valid_size > 0) {
    int slot = 0;
    for (;; slot = (slot + 1) % kTranslators) {
      bool idle = false;
      if (translator_busy_[slot].compare_exchange_weak(idle, true, std::memory_order_acquire)) {
        break;
      }
      if (slot == kTranslators - 1) {
        std::this_thread::yield();  // all busy: more completing threads than translators
      }
    }
    // One buffer holds tens of thousands of records, more than a thread ring drains between two
    // shipper periods: wake the shipper every few thousand so the ring empties while we fill it.
    uint32_t since_wake = 0;
    BufferStats s = WalkActivityBuffer(lib_.GetNextRecord, buffer, valid_size, *translators_[slot],
                                       [this, &since_wake](const commprof_event& e) {
                                         rt_.RecordAsGiven(e);
                                         if (++since_wake == kWakeShipperEvery) {
                                           since_wake = 0;
                                           rt_.RequestFlush();
                                         }
                                       });
    translator_busy_[slot].store(false, std::memory_order_release);
    translated_.fetch_add(s.translated, std::memory_order_relaxed);
    ignored_.fetch_add(s.ignored, std::memory_order_relaxed);
  }
  CollectDropped();
  pool_.Release(buffer);
}

void CUPTIAPI CuptiSource::OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  CuptiSource* s = g_source.load(std::memory_order_acquire);
  uint8_t* b = s != nullptr ? s->pool_.Acquire() : nullptr;
  if (b == nullptr) {
    if (s != nullptr) {
      s->refused_.fetch_add(1, std::memory_order_relaxed);
    }
    *buffer = nullptr;  // declined: CUPTI drops records and counts them
    *size = 0;
    return;
  }
  *buffer = b;
  *size = s->pool_.buffer_bytes();
}

void CUPTIAPI CuptiSource::OnBufferCompleted(CUcontext /*context*/, uint32_t /*stream_id*/, uint8_t* buffer,
                                             size_t /*size*/, size_t valid_size) {
  CuptiSource* s = g_source.load(std::memory_order_acquire);
  if (s == nullptr || buffer == nullptr) {
    return;
  }
  s->Complete(buffer, valid_size);
}

uint64_t CUPTIAPI CuptiSource::Clock() {
  CuptiSource* s = g_source.load(std::memory_order_acquire);
  return s != nullptr ? s->rt_.Now() : SteadyNowNs();
}

// ---- the factory of collector/gpu_tracer.h

std::unique_ptr<GpuTracer> StartGpuTracer(Runtime& rt) {
  std::string error;
  const CuptiLibrary* lib = LoadCuptiLibrary(error);
  if (lib == nullptr) {
    COMMPROF_LOG_WARN("GPU tracing unavailable: %s; the job runs on without CUDA records", error.c_str());
    rt.SetCounter("gpu_tracing_unavailable", 1);
    return nullptr;
  }
  CuptiSource::Options o;
  o.cuda = rt.Records(kActivityCuda);
  o.memory = rt.Records(kActivityMemory);
  if (!ParseCudaApiScope(rt.config().cuda_api, o.api)) {
    COMMPROF_LOG_WARN("COMMPROF_CUDA_API=%s is not launch, all or none; using launch", rt.config().cuda_api.c_str());
    o.api = CudaApiScope::kLaunch;
  }
  o.buffer_bytes = static_cast<size_t>(rt.config().cupti_buffer_kb) << 10;
  o.buffers = rt.config().cupti_buffers;
  auto source = std::make_unique<CuptiSource>(rt, *lib, o);
  // Kept even when Start fails (it has logged why): CUPTI may hold one of its buffers from a kind
  // that was enabled before the failing call, and that memory must stay valid.
  source->Start();
  return source;
}

}  // namespace commprof
