// `commprof hta FILE.h5 [--format text|json] [--ranks LIST] [--kernel-delay-us N] [--num-kernels N]
// [--duration-ratio R]`: HTA's per-rank GPU analyses to HTA's definitions (docs/metrics.md §8,
// docs/cli.md): comm/comp overlap, temporal breakdown, idle time per stream, kernel breakdown,
// queue length per stream and kernel launch statistics. One rank's GPU records at a time.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/metrics/gpu_breakdown.h"
#include "analysis/metrics/gpu_launch_analysis.h"
#include "analysis/metrics/gpu_trace.h"
#include "analysis/report/stats_output.h"
#include "cli/commands.h"
#include "core/schema/enums.h"

namespace commprof::cli {
namespace {

constexpr int kHtaJsonVersion = 1;
constexpr const char* kNoGpu = "no GPU records";

struct Options {
  std::string path;
  std::string format = "text";
  std::string ranks;
  bool ranks_given = false;  // an empty --ranks "" is an error, not every rank
  double kernel_delay_us = 30.0;
  uint32_t num_kernels = 10;
  double duration_ratio = 0.8;
  int64_t window = -1;
};

// One rank's results; its records are dropped once these are computed.
struct RankAnalyses {
  uint32_t rank = 0;
  uint64_t events_read = 0;
  uint64_t gpu_records = 0, api_calls = 0, launch_calls = 0;
  GpuBreakdown breakdown;
  std::vector<StreamIdle> idle;
  std::vector<StreamQueueLength> queue;
  LaunchStats launch;
};

// ---- JSON (every key is documented in docs/cli.md) ----

nlohmann::ordered_json SummaryJson(const DurationSummary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50}, {"p95", s.p95}, {"max", s.max}};
}

double Share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

nlohmann::ordered_json RankJson(const RankAnalyses& a, int64_t delay_ns) {
  const bool gpu = a.gpu_records > 0;
  const bool launches = !a.queue.empty() || a.launch.pairs > 0;
  nlohmann::ordered_json j;
  j["rank"] = a.rank;
  j["events_read"] = a.events_read;
  j["gpu_records"] = a.gpu_records;
  j["cuda_api_calls"] = a.api_calls;
  j["launch_calls"] = a.launch_calls;

  const CommCompOverlap& ov = a.breakdown.overlap;
  auto& jo = j["comm_comp_overlap"];
  jo["status"] = !gpu ? kNoGpu : ov.has_comm ? "ok" : "no communication kernels";
  jo["comm_ns"] = ov.comm_ns;
  jo["compute_ns"] = ov.compute_ns;
  jo["overlap_ns"] = ov.overlap_ns;
  jo["ratio"] = ov.has_comm ? nlohmann::ordered_json(ov.ratio) : nlohmann::ordered_json(nullptr);
  jo["pctg"] = ov.has_comm ? nlohmann::ordered_json(ov.pctg) : nlohmann::ordered_json(nullptr);

  const TemporalBreakdown& t = a.breakdown.temporal;
  j["temporal_breakdown"] = {
      {"status", gpu ? "ok" : kNoGpu},  {"kernel_time_ns", t.kernel_time_ns},    {"idle_ns", t.idle_ns},
      {"compute_ns", t.compute_ns},     {"non_compute_ns", t.non_compute_ns},    {"idle_pctg", t.idle_pctg},
      {"compute_pctg", t.compute_pctg}, {"non_compute_pctg", t.non_compute_pctg}};

  auto& ji = j["idle_time_breakdown"];
  ji["status"] = !gpu ? kNoGpu : a.idle.empty() ? "no kernels" : "ok";  // sync records only
  ji["consecutive_kernel_delay_ns"] = delay_ns;
  ji["streams"] = nlohmann::ordered_json::array();
  for (const StreamIdle& s : a.idle) {
    const int64_t idle = s.idle_ns();
    ji["streams"].push_back({{"device", s.device},
                             {"stream", s.stream},
                             {"records", s.records},
                             {"span_ns", s.span_ns},
                             {"busy_ns", s.busy_ns},
                             {"idle_ns", idle},
                             {"host_wait_ns", s.host_wait_ns},
                             {"kernel_wait_ns", s.kernel_wait_ns},
                             {"other_ns", s.other_ns},
                             {"host_wait_ratio", Share(s.host_wait_ns, idle)},
                             {"kernel_wait_ratio", Share(s.kernel_wait_ns, idle)},
                             {"other_ratio", Share(s.other_ns, idle)},
                             {"host_wait_gaps", s.host_wait_gaps},
                             {"kernel_wait_gaps", s.kernel_wait_gaps},
                             {"other_gaps", s.other_gaps}});
  }

  auto& jk = j["kernel_breakdown"];
  jk["status"] = !gpu ? kNoGpu : a.breakdown.kernels.top.empty() ? "no kernels" : "ok";
  jk["kernel_types"] = nlohmann::ordered_json::array();
  for (const KernelTypeTime& k : a.breakdown.kernels.by_mask) {
    jk["kernel_types"].push_back({{"mask", k.mask}, {"name", k.name}, {"time_ns", k.time_ns}, {"pctg", k.pctg}});
  }
  jk["top_kernels"] = nlohmann::ordered_json::array();
  for (const KernelTypeTop& top : a.breakdown.kernels.top) {
    nlohmann::ordered_json jt{{"type", GpuKernelTypeName(top.type)}, {"distinct_names", top.distinct_names}};
    jt["kernels"] = nlohmann::ordered_json::array();
    for (const KernelStats& k : top.kernels) {
      jt["kernels"].push_back({{"name", k.name},
                               {"count", k.count},
                               {"sum_ns", k.sum_ns},
                               {"max_ns", k.max_ns},
                               {"min_ns", k.min_ns},
                               {"mean_ns", k.mean_ns},
                               {"std_ns", k.std_ns}});
    }
    jk["top_kernels"].push_back(std::move(jt));
  }

  auto& jq = j["queue_length"];
  jq["status"] = !gpu ? kNoGpu : launches ? "ok" : "no launch calls";
  jq["max_queue_per_stream"] = kCudaMaxLaunchQueuePerStream;
  jq["streams"] = nlohmann::ordered_json::array();
  for (const StreamQueueLength& q : a.queue) {
    jq["streams"].push_back({{"device", q.device},
                             {"stream", q.stream},
                             {"count", q.count},
                             {"mean", q.mean},
                             {"min", q.min},
                             {"p25", q.p25},
                             {"p50", q.p50},
                             {"p75", q.p75},
                             {"max", q.max},
                             {"blocked_ns", q.blocked_ns},
                             {"blocked_ratio", q.blocked_ratio}});
  }

  const LaunchStats& l = a.launch;
  j["kernel_launch"] = {{"status", !gpu       ? kNoGpu
                                   : launches ? "ok"
                                              : "no launch calls"},
                        {"pairs", l.pairs},
                        {"launches_without_gpu", l.launches_without_gpu},
                        {"cpu_duration_ns", SummaryJson(l.cpu_duration)},
                        {"gpu_duration_ns", SummaryJson(l.gpu_duration)},
                        {"launch_delay_ns", SummaryJson(l.launch_delay)},
                        {"launch_delay_outliers", l.launch_delay_outliers},
                        {"cpu_duration_outliers", l.cpu_duration_outliers},
                        {"short_kernels", l.short_kernels}};
  return j;
}

