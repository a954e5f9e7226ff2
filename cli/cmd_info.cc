// `commprof info FILE.h5 [--json]`: job metadata and, per rank, host, pid, status, event counts
// by kind and by name, dropped counts and the clock model.
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "analysis/load/profile_reader.h"
#include "analysis/match/clock_violations.h"
#include "cli/commands.h"
#include "core/schema/enums.h"

namespace commprof::cli {
namespace {

struct Options {
  std::string path;
  bool json = false;
};

struct RankCounts {
  std::map<std::string, uint64_t> by_kind;
  std::map<std::string, uint64_t> by_name;
};

int RunInfo(const Options& o) {
  auto reader = ProfileReader::Open(o.path);
  if (!reader.ok()) {
    std::fprintf(stderr, "commprof info: %s\n", reader.status().message().c_str());
    return 1;
  }
  const ProfileInfo& info = reader.value()->info();
  std::vector<RankCounts> counts(info.ranks.size());
  for (size_t i = 0; i < info.ranks.size(); ++i) {
    auto strings = reader.value()->Strings(info.ranks[i].rank);
    if (!strings.ok()) {
      std::fprintf(stderr, "commprof info: %s\n", strings.status().message().c_str());
      return 1;
    }
    std::map<uint32_t, uint64_t> by_name_id;
    Status st = reader.value()->ForEachEventChunk(info.ranks[i].rank, [&](std::span<const commprof_event> chunk) {
      for (const auto& e : chunk) {
        counts[i].by_kind[schema::KindName(e.kind)]++;
        by_name_id[e.name_id]++;
      }
    });
    if (!st.ok()) {
      std::fprintf(stderr, "commprof info: %s\n", st.message().c_str());
      return 1;
    }
    for (auto [id, n] : by_name_id) {
      std::string name = id < strings->size() ? (*strings)[id] : "<unknown name " + std::to_string(id) + ">";
      counts[i].by_name[name.empty() ? "<unnamed>" : name] += n;
    }
  }

  auto aligned = CountClockViolations(*reader.value(), true);
  auto raw = CountClockViolations(*reader.value(), false);
  if (!aligned.ok() || !raw.ok()) {
    std::fprintf(stderr, "commprof info: %s\n", (aligned.ok() ? raw.status() : aligned.status()).message().c_str());
    return 1;
  }

  if (o.json) {
    nlohmann::ordered_json j;
    j["path"] = info.path;
    j["format"] = info.format;
    j["format_version"] = info.format_version;
    j["job_id"] = info.job_id;
    j["command_line"] = info.command_line;
    j["world_size"] = info.world_size;
    j["start_epoch_ns"] = info.start_epoch_ns;
    j["start_utc"] = FormatUtc(info.start_epoch_ns);
    j["finalized"] = info.finalized;
    j["clock"] = {{"instances_checked", aligned->instances_checked},
                  {"violations", aligned->violations},
                  {"violations_unaligned", raw->violations}};
    j["ranks"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < info.ranks.size(); ++i) {
      const RankInfo& r = info.ranks[i];
      nlohmann::ordered_json jr;
      jr["rank"] = r.rank;
      jr["host"] = r.host;
      jr["pid"] = r.pid;
      jr["status"] = r.status;
      jr["end_reason"] = r.end_reason;
      jr["event_count"] = r.event_count;
      jr["events_by_kind"] = counts[i].by_kind;
      jr["events_by_name"] = counts[i].by_name;
      jr["dropped_events"] = r.dropped_events;
      jr["counters"] = r.counters;
      jr["clock_offset_ns"] = r.clock_offset_ns;
      jr["clock_drift_ppm"] = r.clock_drift_ppm;
      jr["clock_error_bound_ns"] = r.clock_error_bound_ns;
      jr["clock_method"] = r.clock_method;
      j["ranks"].push_back(std::move(jr));
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::printf("file:        %s\n", info.path.c_str());
  std::printf("format:      %s v%llu%s\n", info.format.c_str(), static_cast<unsigned long long>(info.format_version),
              info.finalized ? "" : " (not finalized: the writer was killed; flushed data is intact)");
  std::printf("job:         %s\n", info.job_id.c_str());
  std::printf("command:     %s\n", info.command_line.c_str());
  std::printf("world size:  %llu\n", static_cast<unsigned long long>(info.world_size));
  std::printf("start (UTC): %s\n", FormatUtc(info.start_epoch_ns).c_str());
  std::printf(
      "clock:       %llu clock-condition violation(s) in %llu blocking collective instance(s) after "
      "alignment (%llu on raw clocks)\n\n",
      static_cast<unsigned long long>(aligned->violations), static_cast<unsigned long long>(aligned->instances_checked),
      static_cast<unsigned long long>(raw->violations));
  std::printf("%-5s %-20s %-8s %-13s %10s %8s %14s %10s %12s\n", "rank", "host", "pid", "status", "events", "dropped",
              "clock offset", "drift", "error bound");
  for (const RankInfo& r : info.ranks) {
    std::string bound = r.clock_error_bound_ns < 0 ? "unmeasured" : std::to_string(r.clock_error_bound_ns) + " ns";
    std::printf("%-5u %-20.20s %-8llu %-13s %10llu %8llu %11lld ns %6.2f ppm %12s\n", r.rank, r.host.c_str(),
                static_cast<unsigned long long>(r.pid), r.status.c_str(),
                static_cast<unsigned long long>(r.event_count), static_cast<unsigned long long>(r.dropped_events),
                static_cast<long long>(r.clock_offset_ns), r.clock_drift_ppm, bound.c_str());
  }
  std::printf("\nevents by name:\n");
  std::map<std::string, std::vector<uint64_t>> table;
  for (size_t i = 0; i < info.ranks.size(); ++i) {
    for (const auto& [name, n] : counts[i].by_name) {
      auto& row = table[name];
      row.resize(info.ranks.size(), 0);
      row[i] = n;
    }
  }
  std::printf("  %-26s", "name");
  for (const RankInfo& r : info.ranks) {
    std::printf(" %9s", ("rank " + std::to_string(r.rank)).c_str());
  }
  std::printf("\n");
  for (const auto& [name, row] : table) {
    std::printf("  %-26.26s", name.c_str());
    for (uint64_t n : row) {
      std::printf(" %9llu", static_cast<unsigned long long>(n));
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

Runner AddInfoCommand(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("info",
                                     "Print job metadata, per-rank host/pid/status, event counts by kind "
                                     "and name, dropped counts and clock model of a commprof file.");
  sub->add_option("file", opts->path, "commprof HDF5 file")->required();
  sub->add_flag("--json", opts->json, "machine-readable output (schema in docs/cli.md)");
  return [opts] { return RunInfo(*opts); };
}

}  // namespace commprof::cli
