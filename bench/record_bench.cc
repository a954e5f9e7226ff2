// commprof_bench_record: what recording one event costs the profiled thread.
//
//   BM_ClockRead                  commprof::SteadyNowNs(), the clock every event is stamped with
//   BM_RecordEvent/N              Runtime::Record(e) of a prefilled event, N-event thread ring
//   BM_RecordEventWithTimestamps/N  two clock reads + Record: what a wrapped MPI call adds
//   BM_RecordEventWithRuntimeClock/N  the same through Runtime::Now(), the clock the wrappers read
//   BM_EventRingPush/N            EventRing::Push alone
//   BM_RecordEventRingFull        Record into a full ring: the DROP path, for contrast only
//   BM_InflightPublishClear       what a blocking wrapper adds for the hang diagnosis: publish the
//                                 event in the thread's in-flight slot (collector/inflight.h), clear it
//   BM_TracedShape/N              Traced's whole bookkeeping without the MPI call: publish, two
//                                 runtime clock reads, clear, Record (compare with
//                                 BM_RecordEventWithRuntimeClock/N)
//
// What is measured, exactly: the Runtime is built as a profiled process builds it (Config with no
// aggregator and a temporary spool directory) but its shipper thread is not started. This thread
// is the ring's only consumer instead: every N records (N = the ring's capacity, so it never
// overflows) it drains the ring with the timer paused, so each timed Record goes through the
// real push path (bounds check, 64-byte copy, release store), never through the drop path.
// After each run the runtime's own counters are checked: events_recorded must equal the records
// made and every dropped_* counter must be 0, else the run is reported as an error and the
// program exits 1. N = 65536 is the default COMMPROF_BUFFER_EVENTS (a 4 MiB ring);
// N = 4194304 (256 MiB) shows the same path when the ring does not fit in the caches.
//
// Run (the figures in bench/README.md):
//   build/release/bench/commprof_bench_record --benchmark_repetitions=10
//       --benchmark_report_aggregates_only=true      (one command line)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "collector/event_ring.h"
#include "collector/inflight.h"
#include "collector/runtime.h"
#include "commprof/event.h"
#include "core/clock.h"
#include "core/config.h"

namespace {

std::string g_spool_dir;         // a fresh temporary directory (never written to: no shipper)
uint64_t g_checked_records = 0;  // records verified to have reached a ring, over all runs
uint64_t g_dropped_records = 0;  // records lost on the push-path benchmarks (must stay 0)

constexpr uint32_t kScratchEvents = 4096;

commprof_event PrefilledEvent() {
  commprof_event e{};
  e.start_ns = 1000;
  e.end_ns = 2000;
  e.bytes = 8;
  e.comm_id = COMMPROF_COMM_WORLD_ID;
  e.seq = 42;
  e.name_id = 3;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  e.kind = COMMPROF_KIND_MPI_COLLECTIVE;
  e.subtype = COMMPROF_OP_ALLREDUCE;
  e.datatype = COMMPROF_DT_FLOAT32;
  e.reduce_op = COMMPROF_RED_SUM;
  return e;
}

commprof::Config BenchConfig(uint32_t buffer_events) {
  commprof::Config c;
  c.aggregator = "";  // spool only
  c.spool_dir = g_spool_dir;
  c.buffer_events = buffer_events;
  // Room for this thread's ring whatever its size (the default budget is 256 MB).
  uint64_t ring_mb = (static_cast<uint64_t>(buffer_events) * sizeof(commprof_event) >> 20) + 1;
  c.memory_mb = static_cast<uint32_t>(ring_mb < 256 ? 256 : ring_mb);
  c.flush_ms = 20;
  c.request_slots = 64;
  c.connect_timeout_ms = 0;
  return c;
}

commprof::Identity BenchIdentity() {
  commprof::Identity id;
  id.rank = 0;
  id.world_size = 1;
  id.pid = static_cast<uint32_t>(::getpid());
  id.host = "bench";
  return id;
}

uint64_t Counter(const commprof::wire::Bye& bye, const char* name) {
  for (const auto& [k, v] : bye.counters) {
    if (k == name) return v;
  }
  return 0;
}

// Checks the runtime's counters after a push-path run; reports a drop as a benchmark error.
void CheckNoDrops(benchmark::State& state, const commprof::Runtime& rt, uint64_t records) {
  auto bye = rt.Counters();
  uint64_t recorded = Counter(bye, "events_recorded");
  uint64_t dropped = Counter(bye, "dropped_ring_full") + Counter(bye, "dropped_no_buffer");
  state.counters["dropped"] = static_cast<double>(dropped);
  g_checked_records += recorded;
  if (dropped != 0 || recorded != records) {
    g_dropped_records += dropped + (records > recorded ? records - recorded : 0);
    state.SkipWithError("events were dropped: this run measured the drop path, not the push path");
  }
}

void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(commprof::SteadyNowNs());
}
BENCHMARK(BM_ClockRead);

enum class Stamp { kNone, kSteady, kRuntime };