// ---- text: tables of at most 100 columns ----

std::string Us(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ns / 1000.0);
  return buf;
}

void PrintRankText(const RankAnalyses& a, int64_t delay_ns) {
  std::printf("== rank %u: %" PRIu64 " GPU records, %" PRIu64 " CUDA API calls (%" PRIu64 " launches)\n", a.rank,
              a.gpu_records, a.api_calls, a.launch_calls);
  if (a.gpu_records == 0) {
    std::printf("  every analysis: %s\n\n", kNoGpu);
    return;
  }
  const CommCompOverlap& ov = a.breakdown.overlap;
  if (ov.has_comm) {
    std::printf("comm/comp overlap: %.2f %% (%s of %s us of communication under computation)\n", ov.pctg,
                Us(static_cast<double>(ov.overlap_ns)).c_str(), Us(static_cast<double>(ov.comm_ns)).c_str());
  } else {
    std::printf("comm/comp overlap: no communication kernels\n");
  }
  const TemporalBreakdown& t = a.breakdown.temporal;
  std::printf("temporal breakdown (us): kernel_time %s\n", Us(static_cast<double>(t.kernel_time_ns)).c_str());
  std::printf("  compute %s (%.2f %%), non_compute %s (%.2f %%), idle %s (%.2f %%)\n",
              Us(static_cast<double>(t.compute_ns)).c_str(), t.compute_pctg,
              Us(static_cast<double>(t.non_compute_ns)).c_str(), t.non_compute_pctg,
              Us(static_cast<double>(t.idle_ns)).c_str(), t.idle_pctg);

  std::printf("\nidle time per stream (us; kernel_wait: gap < %s us)\n", Us(static_cast<double>(delay_ns)).c_str());
  std::printf("%-6s %-8s %8s %14s %14s %14s %14s\n", "device", "stream", "records", "idle", "host_wait", "kernel_wait",
              "other");
  for (const StreamIdle& s : a.idle) {
    std::printf("%-6u %-8u %8" PRIu64 " %14s %14s %14s %14s\n", s.device, s.stream, s.records,
                Us(static_cast<double>(s.idle_ns())).c_str(), Us(static_cast<double>(s.host_wait_ns)).c_str(),
                Us(static_cast<double>(s.kernel_wait_ns)).c_str(), Us(static_cast<double>(s.other_ns)).c_str());
  }

  std::printf("\nkernel types (us)\n");
  for (const KernelTypeTime& k : a.breakdown.kernels.by_mask) {
    std::printf("  %-60s %16s %7.2f %%\n", k.name.c_str(), Us(static_cast<double>(k.time_ns)).c_str(), k.pctg);
  }
  for (const KernelTypeTop& top : a.breakdown.kernels.top) {
    std::printf("\ntop %s kernels (%" PRIu64 " names; us)\n", GpuKernelTypeName(top.type), top.distinct_names);
    std::printf("%-40s %7s %12s %10s %10s %10s\n", "name", "count", "sum", "mean", "max", "std");
    // Kernel names differ late (template arguments): cut so that different names print differently.
    std::vector<std::string> names;
    for (const KernelStats& k : top.kernels) {
      names.push_back(k.name);
    }
    const std::vector<std::string> printed = ElideDistinct(names, 40);
    for (size_t i = 0; i < top.kernels.size(); ++i) {
      const KernelStats& k = top.kernels[i];
      std::printf("%-40s %7" PRIu64 " %12s %10s %10s %10s\n", printed[i].c_str(), k.count,
                  Us(static_cast<double>(k.sum_ns)).c_str(), Us(k.mean_ns).c_str(),
                  Us(static_cast<double>(k.max_ns)).c_str(), Us(k.std_ns).c_str());
    }
  }

  if (a.queue.empty()) {
    std::printf("\nqueue length and launch statistics: no launch calls\n\n");
    return;
  }
  std::printf("\nqueue length per stream (samples; blocked: queue >= %lld)\n",
              static_cast<long long>(kCudaMaxLaunchQueuePerStream));
  std::printf("%-6s %-8s %8s %8s %6s %8s %8s %8s %6s %14s\n", "device", "stream", "count", "mean", "min", "p25", "p50",
              "p75", "max", "blocked_us");
  for (const StreamQueueLength& q : a.queue) {
    std::printf("%-6u %-8u %8" PRIu64 " %8.2f %6.0f %8.2f %8.2f %8.2f %6.0f %14s\n", q.device, q.stream, q.count,
                q.mean, q.min, q.p25, q.p50, q.p75, q.max, Us(static_cast<double>(q.blocked_ns)).c_str());
  }
  const LaunchStats& l = a.launch;
  std::printf("\nkernel launches: %" PRIu64 " pairs, %" PRIu64 " launch calls without a GPU record (us)\n", l.pairs,
              l.launches_without_gpu);
  std::printf("%-14s %8s %12s %12s %12s %12s\n", "", "count", "mean", "p50", "p95", "max");
  auto row = [](const char* label, const DurationSummary& s) {
    std::printf("%-14s %8" PRIu64 " %12s %12s %12s %12s\n", label, s.count, Us(s.mean).c_str(), Us(s.p50).c_str(),
                Us(s.p95).c_str(), Us(static_cast<double>(s.max)).c_str());
  };
  row("cpu_duration", l.cpu_duration);
  row("gpu_duration", l.gpu_duration);
  row("launch_delay", l.launch_delay);
  std::printf("outliers: %" PRIu64 " launch delays > 100 us, %" PRIu64 " launch calls > 50 us\n",
              l.launch_delay_outliers, l.cpu_duration_outliers);
  std::printf("short kernels (gpu_duration < cpu_duration): %" PRIu64 "\n\n", l.short_kernels);
}

