// Drives the built plugin through dlopen + ncclProfiler_v5 in a process whose runtime spools
// (COMMPROF_SPOOL_DIR set by the caller): one communicator, 3 AllReduces with 2 kernel channels
// each. The "GPU" times are the host steady clock plus a planted offset, read before the callbacks
// run (as the real %globaltimer values are written before the proxy thread delivers them).
// check_runtime_records.py merges the spool and checks the records.
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "nccl_hooks/nccl_profiler_abi.h"

namespace {

constexpr uint64_t kGpuOffset = 1'700'000'000'000'000'000ull;  // planted: %globaltimer ~ epoch ns

uint64_t FakeGpuNow() {
  auto t = std::chrono::steady_clock::now().time_since_epoch();
  return kGpuOffset + static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t).count());
}

void Spin(uint64_t ns) {
  uint64_t end = FakeGpuNow() + ns;
  while (FakeGpuNow() < end) {
  }
}

}  // namespace

int main() {
  void* p = ::dlopen("libnccl-profiler-commprof.so", RTLD_NOW | RTLD_LOCAL);
  if (p == nullptr) {
    std::printf("dlopen: %s\n", ::dlerror());
    return 1;
  }
  auto* v5 = static_cast<CpNcclProfilerV5*>(::dlsym(p, "ncclProfiler_v5"));
  if (v5 == nullptr) return 1;
  void* ctx = nullptr;
  int mask = 0;
  v5->init(&ctx, 0xABCDull, &mask, "world", 1, 2, 0, nullptr);
  for (int i = 0; i < 3; ++i) {
    CpNcclEventDescrV5 d{};
    d.type = kCpNcclCollApi;
    d.collApi.func = "AllReduce";
    d.collApi.count = 256;
    d.collApi.datatype = "ncclFloat32";
    void* hA = nullptr;
    v5->startEvent(ctx, &hA, &d);
    v5->stopEvent(hA);
    d = CpNcclEventDescrV5{};
    d.type = kCpNcclColl;
    d.parentObj = hA;
    d.coll.func = "AllReduce";
    d.coll.count = 256;
    d.coll.datatype = "ncclFloat32";
    d.coll.seqNumber = static_cast<uint64_t>(i);
    d.coll.nChannels = 2;
    void* hC = nullptr;
    v5->startEvent(ctx, &hC, &d);
    v5->stopEvent(hC);
    std::thread proxy([&] {
      // Channel 0 runs [g0, g0 + 20 us], channel 1 starts 5 us later and runs 30 us.
      uint64_t g0 = FakeGpuNow();
      Spin(5000);
      uint64_t g1 = FakeGpuNow();
      Spin(15000);
      uint64_t s0 = FakeGpuNow();
      Spin(15000);
      uint64_t s1 = FakeGpuNow();
      std::printf("coll %d gpu_span_ns %llu\n", i, static_cast<unsigned long long>(s1 - g0));
      const uint64_t starts[2] = {g0, g1}, stops[2] = {s0, s1};
      for (int ch = 0; ch < 2; ++ch) {
        CpNcclEventDescrV5 k{};
        k.type = kCpNcclKernelCh;
        k.parentObj = hC;
        k.kernelCh.channelId = static_cast<uint8_t>(ch);
        k.kernelCh.pTimer = starts[ch];
        void* hK = nullptr;
        v5->startEvent(ctx, &hK, &k);
        CpNcclStateArgsV5 a{};
        a.kernelCh.pTimer = stops[ch];
        v5->recordEventState(hK, kCpNcclStateKernelChStop, &a);
        v5->stopEvent(hK);
      }
    });
    proxy.join();
  }
  v5->finalize(ctx);
  std::printf("mask %d\n", mask);
  // The v4 and v2 tables in the same profiled process: their init argument orders and masks.
  auto* v4 = static_cast<CpNcclProfilerV4*>(::dlsym(p, "ncclProfiler_v4"));
  auto* v2 = static_cast<CpNcclProfilerV2*>(::dlsym(p, "ncclProfiler_v2"));
  if (v4 == nullptr || v2 == nullptr) return 1;
  void* c4 = nullptr;
  int m4 = 0;
  v4->init(&c4, &m4, "v4comm", 0x4444ull, 1, 8, 5, nullptr);
  v4->finalize(c4);
  void* c2 = nullptr;
  int m2 = 0;
  v2->init(&c2, &m2);
  v2->finalize(c2);
  std::printf("mask4 %d\nmask2 %d\n", m4, m2);
  return 0;
}