template <Stamp kStamp>
void RecordLoop(benchmark::State& state) {
  commprof::Runtime rt(BenchConfig(static_cast<uint32_t>(state.range(0))), BenchIdentity());
  auto scratch = std::make_unique<commprof_event[]>(kScratchEvents);
  auto drain = [&] { rt.DrainAll(scratch.get(), kScratchEvents, [](const commprof_event*, uint32_t) {}); };
  commprof_event e = PrefilledEvent();
  rt.Record(e);  // the thread's first record allocates its ring: keep that out of the timed loop
  drain();
  const uint64_t capacity = rt.Thread()->ring->capacity();
  uint64_t since_drain = 0;
  for (auto _ : state) {
    if constexpr (kStamp == Stamp::kSteady) {
      // What a PMPI wrapper adds around the real call: entry time, exit time, one record.
      e.start_ns = commprof::SteadyNowNs();
      e.end_ns = commprof::SteadyNowNs();
    } else if constexpr (kStamp == Stamp::kRuntime) {
      // The same through the runtime's clock, as the wrappers stamp their events.
      e.start_ns = rt.Now();
      e.end_ns = rt.Now();
    }
    rt.Record(e);
    if (++since_drain == capacity) {  // the ring is exactly full: empty it, untimed
      state.PauseTiming();
      drain();
      state.ResumeTiming();
      since_drain = 0;
    }
  }
  CheckNoDrops(state, rt, static_cast<uint64_t>(state.iterations()) + 1);
  state.SetItemsProcessed(state.iterations());
}

void BM_RecordEvent(benchmark::State& state) { RecordLoop<Stamp::kNone>(state); }
BENCHMARK(BM_RecordEvent)->Arg(65536)->Arg(1 << 22);

void BM_RecordEventWithTimestamps(benchmark::State& state) { RecordLoop<Stamp::kSteady>(state); }
BENCHMARK(BM_RecordEventWithTimestamps)->Arg(65536)->Arg(1 << 22);

void BM_RecordEventWithRuntimeClock(benchmark::State& state) { RecordLoop<Stamp::kRuntime>(state); }
BENCHMARK(BM_RecordEventWithRuntimeClock)->Arg(65536)->Arg(1 << 22);

void BM_EventRingPush(benchmark::State& state) {
  commprof::EventRing ring(static_cast<uint32_t>(state.range(0)));
  auto scratch = std::make_unique<commprof_event[]>(kScratchEvents);
  const commprof_event e = PrefilledEvent();
  const uint64_t capacity = ring.capacity();
  uint64_t since_drain = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring.Push(e));
    if (++since_drain == capacity) {
      state.PauseTiming();
      while (ring.Drain(scratch.get(), kScratchEvents) != 0) {
      }
      state.ResumeTiming();
      since_drain = 0;
    }
  }
  state.counters["dropped"] = static_cast<double>(ring.dropped());
  g_checked_records += ring.pushed();
  if (ring.dropped() != 0 || ring.pushed() != static_cast<uint64_t>(state.iterations())) {
    g_dropped_records += ring.dropped();
    state.SkipWithError("the ring dropped events: this run measured the drop path");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventRingPush)->Arg(65536)->Arg(1 << 22);

void BM_InflightPublishClear(benchmark::State& state) {
  commprof::Runtime rt(BenchConfig(64), BenchIdentity());
  commprof::InflightSlot& slot = rt.Thread()->inflight;
  const commprof_event e = PrefilledEvent();
  uint64_t t = 0;
  for (auto _ : state) {
    const bool published = slot.Publish(e, 7);
    benchmark::DoNotOptimize(published);
    if (published) {
      slot.Clear(++t);
    }
  }
  if (slot.last_completion_ns() != t) {
    state.SkipWithError("the slot was not cleared as published");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_InflightPublishClear);

// Traced (collector/mpi_calls.h) minus BeginEvent and the MPI call: what the in-flight record adds
// shows as the difference to BM_RecordEventWithRuntimeClock.
void BM_TracedShape(benchmark::State& state) {
  commprof::Runtime rt(BenchConfig(static_cast<uint32_t>(state.range(0))), BenchIdentity());
  auto scratch = std::make_unique<commprof_event[]>(kScratchEvents);
  auto drain = [&] { rt.DrainAll(scratch.get(), kScratchEvents, [](const commprof_event*, uint32_t) {}); };
  commprof_event e = PrefilledEvent();
  rt.Record(e);
  drain();
  const uint64_t capacity = rt.Thread()->ring->capacity();
  uint64_t since_drain = 0;
  for (auto _ : state) {
    e.start_ns = rt.Now();
    commprof::InflightSlot& inflight = rt.Thread()->inflight;
    const bool published = inflight.Publish(e, 0);
    e.end_ns = rt.Now();
    if (published) {
      inflight.Clear(e.end_ns);
    }
    rt.Record(e);
    if (++since_drain == capacity) {
      state.PauseTiming();
      drain();
      state.ResumeTiming();
      since_drain = 0;
    }
  }
  CheckNoDrops(state, rt, static_cast<uint64_t>(state.iterations()) + 1);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TracedShape)->Arg(65536);

// For contrast only: a full ring that is never drained, so every Record is a counted drop.
void BM_RecordEventRingFull(benchmark::State& state) {
  commprof::Runtime rt(BenchConfig(16), BenchIdentity());
  commprof_event e = PrefilledEvent();
  for (int i = 0; i < 16; ++i) rt.Record(e);
  for (auto _ : state) rt.Record(e);
  auto bye = rt.Counters();
  state.counters["dropped"] = static_cast<double>(Counter(bye, "dropped_ring_full"));
  state.SetLabel("drop path");
}
BENCHMARK(BM_RecordEventRingFull);

}  // namespace

int main(int argc, char** argv) {
  char dir[] = "/tmp/commprof-bench-XXXXXX";
  if (::mkdtemp(dir) == nullptr) {
    std::perror("commprof_bench_record: mkdtemp");
    return 1;
  }
  g_spool_dir = dir;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(g_spool_dir, ec);
  std::fprintf(stderr, "commprof_bench_record: push-path check: %llu records reached a ring, %llu dropped%s\n",
               static_cast<unsigned long long>(g_checked_records), static_cast<unsigned long long>(g_dropped_records),
               g_dropped_records == 0 ? "" : " (FAILED: those figures are of the drop path)");
  return g_dropped_records == 0 ? 0 : 1;
}
