// The CUPTI activity source (docs/cupti.md).
//
// Purpose: turn CUPTI's activity buffers into events of the rank's runtime, on the rank's clock.
// Concepts: CUPTI fills host buffers we lend it (a fixed pool, CuptiBufferPool) and hands each
// back, full or flushed, to OnBufferCompleted on its own worker thread or on the thread calling
// cuptiActivityFlushAll; we walk it with cuptiActivityGetNextRecord, translate (CuptiTranslator)
// and record each event with the CUDA stream as its thread_id. Our clock is CUPTI's timestamp
// callback, so GPU and host events share one time base.
// Operation: Start registers the clock and the buffer callbacks, then enables the kinds; any CUPTI
// error there turns GPU tracing off for the process with one log line (the job runs on). Flush at
// step boundaries, Stop (disable, forced flush, counters) before the runtime's final drain.
// Locks: none of ours is held across cuptiActivityFlushAll or GetNumDroppedRecords, because the
// completion callback they may run takes the runtime's thread-list lock on a thread's first event
// (the ABBA deadlock Kineto hit).
// Why a static: CUPTI's buffer and clock callbacks carry no user pointer, and CUPTI allows one
// subscriber per process, so the active source is found through one process-wide pointer.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "collector/cupti_library.h"
#include "collector/cupti_translate.h"
#include "collector/gpu_tracer.h"

namespace commprof {

class Runtime;

// A fixed set of equal, 8-byte-aligned buffers lent to CUPTI: each slot is allocated on its first
// use and reused afterwards (no allocation per buffer). When all are lent, the request is declined
// (CUPTI then counts dropped records) and the refusal is counted.
class CuptiBufferPool {
 public:
  static constexpr uint32_t kMaxBuffers = 64;
  CuptiBufferPool(size_t buffer_bytes, uint32_t buffers);
  ~CuptiBufferPool();
  CuptiBufferPool(const CuptiBufferPool&) = delete;
  CuptiBufferPool& operator=(const CuptiBufferPool&) = delete;

  // Allocates the first `n` buffers now (before CUPTI can ask), so the first requests, which may
  // come on application threads, cost no allocation. Not thread-safe: call before lending.
  void Preallocate(uint32_t n);
  uint8_t* Acquire();  // null when all buffers are lent
  // False when `buffer` is not one of ours (it is then left alone).
  bool Release(uint8_t* buffer);
  size_t buffer_bytes() const { return buffer_bytes_; }
  uint32_t buffers() const { return buffers_; }

 private:
  size_t buffer_bytes_;
  uint32_t buffers_;
  std::atomic<uint64_t> free_mask_;
  std::atomic<uint8_t*> slots_[kMaxBuffers] = {};
};

// Which CUDA API calls become kind-24 records (COMMPROF_CUDA_API).
enum class CudaApiScope { kNone, kLaunch, kAll };
bool ParseCudaApiScope(const std::string& text, CudaApiScope& out);

class CuptiSource final : public GpuTracer {
 public:
  struct Options {
    bool cuda = true;    // kernels, copies, memsets, synchronization, overhead, API calls
    bool memory = true;  // allocations and frees (MEMORY2)
    CudaApiScope api = CudaApiScope::kLaunch;
    size_t buffer_bytes = 4u << 20;
    uint32_t buffers = 16;
  };
  CuptiSource(Runtime& rt, const CuptiLibrary& lib, Options options);
  ~CuptiSource() override;

  // Registers the clock and the buffer callbacks and enables the kinds. False after the one log
  // line naming the failed call and its error (everything enabled so far is disabled again).
  bool Start();
  void Flush() override;
  void Stop() override;

  // CUPTI's callbacks (public so tests can drive the source exactly as CUPTI does).
  static void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                         size_t valid_size);
  static uint64_t CUPTIAPI Clock();

  uint64_t records_translated() const { return translated_.load(); }
  uint64_t dropped_records() const { return dropped_.load(); }
  uint64_t buffers_refused() const { return refused_.load(); }

 private:
  class Context;
  bool Check(CUptiResult result, const char* call);
  bool EnableKind(CUpti_ActivityKind kind, const char* name);
  void Complete(uint8_t* buffer, size_t valid_size);
  void CollectDropped();
  void PublishCounters();

  Runtime& rt_;
  const CuptiLibrary& lib_;
  Options options_;
  CuptiBufferPool pool_;
  std::unique_ptr<Context> context_;
  // A few translators, each taken by one completing thread at a time (CUPTI may complete buffers
  // on its worker thread and in a flushing thread at once); their caches are not shared.
  static constexpr int kTranslators = 4;
  std::unique_ptr<CuptiTranslator> translators_[kTranslators];
  std::atomic<bool> translator_busy_[kTranslators] = {};
  CUpti_ActivityKind enabled_[16] = {};
  int enabled_count_ = 0;
  bool launch_apis_on_ = false;  // per-function API switches (COMMPROF_CUDA_API=launch)
  bool running_ = false;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> translated_{0};
  std::atomic<uint64_t> ignored_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace commprof
