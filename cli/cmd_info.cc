// `commprof info FILE.h5 [--json]`: job metadata and, per rank, host, pid, status, event counts
// by kind and by name, dropped counts and the clock model.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/load/event_screen.h"
#include "analysis/load/profile_reader.h"
#include "analysis/match/clock_violations.h"
#include "cli/commands.h"
#include "core/schema/enums.h"

namespace commprof::cli {
namespace {

struct Options {
  std::string path;
  bool json = false;
  int64_t window = -1;
};

// One line per part of the file that could not be read; exit code 1 when there is any, although
// everything readable was shown (docs/cli.md#exit-codes).
int ReportFaults(const ProfileInfo& info) {
  for (const RankFault& f : info.faults) {
    std::fprintf(stderr, "commprof info: %s\n", f.message.c_str());
  }
  return info.faults.empty() ? 0 : 1;
}

// The loss summary: what the collectors dropped and what never reached the file.
void PrintLoss(const ProfileInfo& info) {
  uint64_t dropped = 0, lost_events = 0, damaged = 0, lost_batches = 0, unknown = 0, ranks = 0;
  for (const RankInfo& r : info.ranks) {
    dropped += r.dropped_events;
    lost_events += r.events_lost.value_or(0);
    damaged += r.damaged_tail;
    lost_batches += r.batches_lost;
    unknown += r.batches_lost > 0 && !r.events_lost ? 1 : 0;
    ranks += r.missing_events() > 0 || r.batches_lost > 0 ? 1 : 0;
  }
  if (ranks == 0 && info.events_not_stored == 0) {
    return;
  }
  std::printf(
      "\nloss:        %llu event(s) recorded but not in the file on %llu rank(s): %llu dropped in the collector, "
      "%llu shipped but lost with %llu events frame(s)%s%s%s\n",
      static_cast<unsigned long long>(dropped) + lost_events + damaged + info.events_not_stored,
      static_cast<unsigned long long>(ranks), static_cast<unsigned long long>(dropped),
      static_cast<unsigned long long>(lost_events), static_cast<unsigned long long>(lost_batches),
      damaged > 0 ? (", " + std::to_string(damaged) + " in damaged last chunks").c_str() : "",
      info.events_not_stored > 0
          ? (", " + std::to_string(info.events_not_stored) + " not stored after a failed write (write_status)").c_str()
          : "",
      unknown > 0 ? " (plus the events of lost frames of ranks without a bye, unknown)" : "");
}

struct RankCounts {
  std::map<std::string, uint64_t> by_kind;
  std::map<std::string, uint64_t> by_name;
};

// The events a rank's counts hold: all of them, or those of the selected window.
uint64_t Selected(const RankCounts& c) {
  uint64_t n = 0;
  for (const auto& [kind, count] : c.by_kind) {
    n += count;
  }
  return n;
}

// What `info` shows as a rank's status: the stored one, marked when the file is known to lack
// some of the rank's events, so a "complete" rank with lost batches does not look whole.
std::string StatusShown(const RankInfo& r) {
  return r.batches_lost > 0 || r.missing_events() > 0 ? r.status + " (lossy)" : r.status;
}

std::string EndReasonShown(const RankInfo& r) {
  if (r.end_reason.empty() && r.status == schema::RankStatusName(schema::RankStatus::kMissing)) {
    return "never connected";
  }
  return r.end_reason;
}

// The events of the rank the file lacks, as text: "?" where lost batches' events are unknown.
std::string MissingShown(const RankInfo& r) {
  std::string s = std::to_string(r.missing_events());
  if (r.batches_lost > 0 && !r.events_lost) {
    s += "+?";
  }
  return s;
}

int RunInfo(const Options& o) {
  auto reader = OpenOrSay(o.path, "info");
  if (reader == nullptr) {
    return kExitUnreadable;
  }
  if (!SelectWindowIfAsked(*reader, o.window, "info")) {
    return 1;
  }
  // Ranks with a row the analyses cannot take are left out and named, like unreadable groups.
  ScreenEventRows(*reader);
  const ProfileInfo& info = reader->info();
  const RankRanges never = info.NeverConnected();
  std::vector<RankCounts> counts(info.ranks.size());
  for (size_t i = 0; i < info.ranks.size(); ++i) {
    auto strings = reader->Strings(info.ranks[i].rank);
    if (!strings.ok()) {
      std::fprintf(stderr, "commprof info: %s\n", strings.status().message().c_str());
      return 1;
    }
    std::map<uint32_t, uint64_t> by_name_id;
    Status st = reader->ForEachEventChunk(info.ranks[i].rank, [&](std::span<const commprof_event> chunk) {
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

  auto aligned = CountClockViolations(*reader, true);
  auto raw = CountClockViolations(*reader, false);
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
    j["incarnation"] = info.incarnation;
    j["shard"] = info.shard;
    j["restart_files"] = info.restart_files;
    j["world_size"] = info.world_size;
    j["unlinked_shards"] = UnlinkedShards(info);
    j["kept_spools"] = KeptSpools(info);
    j["start_epoch_ns"] = info.start_epoch_ns;
    j["start_utc"] = FormatUtc(info.start_epoch_ns);
    j["window"] = reader->window() ? nlohmann::ordered_json(*reader->window()) : nlohmann::ordered_json();
    j["finalized"] = info.finalized;
    j["write_status"] = info.write_status;
    j["lost_batches"] = info.lost_batches();
    j["events_not_stored"] = info.events_not_stored;
    j["missing_events"] = info.missing_events();
    j["never_connected"] = nlohmann::ordered_json::array();
    for (const auto& [first, last] : never) {
      j["never_connected"].push_back({{"first", first}, {"last", last}});
    }
    j["unreadable"] = nlohmann::ordered_json::array();
    for (const RankFault& f : info.faults) {
      j["unreadable"].push_back({{"rank", f.rank ? nlohmann::ordered_json(*f.rank) : nlohmann::ordered_json()},
                                 {"reason", f.message},
                                 {"partial", f.partial}});
    }
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
      jr["events_selected"] = Selected(counts[i]);
      jr["events_by_kind"] = counts[i].by_kind;
      jr["events_by_name"] = counts[i].by_name;
      jr["dropped_events"] = r.dropped_events;
      jr["batches_lost"] = r.batches_lost;
      jr["events_lost"] = r.events_lost ? nlohmann::ordered_json(*r.events_lost) : nlohmann::ordered_json();
      jr["damaged_tail"] = r.damaged_tail;
      jr["missing_events"] = r.missing_events();
      jr["whole"] = r.whole();
      jr["counters"] = r.counters;
      jr["clock_offset_ns"] = r.clock_offset_ns;
      jr["clock_drift_ppm"] = r.clock_drift_ppm;
      const std::optional<double> drift_pm = r.clock_drift_uncertainty_ppm();
      jr["clock_drift_uncertainty_ppm"] = drift_pm ? nlohmann::ordered_json(*drift_pm) : nlohmann::ordered_json();
      jr["clock_error_bound_ns"] = r.clock_error_bound_ns;
      jr["clock_method"] = r.clock_method;
      jr["shard"] = r.shard;
      j["ranks"].push_back(std::move(jr));
    }
    std::cout << j.dump(2) << "\n";
    return ReportFaults(info);
  }

  std::printf("file:        %s\n", info.path.c_str());
  // Only a writer that recorded no failure left its flushed data intact.
  std::string state;
  if (info.write_failed()) {
    state = " (writing " + info.write_status + ")";
  } else if (!info.finalized) {
    state = " (not finalized: the writer was killed; flushed data is intact)";
  }
  std::printf("format:      %s v%llu%s\n", info.format.c_str(), static_cast<unsigned long long>(info.format_version),
              state.c_str());
  std::printf("job:         %s\n", info.job_id.c_str());
  std::printf("command:     %s\n", info.command_line.c_str());
  if (info.shard) {
    std::printf(
        "shard:       a relay's shard: it holds the ranks below; the job's others are in other shards "
        "(read the job through its job file)\n");
  }
  if (info.incarnation > 0) {
    std::printf("incarnation: %llu (the workers after elastic restart %llu; the first incarnation is the job's file)\n",
                static_cast<unsigned long long>(info.incarnation), static_cast<unsigned long long>(info.incarnation));
  }
  if (!info.restart_files.empty()) {
    std::string names;
    for (const std::string& n : info.restart_files) {
      names += (names.empty() ? "" : ", ") + n;
    }
    std::printf("restarts:    %zu elastic restart(s) of the workers, each in its own file beside this one: %s\n",
                info.restart_files.size(), names.c_str());
  }
  std::printf("world size:  %llu\n", static_cast<unsigned long long>(info.world_size));
  std::printf("start (UTC): %s\n", FormatUtc(info.start_epoch_ns).c_str());
  // A job recorded through relays (docs/scale.md#relays): its ranks live in shard files.
  std::set<std::string> shards;
  size_t in_shards = 0;
  for (const RankInfo& r : info.ranks) {
    if (!r.shard.empty()) {
      shards.insert(r.shard);
      ++in_shards;
    }
  }
  if (!shards.empty()) {
    std::printf("shards:      %zu rank(s) stored by relays in %zu shard file(s), e.g. %s\n", in_shards, shards.size(),
                shards.begin()->c_str());
  }
  // `commprof run --relay` killed before it linked its relays' shards: the ranks are there, not here.
  if (const std::vector<std::string> loose = UnlinkedShards(info); !loose.empty() && info.finalized) {
    std::printf(
        "shards:      %zu shard file(s) in %s hold a part of ranks that this file takes from elsewhere "
        "(their relay ended mid-run), not joined here (commprof info/report SHARD), e.g. %s\n",
        loose.size(), ShardDirOf(info).c_str(), loose.front().c_str());
  } else if (!loose.empty()) {
    std::printf(
        "shards:      %zu shard file(s) in %s are not linked into this file (its writer ended before the "
        "relays finished); each is a commprof file of its node's ranks (commprof info/report SHARD), e.g. %s\n",
        loose.size(), ShardDirOf(info).c_str(), loose.front().c_str());
  }
  if (const std::vector<std::string> spools = KeptSpools(info); !spools.empty()) {
    const std::string dir = std::filesystem::path(spools.front()).parent_path().string();
    std::printf(
        "spools:      %zu spool file(s) in %s hold events of its ranks that are not in this file; "
        "`commprof merge %s -o REST.h5` makes a file of them\n",
        spools.size(), dir.c_str(), dir.c_str());
  }
  const std::optional<uint64_t>& window = reader->window();
  if (window) {
    std::printf("window:      %llu (events: those of each rank's capture window %llu)\n",
                static_cast<unsigned long long>(*window), static_cast<unsigned long long>(*window));
  }
  std::printf(
      "clock:       %llu clock-condition violation(s) in %llu blocking collective instance(s) after "
      "alignment (%llu on raw clocks)\n\n",
      static_cast<unsigned long long>(aligned->violations), static_cast<unsigned long long>(aligned->instances_checked),
      static_cast<unsigned long long>(raw->violations));
  std::printf("%-5s %-20s %-8s %-20s %10s %8s %5s %14s %10s %12s  %s\n", "rank", "host", "pid", "status", "events",
              "missing", "lost", "clock offset", "drift", "error bound", "end reason");
  for (size_t i = 0; i < info.ranks.size(); ++i) {
    const RankInfo& r = info.ranks[i];
    const uint64_t events = window ? Selected(counts[i]) : r.event_count;
    std::string bound = r.clock_error_bound_ns < 0 ? "unmeasured" : std::to_string(r.clock_error_bound_ns) + " ns";
    std::printf("%-5u %-20.20s %-8llu %-20s %10llu %8s %5llu %11lld ns %6.2f ppm %12s  %s\n", r.rank, r.host.c_str(),
                static_cast<unsigned long long>(r.pid), StatusShown(r).c_str(), static_cast<unsigned long long>(events),
                MissingShown(r).c_str(), static_cast<unsigned long long>(r.batches_lost),
                static_cast<long long>(r.clock_offset_ns), r.clock_drift_ppm, bound.c_str(), EndReasonShown(r).c_str());
  }
  // A drift read from points a few ms apart is mostly their noise: say how much, once.
  std::vector<uint32_t> vague;
  double widest = 0;
  for (const RankInfo& r : info.ranks) {
    if (auto u = r.clock_drift_uncertainty_ppm(); u && *u >= 1.0) {
      vague.push_back(r.rank);
      widest = std::max(widest, *u);
    }
  }
  if (!vague.empty()) {  // info.ranks is sorted by rank
    std::printf(
        "drift of rank(s) %s: uncertain by up to %.2f ppm (their clock points span too little time to "
        "measure a slope; the offsets hold within their bounds)\n",
        FormatRankRanges(RangesOfRanks(vague)).c_str(), widest);
  }
  for (const RankFault& f : info.faults) {
    std::printf("%-5s %s: %s\n", f.rank ? std::to_string(*f.rank).c_str() : "-",
                f.partial ? "partly unreadable" : "unreadable, left out", f.message.c_str());
  }
  if (!never.empty()) {
    std::printf("\nnever connected: rank(s) %s (below the world size, no data from them)\n",
                FormatRankRanges(never).c_str());
  }
  PrintLoss(info);
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
  return ReportFaults(info);
}

}  // namespace

Runner AddInfoCommand(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("info",
                                     "Print job metadata, per-rank host/pid/status, event counts by kind "
                                     "and name, dropped counts and clock model of a commprof file.");
  sub->add_option("file", opts->path, "commprof HDF5 file")->required();
  sub->add_flag("--json", opts->json, "machine-readable output (schema in docs/cli.md)");
  AddWindowOption(sub, opts->window);
  return [opts] { return RunInfo(*opts); };
}

}  // namespace commprof::cli
