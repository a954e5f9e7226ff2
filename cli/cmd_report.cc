// `commprof report FILE.h5 [--format text|json] [-o OUT]`: cross-rank wait and straggler report
// over the matched blocking MPI collectives (docs/metrics.md, docs/cli.md).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analysis/load/profile_reader.h"
#include "analysis/match/clock_violations.h"
#include "analysis/match/collective_instances.h"
#include "analysis/metrics/wait_metrics.h"
#include "cli/commands.h"

namespace commprof::cli {
namespace {

struct Options {
  std::string path;
  std::string format = "text";
  std::string output;
};

std::string Ms(int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", static_cast<double>(ns) / 1e6);
  return b;
}

void WriteText(std::ostream& os, const ProfileInfo& info, const WaitReport& rep, const ClockViolations& cv) {
  char line[256];
  os << "commprof report: " << info.path << "\n";
  os << "job " << info.job_id << ", " << info.world_size << " ranks, " << rep.matched << " matched collective instances ("
     << rep.incomplete << " incomplete)\n";
  int64_t worst_bound = -1;
  for (const auto& r : info.ranks) worst_bound = std::max(worst_bound, r.clock_error_bound_ns);
  os << "clock: largest error bound " << (worst_bound < 0 ? std::string("unmeasured") : std::to_string(worst_bound) + " ns")
     << ", " << cv.violations << " clock-condition violation(s)\n"
     << "       skews under " << rep.skew_threshold_ns << " ns are not attributed to a straggler\n\n";
  std::snprintf(line, sizeof line, "%-21s %8s %12s %14s %13s %13s %13s\n", "collective", "count", "bytes",
                "mean dur (ms)", "mean wait(ms)", "skew p50(ms)", "skew p99(ms)");
  os << line;
  for (const auto& t : rep.types) {
    std::snprintf(line, sizeof line, "%-21s %8llu %12llu %14s %13s %13s %13s\n", OpTypeName(t.op),
                  static_cast<unsigned long long>(t.count), static_cast<unsigned long long>(t.bytes),
                  Ms(static_cast<int64_t>(t.mean_duration_ns)).c_str(), Ms(static_cast<int64_t>(t.mean_wait_ns)).c_str(),
                  Ms(t.skew_p50_ns).c_str(), Ms(t.skew_p99_ns).c_str());
    os << line;
  }
  os << "\n";
  std::snprintf(line, sizeof line, "%-5s %-15s %13s %13s %7s %10s %15s %15s\n", "rank", "host", "comm (ms)", "wait (ms)",
                "wait %", "times last", "delay caused", "wait imposed");
  os << line;
  for (const auto& m : rep.ranks) {
    std::snprintf(line, sizeof line, "%-5u %-15.15s %13s %13s %6.1f%% %10llu %12s ms %12s ms\n", m.rank, m.host.c_str(),
                  Ms(m.comm_time_ns).c_str(), Ms(m.wait_time_ns).c_str(), 100.0 * m.wait_share,
                  static_cast<unsigned long long>(m.times_last), Ms(m.delay_caused_ns).c_str(), Ms(m.wait_imposed_ns).c_str());
    os << line;
  }
  os << "\nverdict: ";
  const StragglerVerdict& v = rep.verdict;
  if (!v.found) {
    os << "no straggler: no rank was last in half or more of the matched instances\n";
    return;
  }
  std::snprintf(line, sizeof line,
                "rank %u on %s is the straggler\n"
                "  last in %.0f%% of %llu instances (%s); delay it alone caused: %s ms in all\n"
                "  cause hint: %s\n",
                v.rank, v.host.c_str(), 100.0 * v.share_last, static_cast<unsigned long long>(rep.matched),
                v.persistent ? "persistent" : "transient", Ms(v.delay_caused_ns).c_str(),
                v.cause == "compute" ? "longer compute before the collective" : "slow transfer");
  os << line;
}

nlohmann::ordered_json ToJson(const ProfileInfo& info, const WaitReport& rep, const ClockViolations& cv) {
  nlohmann::ordered_json j;
  j["schema"] = "commprof-report";
  j["schema_version"] = 1;
  j["path"] = info.path;
  j["job_id"] = info.job_id;
  j["world_size"] = info.world_size;
  j["instances"] = {{"matched", rep.matched}, {"incomplete", rep.incomplete}};
  j["skew_threshold_ns"] = rep.skew_threshold_ns;
  j["ranks"] = nlohmann::ordered_json::array();
  for (const auto& m : rep.ranks) {
    j["ranks"].push_back({{"rank", m.rank}, {"host", m.host}, {"comm_time_ns", m.comm_time_ns},
                          {"wait_time_ns", m.wait_time_ns}, {"wait_share", m.wait_share}, {"times_last", m.times_last},
                          {"delay_caused_ns", m.delay_caused_ns}, {"wait_imposed_ns", m.wait_imposed_ns},
                          {"instances", m.instances}});
  }
  j["collectives"] = nlohmann::ordered_json::array();
  for (const auto& t : rep.types) {
    j["collectives"].push_back({{"type", OpTypeName(t.op)}, {"count", t.count}, {"bytes", t.bytes},
                                {"mean_duration_ns", t.mean_duration_ns}, {"mean_wait_ns", t.mean_wait_ns},
                                {"skew_p50_ns", t.skew_p50_ns}, {"skew_p99_ns", t.skew_p99_ns}});
  }
  j["stragglers"] = nlohmann::ordered_json::array();
  if (rep.verdict.found) {
    j["stragglers"].push_back({{"rank", rep.verdict.rank}, {"host", rep.verdict.host},
                               {"share_last", rep.verdict.share_last}, {"delay_caused_ns", rep.verdict.delay_caused_ns},
                               {"persistent", rep.verdict.persistent}, {"cause", rep.verdict.cause}});
  }
  nlohmann::ordered_json clock;
  clock["violations"] = cv.violations;
  clock["instances_checked"] = cv.instances_checked;
  clock["ranks"] = nlohmann::ordered_json::array();
  for (const auto& r : info.ranks) {
    clock["ranks"].push_back({{"rank", r.rank}, {"clock_offset_ns", r.clock_offset_ns},
                              {"clock_drift_ppm", r.clock_drift_ppm}, {"clock_error_bound_ns", r.clock_error_bound_ns},
                              {"clock_method", r.clock_method}});
  }
  j["clock"] = clock;
  return j;
}

int RunReport(const Options& o) {
  if (o.format != "text" && o.format != "json") {
    std::fprintf(stderr, "commprof report: --format %s is not supported (text or json)\n", o.format.c_str());
    return 2;
  }
  auto reader = ProfileReader::Open(o.path);
  if (!reader.ok()) {
    std::fprintf(stderr, "commprof report: %s\n", reader.status().message().c_str());
    return 1;
  }
  auto instances = LoadCollectiveInstances(*reader.value(), true);
  if (!instances.ok()) {
    std::fprintf(stderr, "commprof report: %s\n", instances.status().message().c_str());
    return 1;
  }
  ClockViolations cv = CountClockViolations(instances.value());
  WaitReport rep = ComputeWaitMetrics(reader.value()->info(), instances.value());
  std::ostringstream os;
  if (o.format == "json") {
    os << ToJson(reader.value()->info(), rep, cv).dump(2) << "\n";
  } else {
    WriteText(os, reader.value()->info(), rep, cv);
  }
  if (o.output.empty()) {
    std::cout << os.str();
    return 0;
  }
  std::ofstream f(o.output);
  f << os.str();
  if (!f) {
    std::fprintf(stderr, "commprof report: cannot write %s\n", o.output.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

Runner AddReportCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("report", "Cross-rank report: wait per rank and collective, stragglers and the "
                                                "verdict, over the matched blocking MPI collectives.");
  sub->add_option("file", o->path, "commprof HDF5 file")->required();
  sub->add_option("--format", o->format, "text or json (schema in docs/cli.md)")->capture_default_str();
  sub->add_option("-o,--output", o->output, "write to this file instead of standard output");
  return [o] { return RunReport(*o); };
}

}  // namespace commprof::cli
