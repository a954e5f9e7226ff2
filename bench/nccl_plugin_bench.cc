// commprof_bench_nccl_plugin: what the NCCL profiler plugin's callbacks cost the calling thread,
// per NCCL event, beside a bare call (issue 5: <= 100 ns median per event).
//
//   BM_BareCall                 an empty non-inlined call through a function pointer
//   BM_ClockRead                commprof::SteadyNowNs(), which every callback reads once
//   BM_ApiEvent                 CollApi start + stop (one kind 16 record): per event
//   BM_CollectiveTwoChannels    Coll start/stop + 2 x KernelCh (start, state 22, stop), one kind 17
//                               and two kind 11 records, calibration included: per event
//
// What is measured: the implementation (profiler_plugin.cc) with a sink that reads the steady
// clock for Now() and copies each record into a small buffer (the runtime's ring push costs
// ~3 ns, bench/README.md), so the figure is the plugin's own work plus its clock reads. Items
// processed = NCCL events (start/stop pairs count as one event, as the target does).
#include <benchmark/benchmark.h>

#include <cstdint>

#include "core/clock.h"
#include "nccl_hooks/nccl_profiler_abi.h"
#include "nccl_hooks/profiler_plugin.h"

namespace {

using commprof::nccl::EventDescr;

class BenchSink final : public commprof::nccl::RecordSink {
 public:
  void Record(const commprof_event& e) override {
    buf_[n_++ & 63] = e;
    benchmark::DoNotOptimize(buf_);
  }
  uint32_t Intern(const char*) override { return 1; }
  uint64_t Now() override { return commprof::SteadyNowNs(); }
  void AddCounter(const char*, uint64_t) override {}

 private:
  commprof_event buf_[64] = {};
  uint64_t n_ = 0;
};

__attribute__((noinline)) int Empty(void* p) {
  benchmark::DoNotOptimize(p);
  return 0;
}

void BM_BareCall(benchmark::State& state) {
  int (*volatile fn)(void*) = Empty;
  for (auto _ : state) benchmark::DoNotOptimize(fn(nullptr));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BareCall);

void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(commprof::SteadyNowNs());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClockRead);

void BM_ApiEvent(benchmark::State& state) {
  BenchSink sink;
  auto* ctx = commprof::nccl::CreateContext(commprof::nccl::AbiVersion::kV5, {true, 1, "b", 1, 2, 0, 0}, &sink, {});
  EventDescr d;
  d.type = kCpNcclCollApi;
  d.func = "AllReduce";
  d.datatype = "ncclFloat32";
  d.count = 1024;
  for (auto _ : state) {
    void* h = nullptr;
    commprof::nccl::StartEvent(ctx, &h, d);
    commprof::nccl::StopEvent(h);
  }
  state.SetItemsProcessed(state.iterations());
  commprof::nccl::FinalizeContext(ctx);
}
BENCHMARK(BM_ApiEvent);

void BM_CollectiveTwoChannels(benchmark::State& state) {
  BenchSink sink;
  auto* ctx = commprof::nccl::CreateContext(commprof::nccl::AbiVersion::kV5, {true, 1, "b", 1, 2, 0, 0}, &sink, {});
  EventDescr c;
  c.type = kCpNcclColl;
  c.func = "AllReduce";
  c.datatype = "ncclFloat32";
  c.count = 1024;
  c.n_channels = 2;
  EventDescr k;
  k.type = kCpNcclKernelCh;
  // The "GPU" clock runs at the host rate with a fixed offset, as %globaltimer does, so the
  // calibration sees realistic pairs (the kernel's values are read before its callbacks run).
  // The GPU writes %globaltimer itself, at no cost to the host thread: the emulated clock is
  // read from the host every 16th collective and advanced by an estimate of one iteration's
  // duration between reads, so the timed loop is the plugin's cost, not the emulation's.
  constexpr uint64_t kOffset = 1'000'000'000;
  constexpr uint64_t kIterationNs = 300;
  uint64_t gpu = 0;
  uint64_t iteration = 0;
  for (auto _ : state) {
    if ((iteration++ & 15u) == 0) {
      gpu = commprof::SteadyNowNs() - kOffset;
    } else {
      gpu += kIterationNs - 200;  // the two channels below advanced it by 200
    }
    void* hc = nullptr;
    commprof::nccl::StartEvent(ctx, &hc, c);
    commprof::nccl::StopEvent(hc);
    k.parent = hc;
    for (uint8_t ch = 0; ch < 2; ++ch) {
      k.channel_id = ch;
      k.ptimer = gpu;
      void* hk = nullptr;
      commprof::nccl::StartEvent(ctx, &hk, k);
      commprof::nccl::RecordEventState(hk, kCpNcclStateKernelChStop, gpu + 50, true);
      commprof::nccl::StopEvent(hk);
      gpu += 100;
    }
    ++c.seq_number;
  }
  state.SetItemsProcessed(state.iterations() * 3);  // Coll + 2 KernelCh
  commprof::nccl::FinalizeContext(ctx);
}
BENCHMARK(BM_CollectiveTwoChannels);

}  // namespace

BENCHMARK_MAIN();