int RunHta(const Options& o) {
  if (o.format != "text" && o.format != "json") {
    std::fprintf(stderr, "commprof hta: --format %s is not supported (text or json)\n", o.format.c_str());
    return 2;
  }
  if (!(o.kernel_delay_us >= 0.0) || o.kernel_delay_us > 1e9) {
    std::fprintf(stderr, "commprof hta: --kernel-delay-us must be a number of microseconds >= 0\n");
    return 2;
  }
  if (!(o.duration_ratio > 0.0 && o.duration_ratio <= 1.0)) {
    std::fprintf(stderr, "commprof hta: --duration-ratio must be in (0, 1]\n");
    return 2;
  }
  if (o.num_kernels == 0) {
    std::fprintf(stderr, "commprof hta: --num-kernels must be at least 1\n");
    return 2;
  }
  std::vector<uint32_t> wanted;
  if (o.ranks_given && !ParseRankList(o.ranks, wanted)) {
    std::fprintf(stderr, "commprof hta: --ranks '%s' is not a list like 0,2 or 0-3,8\n", o.ranks.c_str());
    return 2;
  }
  auto reader = OpenOrSay(o.path, "hta");
  if (reader == nullptr) {
    return kExitUnreadable;
  }
  if (!SelectWindowIfAsked(*reader, o.window, "hta")) {
    return 1;
  }
  const ProfileInfo& info = reader->info();
  for (const RankFault& f : info.faults) {
    std::fprintf(stderr, "commprof hta: %s\n", f.message.c_str());
  }
  std::vector<uint32_t> ranks;
  for (const RankInfo& r : info.ranks) {
    if (r.status != schema::RankStatusName(schema::RankStatus::kMissing)) {
      ranks.push_back(r.rank);
    }
  }
  if (!wanted.empty()) {
    for (uint32_t w : wanted) {
      if (std::find(ranks.begin(), ranks.end(), w) == ranks.end()) {
        std::fprintf(stderr, "commprof hta: --ranks: %s has no events of rank %u\n", o.path.c_str(), w);
        return 2;
      }
    }
    ranks = wanted;
  }

  const auto delay_ns = static_cast<int64_t>(std::llround(o.kernel_delay_us * 1000.0));
  const KernelBreakdownOptions kopts{o.num_kernels, o.duration_ratio};
  nlohmann::ordered_json doc;
  doc["schema"] = "commprof-hta";
  doc["schema_version"] = kHtaJsonVersion;
  doc["path"] = o.path;
  doc["options"] = {
      {"consecutive_kernel_delay_ns", delay_ns}, {"num_kernels", o.num_kernels}, {"duration_ratio", o.duration_ratio}};
  doc["ranks"] = nlohmann::ordered_json::array();
  for (uint32_t rank : ranks) {
    auto trace = CollectRankGpuTrace(*reader, rank);
    if (!trace.ok()) {
      std::fprintf(stderr, "commprof hta: %s\n", trace.status().message().c_str());
      return 1;
    }
    RankAnalyses a;
    a.gpu_records = trace->records.size();
    a.api_calls = trace->api_calls.size();
    for (const ApiCall& c : trace->api_calls) {
      a.launch_calls += c.launch ? 1 : 0;
    }
    a.breakdown = ComputeGpuBreakdown(trace.value(), kopts);
    a.idle = ComputeIdleBreakdown(trace.value(), {delay_ns});
    a.queue = ComputeQueueLength(trace.value());
    a.launch = ComputeLaunchStats(trace.value());
    a.rank = trace->rank;
    a.events_read = trace->events_read;
    if (o.format == "json") {
      doc["ranks"].push_back(RankJson(a, delay_ns));
    } else {
      PrintRankText(a, delay_ns);
    }
  }
  if (o.format == "json") {
    std::cout << doc.dump(2) << "\n";
  }
  // Exit 1 when some ranks could not be read, although the others were analysed.
  return info.faults.empty() ? 0 : 1;
}

}  // namespace

