// Kineto import throughput and memory (docs/kineto-import.md, bench/README.md): one file read by
// ReadKinetoTrace on one core, plain and gzip, from the synthetic trace writer of the unit tests
// (tests/unit/support/kineto_synth.h). Counters: events/s (items_per_second) and the bytes the
// importer holds per kept record (the record vector's capacity plus the string table), the figure
// the issue bounds at 200. Rates are per CPU second (the bench machine is shared; one core).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "analysis/load/kineto_trace.h"
#include "support/kineto_synth.h"

namespace {

std::string MakeTrace(bool gzip) {
  commprof::test_support::KinetoSynth s;
  s.ranks = 1;
  s.iterations = 20000;
  s.compute_kernels = 4;  // 4 x (cpu_op, launch, flow, kernel) + 6 comm/memcpy rows per iteration
  s.gzip = gzip;
  std::string path =
      (std::filesystem::temp_directory_path() / (std::string("commprof_kineto_bench") + (gzip ? ".json.gz" : ".json")))
          .string();
  if (!std::filesystem::exists(path)) {
    commprof::test_support::WriteTraceFile(path, commprof::test_support::KinetoSynthTrace(s, 0), gzip);
  }
  return path;
}

void BM_ReadKinetoTrace(benchmark::State& state) {
  const bool gzip = state.range(0) != 0;
  const std::string path = MakeTrace(gzip);
  uint64_t events = 0;
  double held_per_record = 0;
  for (auto _ : state) {
    auto t = commprof::kineto::ReadKinetoTrace(path);
    if (!t.ok()) {
      state.SkipWithError(t.status().message().c_str());
      return;
    }
    events += t->counts.events_read;
    size_t held = t->events.capacity() * sizeof(commprof_event);
    for (const auto& s : t->strings) held += sizeof(std::string) + s.capacity() + 48;  // + hash-map node
    held_per_record = static_cast<double>(held) / static_cast<double>(t->events.size());
    benchmark::DoNotOptimize(t->events.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.SetBytesProcessed(static_cast<int64_t>(std::filesystem::file_size(path) * state.iterations()));
  state.counters["held_bytes_per_record"] = held_per_record;
}
BENCHMARK(BM_ReadKinetoTrace)->Arg(0)->Arg(1)->ArgNames({"gzip"})->Unit(benchmark::kMillisecond);

// The largest shipped real trace (<repo>/../shared/data/kineto), when present.
void BM_ReadShippedTrace(benchmark::State& state) {
  const std::string path =
      std::string(COMMPROF_SOURCE_DIR) + "/../shared/data/kineto/hta-single-rank-nccl/df_index_resolver.json.gz";
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("not found: " + path).c_str());
    return;
  }
  uint64_t events = 0;
  for (auto _ : state) {
    auto t = commprof::kineto::ReadKinetoTrace(path);
    if (!t.ok()) {
      state.SkipWithError(t.status().message().c_str());
      return;
    }
    events += t->counts.events_read;
    benchmark::DoNotOptimize(t->events.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
}
BENCHMARK(BM_ReadShippedTrace)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
