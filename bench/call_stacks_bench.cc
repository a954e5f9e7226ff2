// What `commprof run --stacks` costs a wrapped API call (collector/call_stacks.h): the capture of
// the calling stack, with it off, on with a cache hit, and on with a miss (a full unwind). The
// stack is 16 frames deep where it is captured. Figures and the command: bench/README.md.
#include <benchmark/benchmark.h>

#include <memory>

#include "collector/call_stacks.h"

namespace {

using commprof::CallStacks;
using commprof::StackCache;
using commprof::StackOptions;

volatile int g_sink = 0;

// What a wrapper does: one branch when --stacks is off, Capture when it is on.
__attribute__((noinline)) uint32_t Wrapper(CallStacks* stacks, StackCache& cache) {
  const uint32_t id = stacks == nullptr ? 0 : stacks->Capture(cache);
  g_sink = g_sink + 1;
  return id;
}

// `n` more frames above the wrapper, then `body` at the top.
template <typename Body>
__attribute__((noinline)) uint32_t Frames(int n, Body& body) {
  const uint32_t id = n == 0 ? body() : Frames(n - 1, body);
  g_sink = g_sink + 1;
  return id;
}

StackOptions Options() {
  StackOptions o;
  o.depth = 16;
  o.skip_self = false;  // keep this program's frames: they are the "user" stack here
  return o;
}

// The benchmark loop's own frames (benchmark library, main, libc) add some 8 frames beyond
// these; 16 are kept, 16 checked on a hit.
constexpr int kUserFrames = 14;

void BM_StackCaptureOff(benchmark::State& state) {
  auto cache = std::make_unique<StackCache>();
  auto body = [&] {
    uint32_t id = 0;
    for (auto _ : state) {
      id = Wrapper(nullptr, *cache);
      benchmark::DoNotOptimize(id);
    }
    return id;
  };
  Frames(kUserFrames, body);
}
BENCHMARK(BM_StackCaptureOff);

void BM_StackCaptureHit(benchmark::State& state) {
  CallStacks stacks(Options());
  auto cache = std::make_unique<StackCache>();
  auto body = [&] {
    uint32_t id = 0;
    for (auto _ : state) {
      id = Wrapper(&stacks, *cache);
      benchmark::DoNotOptimize(id);
    }
    return id;
  };
  Frames(kUserFrames, body);
  state.counters["misses"] = static_cast<double>(stacks.misses());
}
BENCHMARK(BM_StackCaptureHit);

// Two call chains that reach the wrapper at the same frame address: they share a cache entry, so
// alternating them makes every capture a miss (validation fails, a full unwind; the stack is
// already interned).
__attribute__((noinline)) uint32_t PathA(CallStacks* stacks, StackCache& cache) {
  const uint32_t id = Wrapper(stacks, cache);
  g_sink = g_sink + 1;
  return id;
}
__attribute__((noinline)) uint32_t PathB(CallStacks* stacks, StackCache& cache) {
  const uint32_t id = Wrapper(stacks, cache);
  g_sink = g_sink + 1;
  return id;
}

void BM_StackCaptureMiss(benchmark::State& state) {
  CallStacks stacks(Options());
  auto cache = std::make_unique<StackCache>();
  auto body = [&] {
    uint32_t id = 0;
    bool a = false;
    for (auto _ : state) {
      a = !a;
      id = a ? PathA(&stacks, *cache) : PathB(&stacks, *cache);
      benchmark::DoNotOptimize(id);
    }
    return id;
  };
  Frames(kUserFrames - 1, body);
  state.counters["misses"] = static_cast<double>(stacks.misses());
}
BENCHMARK(BM_StackCaptureMiss);

}  // namespace

BENCHMARK_MAIN();