Runner AddHtaCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "hta",
      "HTA-compatible per-rank GPU analyses (docs/metrics.md §8): comm/comp overlap, temporal breakdown, idle "
      "time per stream (host_wait / kernel_wait / other), kernel breakdown by type with the top kernels, launch "
      "queue length per stream and kernel launch statistics. Exact ns on each rank's own clock.");
  sub->add_option("file", o->path, "commprof HDF5 file (recorded, or imported from torch.profiler)")->required();
  sub->add_option("--format", o->format, "text or json (versioned document, keys in docs/cli.md)")
      ->type_name("text|json")
      ->capture_default_str();
  sub->add_option("--ranks", o->ranks, "only these ranks, e.g. 0,2 or 0-3,8 (default: every rank with events)")
      ->each([o](const std::string&) { o->ranks_given = true; });
  sub->add_option("--kernel-delay-us", o->kernel_delay_us,
                  "idle gaps shorter than this are kernel_wait (HTA's consecutive_kernel_delay, effectively 30 us)")
      ->capture_default_str();
  sub->add_option("--num-kernels", o->num_kernels, "kernels listed per type before the rest go to `others`")
      ->capture_default_str();
  sub->add_option("--duration-ratio", o->duration_ratio,
                  "kernels past this share of the type's time go to `others` (HTA's duration_ratio)")
      ->capture_default_str();
  AddWindowOption(sub, o->window);
  return [o] { return RunHta(*o); };
}

}  // namespace commprof::cli
