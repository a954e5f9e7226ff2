// What turning one CUPTI activity buffer into commprof events costs (collector/cupti_translate.h):
// a 4 MiB buffer of the real CUDA 13.0 record structs in a kernel-heavy mix, walked with the real
// libcupti's cuptiActivityGetNextRecord and translated by the live code, each event pushed into
// an event ring as the runtime does. Target (issue 6): >= 20 M records/s. Results: bench/README.md.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collector/cupti_library.h"
#include "collector/cupti_translate.h"
#include "collector/event_ring.h"

namespace commprof {
namespace {

class FixedContext final : public TranslationContext {
 public:
  uint32_t Intern(const char*) override { return ++next_; }
  uint32_t HostThread(uint32_t) override { return 0; }
  const char* ApiName(CUpti_ActivityKind, uint32_t) override { return "cudaLaunchKernel_v7000"; }

 private:
  uint32_t next_ = 1;
};

const char* const kKernelNames[] = {"_Z6vecAddPfS_i", "_Z4gemmPKfS0_Pfiii", "_Z7softmaxPfi",
                                    "_Z32ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"};

// The mix of a training step: per kernel one launch call; now and then a copy, a memset, a
// synchronization and an allocation.
struct Buffer {
  std::vector<uint64_t> words;  // 8-byte aligned storage
  size_t used = 0;
  size_t records = 0;

  explicit Buffer(size_t bytes) : words(bytes / 8, 0) {}
  template <typename T>
  T* Add(CUpti_ActivityKind kind) {
    if (used + sizeof(T) > words.size() * 8) return nullptr;
    auto* r = reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(words.data()) + used);
    r->kind = kind;
    used += sizeof(T);
    ++records;
    return r;
  }
};

Buffer MakeMix(size_t bytes) {
  Buffer b(bytes);
  for (uint32_t i = 0;; ++i) {
    auto* k = b.Add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    auto* a = b.Add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (k == nullptr || a == nullptr) break;
    k->start = 1000 * i;
    k->end = k->start + 500;
    k->streamId = 7 + i % 3;
    k->correlationId = i;
    k->name = kKernelNames[i % 4];
    k->gridX = 128;
    k->blockX = 256;
    a->cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    a->threadId = 4242;
    a->correlationId = i;
    if (i % 8 == 0) {
      if (auto* m = b.Add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY)) m->bytes = 4096;
    }
    if (i % 16 == 0) {
      if (auto* s = b.Add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET)) s->bytes = 4096;
      if (auto* y = b.Add<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) y->streamId = 7;
    }
    if (i % 32 == 0) {
      if (auto* m = b.Add<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2)) {
        m->memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
        m->bytes = 1 << 20;
      }
    }
  }
  return b;
}

void BM_CuptiBufferTranslation(benchmark::State& state) {
  std::string error;
  const CuptiLibrary* lib = LoadCuptiLibrary(error);
  if (lib == nullptr) {
    state.SkipWithError(("libcupti did not load: " + error).c_str());
    return;
  }
  Buffer buf = MakeMix(4u << 20);
  FixedContext ctx;
  CuptiTranslator translator(ctx);
  EventRing ring(1u << 17);
  std::vector<commprof_event> drain(1u << 17);
  uint64_t events = 0;
  for (auto _ : state) {
    BufferStats s = WalkActivityBuffer(lib->GetNextRecord, reinterpret_cast<uint8_t*>(buf.words.data()), buf.used,
                                       translator, [&](const commprof_event& e) { ring.Push(e); });
    events += s.translated;
    state.PauseTiming();  // the shipper's side, not the translation's
    while (ring.Drain(drain.data(), static_cast<uint32_t>(drain.size())) != 0) {
    }
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buf.records));
  state.counters["records_per_buffer"] = static_cast<double>(buf.records);
  state.counters["dropped"] = static_cast<double>(ring.dropped());
  benchmark::DoNotOptimize(events);
}
BENCHMARK(BM_CuptiBufferTranslation)->Unit(benchmark::kMicrosecond);

// The walk alone (libcupti's cuptiActivityGetNextRecord over the same buffer): the floor under
// the translation, which commprof does not control.
void BM_CuptiBufferWalkOnly(benchmark::State& state) {
  std::string error;
  const CuptiLibrary* lib = LoadCuptiLibrary(error);
  if (lib == nullptr) {
    state.SkipWithError(("libcupti did not load: " + error).c_str());
    return;
  }
  Buffer buf = MakeMix(4u << 20);
  auto* data = reinterpret_cast<uint8_t*>(buf.words.data());
  for (auto _ : state) {
    CUpti_Activity* record = nullptr;
    uint64_t kinds = 0;
    while (lib->GetNextRecord(data, buf.used, &record) == CUPTI_SUCCESS) kinds += record->kind;
    benchmark::DoNotOptimize(kinds);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buf.records));
}
BENCHMARK(BM_CuptiBufferWalkOnly)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace commprof

BENCHMARK_MAIN();
