// commprof_bench_nvtx: what an NVTX push + pop costs a thread when libcommprof.so is the NVTX
// injection, through the real nvtx3 headers (the toolkit's header-only NVTX v3: the inline
// nvtxRangePushA reads its module slot and calls our handler, exactly as in a profiled program).
//
//   BM_BareCall           an empty non-inlined call, for scale
//   BM_ClockRead          commprof::SteadyNowNs(): a recorded pair reads the clock twice
//   BM_NvtxPushPop        nvtxRangePushA + nvtxRangePop, recorded (one kind-18 event per pair)
//   BM_NvtxPushPopOff     the same with the `nvtx` activity off: depths kept, nothing recorded
//   BM_NvtxDomainPushPop  nvtxDomainRangePushEx (registered name) + nvtxDomainRangePop, recorded
//
// The runtime is built as a profiled process builds it, its shipper not started; this thread
// drains its ring with the timer paused every `capacity` records, so every timed record takes
// the real push path; the runtime's counters are checked afterwards (no drop, one event per pair).
// The injection is found through the static InitializeInjectionNvtx2_fnptr (nvtx_bench_hook.cc),
// NVTX load step 4, so no NVTX_INJECTION64_PATH is needed.
//
// Run (the figures in bench/README.md):
//   build/release/bench/commprof_bench_nvtx --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "collector/nvtx_tool.h"
#include "collector/runtime.h"
#include "core/clock.h"
#include "core/config.h"

namespace {

constexpr uint32_t kRing = 65536;  // the default COMMPROF_BUFFER_EVENTS

commprof::Config BenchConfig(uint32_t activities) {
  commprof::Config c;
  c.spool_dir = "/nonexistent-unused";  // never written: the shipper is not started
  c.buffer_events = kRing;
  c.memory_mb = 64;
  c.request_slots = 64;
  c.activities = activities;
  return c;
}

commprof::Identity BenchIdentity() {
  commprof::Identity id;
  id.pid = static_cast<uint32_t>(::getpid());
  id.host = "bench";
  return id;
}

uint64_t Counter(const commprof::Runtime& rt, const char* name) {
  for (const auto& [k, v] : rt.Counters().counters) {
    if (k == name) return v;
  }
  return 0;
}

__attribute__((noinline)) int EmptyCall(int x) {
  benchmark::DoNotOptimize(x);
  return x;
}

void BM_BareCall(benchmark::State& state) {
  int x = 0;
  for (auto _ : state) benchmark::DoNotOptimize(EmptyCall(x));
}
BENCHMARK(BM_BareCall);

void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(commprof::SteadyNowNs());
}
BENCHMARK(BM_ClockRead);

template <typename PushPop>
void PushPopLoop(benchmark::State& state, uint32_t activities, bool records, PushPop&& push_pop) {
  commprof::Runtime rt(BenchConfig(activities), BenchIdentity());
  commprof::ProcessNvtxTool().UseRuntimeForTesting(&rt);
  auto scratch = std::make_unique<commprof_event[]>(4096);
  auto drain = [&] { rt.DrainAll(scratch.get(), 4096, [](const commprof_event*, uint32_t) {}); };
  push_pop();  // first pair: the thread's ring and NVTX stack are allocated here, untimed
  drain();
  const uint64_t before = Counter(rt, "events_recorded");
  uint64_t since_drain = 0;
  for (auto _ : state) {
    push_pop();
    if (records && ++since_drain == kRing) {
      state.PauseTiming();
      drain();
      state.ResumeTiming();
      since_drain = 0;
    }
  }
  const uint64_t recorded = Counter(rt, "events_recorded") - before;
  const uint64_t expected = records ? static_cast<uint64_t>(state.iterations()) : 0;
  if (recorded != expected || Counter(rt, "dropped_ring_full") != 0) {
    state.SkipWithError("recorded events differ from push/pop pairs: not the measured path");
  }
  commprof::ProcessNvtxTool().UseRuntimeForTesting(nullptr);
  state.SetItemsProcessed(state.iterations());
}

void BM_NvtxPushPop(benchmark::State& state) {
  PushPopLoop(state, commprof::kActivityAll, true, [] {
    nvtxRangePushA("step");
    nvtxRangePop();
  });
}
BENCHMARK(BM_NvtxPushPop);

void BM_NvtxPushPopOff(benchmark::State& state) {
  PushPopLoop(state, commprof::kActivityMpi, false, [] {
    nvtxRangePushA("step");
    nvtxRangePop();
  });
}
BENCHMARK(BM_NvtxPushPopOff);

void BM_NvtxDomainPushPop(benchmark::State& state) {
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("bench-domain");
  static nvtxStringHandle_t name = nvtxDomainRegisterStringA(domain, "registered");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = name;
  PushPopLoop(state, commprof::kActivityAll, true, [&] {
    nvtxDomainRangePushEx(domain, &a);
    nvtxDomainRangePop(domain);
  });
}
BENCHMARK(BM_NvtxDomainPushPop);

}  // namespace

BENCHMARK_MAIN();
