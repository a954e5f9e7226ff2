// The two timeline encoders against each other (docs/perfetto-trace.md, bench/README.md): the same
// synthetic job (bench/make_synthetic_profile: 16 ranks, 2 M events with GPU records) exported as
// Chrome JSON and as Perfetto protobuf into a stream that discards the bytes, and walked with an
// encoder that writes nothing, so that what each format costs to write is the difference. Counter
// `bytes_per_event`: the output's size per event written.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <streambuf>
#include <string>

#include "analysis/export/chrome_trace.h"
#include "analysis/export/perfetto_trace.h"
#include "analysis/export/timeline_walk.h"
#include "analysis/load/profile_reader.h"

namespace {

// Counts the bytes and keeps none.
class DiscardBuf : public std::streambuf {
 protected:
  std::streamsize xsputn(const char* /*s*/, std::streamsize n) override { return n; }
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
};

std::string Profile() {
  if (const char* given = std::getenv("COMMPROF_BENCH_PROFILE")) {
    return given;
  }
  const std::string path = (std::filesystem::temp_directory_path() / "commprof_trace_export_bench.h5").string();
  if (!std::filesystem::exists(path)) {
    const std::string cmd =
        std::string(COMMPROF_SYNTHETIC_TOOL) + " --ranks 16 --events 2000000 --gpu --out " + path + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) {
      return "";
    }
  }
  return path;
}

// Writes nothing: what the walk (loading, matching, sorting, lanes) costs alone.
class NullEncoder final : public commprof::TraceEncoder {
 public:
  void Begin(const Header& /*h*/) override {}
  uint64_t MaxLaneId() const override { return UINT64_MAX; }
  void Continue(size_t /*ranks_before*/) override {}
  void Rank(const commprof::RankInfo& /*r*/, const std::vector<std::string>& /*strings*/,
            const commprof::TraceRankNumbering& /*numbering*/) override {}
  void BeginTrack(const commprof::RankInfo& /*r*/, std::string_view /*name*/, const commprof::TrackLanes& /*lanes*/,
                  uint32_t /*sort_index*/) override {}
  void Slice(const commprof::TraceSlice& s) override { benchmark::DoNotOptimize(s.start); }
  void EndTrack() override {}
  void BeginCounter(const commprof::RankInfo& /*r*/, std::string_view /*name*/) override {}
  void CounterPoint(int64_t ts, int64_t /*value*/) override { benchmark::DoNotOptimize(ts); }
  void Finish(const Header& /*h*/) override {}
};

enum Format { kWalkOnly = 0, kChrome = 1, kPerfetto = 2 };

void BM_ExportTimeline(benchmark::State& state) {
  const std::string path = Profile();
  auto reader = commprof::ProfileReader::Open(path);
  if (path.empty() || !reader.ok()) {
    state.SkipWithError(("cannot make or open " + path).c_str());
    return;
  }
  commprof::TraceExportStats stats;
  for (auto _ : state) {
    DiscardBuf buf;
    std::ostream out(&buf);
    commprof::TraceExportOptions opts;
    commprof::Status st;
    switch (state.range(0)) {
      case kWalkOnly: {
        commprof::TraceSink sink(out, "null");
        NullEncoder encoder;
        st = commprof::WalkTimeline(*reader.value(), encoder, sink, opts, stats);
        break;
      }
      case kChrome:
        st = commprof::WriteChromeTrace(*reader.value(), out, opts, &stats);
        break;
      default:
        st = commprof::WritePerfettoTrace(*reader.value(), out, opts, &stats);
    }
    if (!st.ok()) {
      state.SkipWithError(st.message().c_str());
      return;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(stats.events * state.iterations()));
  state.counters["bytes_per_event"] =
      stats.events == 0 ? 0.0 : static_cast<double>(stats.bytes) / static_cast<double>(stats.events);
}
BENCHMARK(BM_ExportTimeline)
    ->Arg(kWalkOnly)
    ->Arg(kChrome)
    ->Arg(kPerfetto)
    ->ArgNames({"format"})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
