// `commprof stats FILE.h5 [--by name|comm|size|rank] [--sort COLUMN] [--top N] [--ranks LIST]
// [--kinds LIST] [--format text|csv|json] [--window K] [-o OUT]`: per-operation statistics
// (docs/metrics.md §12): calls, total and self time, percentiles, bytes, bandwidth and the
// spread over the ranks, of every MPI/NCCL call, kernel, copy, NVTX/user range and imported op.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "analysis/load/event_screen.h"
#include "analysis/load/profile_reader.h"
#include "analysis/metrics/op_stats.h"
#include "analysis/report/report_parts_codec.h"
#include "analysis/report/stats_output.h"
#include "cli/analysis_open.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "core/schema/enums.h"

namespace commprof::cli {
namespace {

// --top's value when not given: 20 rows of text, every row of csv and json.
constexpr int64_t kTopNotGiven = INT64_MIN;

struct Options {
  std::string path;
  std::vector<std::string> by;
  std::string sort = "total";
  int64_t top = kTopNotGiven;
  std::string ranks;
  bool ranks_given = false;  // an empty --ranks "" is an error, not every rank
  std::vector<std::string> kinds;
  std::string format = "text";
  std::string output;
  int64_t window = -1;
};

constexpr int64_t kDefaultTextTop = 20;

std::string Join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) {
    s += (s.empty() ? "" : ", ") + w;
  }
  return s;
}

// Usage errors, before the file is opened: false after printing one line naming the option. Only
// `tell` prints: every process of a distributed stats finds the same errors, the first tells them.
bool CheckUsage(const Options& o, StatsOptions& so, bool tell) {
  if (o.format != "text" && o.format != "csv" && o.format != "json") {
    SayIf(tell, "commprof stats: --format %s is not supported (text, csv or json)\n", o.format.c_str());
    return false;
  }
  for (const std::string& b : o.by) {
    if (b == "comm") {
      so.by_comm = true;
    } else if (b == "size") {
      so.by_size = true;
    } else if (b == "rank") {
      so.by_rank = true;
    } else if (b != "name") {
      SayIf(tell, "commprof stats: --by %s is not one of name, comm, size, rank\n", b.c_str());
      return false;
    }
  }
  const auto& keys = StatsSortKeys();
  if (std::find(keys.begin(), keys.end(), o.sort) == keys.end()) {
    SayIf(tell, "commprof stats: --sort %s is not a column; valid: %s\n", o.sort.c_str(), Join(keys).c_str());
    return false;
  }
  if (o.top < 0 && o.top != kTopNotGiven) {
    SayIf(tell, "commprof stats: --top must be a number of rows >= 0 (0: every row)\n");
    return false;
  }
  std::vector<std::string> categories(StatsCategories().begin(), StatsCategories().end());
  for (const std::string& k : o.kinds) {
    if (std::find(categories.begin(), categories.end(), k) == categories.end()) {
      SayIf(tell, "commprof stats: --kinds %s is not a kind; valid: %s\n", k.c_str(), Join(categories).c_str());
      return false;
    }
  }
  so.kinds = o.kinds;
  if (o.ranks_given && !ParseRankList(o.ranks, so.ranks)) {
    SayIf(tell, "commprof stats: --ranks '%s' is not a list like 0,2 or 0-3,8\n", o.ranks.c_str());
    return false;
  }
  return true;
}

// The statistics of `reader` made by the processes of `world` together
// (docs/scale.md#distributed-analysis). The first screens the rows (the whole file) while the
// others each accumulate one contiguous block of the ranks; it then tells them which ranks the
// screening left out, and a process whose block held one accumulates the rest of it again (a
// damaged file only). The first merges the blocks in rank order and finishes the rows: what one
// process computes. The others get an error no one prints: they have nothing to write.
Result<OpStats> DistributedOpStats(AnalysisWorld& world, ProfileReader& reader, StatsOptions so) {
  constexpr int kTagStats = 1;
  const bool screen = so.screen_rows;
  so.screen_rows = false;  // done here
  if (world.first()) {
    const std::vector<RankFault> left_out = screen ? ScreenEventRowsLeftOut(reader) : std::vector<RankFault>{};
    (void)world.TextFromFirst(EncodeScreeningPart(left_out));
    // Every part is received, even after an error (its sender waits for that); the error of the
    // lowest block is the one one process would have stopped at.
    Result<OpStatsPartial> all = OpStatsPartial{};
    all.value().exact_samples = so.exact_samples;
    for (int q = 1; q < world.size(); ++q) {
      auto part = DecodeOpStatsPart(world.Receive(q, kTagStats));
      if (!all.ok()) {
        continue;
      }
      if (!part.ok()) {
        all = part.status();
        continue;
      }
      all.value().Merge(std::move(part.value()));
    }
    if (!all.ok()) {
      return all.status();
    }
    return FinishOpStats(reader, so, std::move(all.value()));
  }
  // Blocks of the ranks before the screening: the same on every process.
  const std::vector<uint32_t> ranks = StatsRanks(reader, so);
  const auto [first, last] =
      BlockOf(ranks.size(), static_cast<size_t>(world.rank() - 1), static_cast<size_t>(world.size() - 1));
  std::vector<uint32_t> block(ranks.begin() + static_cast<std::ptrdiff_t>(first),
                              ranks.begin() + static_cast<std::ptrdiff_t>(last));
  auto part = AccumulateOpStats(reader, so, block);
  auto left_out = DecodeScreeningPart(world.TextFromFirst(std::string()));
  if (!left_out.ok()) {
    part = left_out.status();
  } else {
    bool again = false;
    for (RankFault& f : left_out.value()) {
      again = std::erase(block, *f.rank) > 0 || again;
      reader.MarkUnreadable(*f.rank, std::move(f.message));
    }
    if (again) {
      part = AccumulateOpStats(reader, so, block);
    }
  }
  world.Send(0, kTagStats, EncodeOpStatsPart(part));
  world.FinishSends();
  return Internal("distributed stats: only the first process writes the statistics");
}

// The whole command on one process of `world` (nullptr: alone); returns its exit code. Only the
// first process (`tell`) prints and writes.
int StatsOf(const Options& o, AnalysisWorld* world, bool tell) {
  StatsOptions so;
  if (!CheckUsage(o, so, tell)) {
    return 2;
  }
  int open_exit = 0;
  std::unique_ptr<ProfileReader> reader =
      OpenEverywhere("stats", world, o.path, o.window, o.output, OutputKind::kStream, open_exit);
  if (reader == nullptr) {
    return open_exit;
  }
  for (uint32_t w : so.ranks) {
    const auto& ranks = reader->info().ranks;
    const bool known = std::any_of(ranks.begin(), ranks.end(), [w](const RankInfo& r) {
      return r.rank == w && r.status != schema::RankStatusName(schema::RankStatus::kMissing);
    });
    const auto& faults = reader->info().faults;
    const bool faulty =
        std::any_of(faults.begin(), faults.end(), [w](const RankFault& f) { return f.rank && *f.rank == w; });
    if (!known && !faulty) {
      SayIf(tell, "commprof stats: --ranks: %s has no events of rank %u\n", o.path.c_str(), w);
      return 2;
    }
  }
  // Screens the rows first (ScreenEventRows).
  auto stats = world != nullptr ? DistributedOpStats(*world, *reader, so) : ComputeOpStats(*reader, so);
  if (!tell) {
    return 0;  // the first process tells and writes
  }
  if (!stats.ok()) {
    std::fprintf(stderr, "commprof stats: %s\n", stats.status().message().c_str());
    return 1;
  }
  StatsContext ctx;
  ctx.path = o.path;
  if (reader->window()) {
    ctx.window = *reader->window();
  }
  ctx.options = so;
  ctx.sort = o.sort;
  for (const RankFault& f : reader->info().faults) {
    // A damaged rank that --ranks leaves out is not part of what was asked: no fault, no exit 1
    // (a user may select the other ranks just to work around it).
    if (f.rank && !so.ranks.empty() && std::find(so.ranks.begin(), so.ranks.end(), *f.rank) == so.ranks.end()) {
      continue;
    }
    std::fprintf(stderr, "commprof stats: %s\n", f.message.c_str());
    ctx.faults.push_back(f.message);
  }
  for (const std::string& f : stats->faults) {
    std::fprintf(stderr, "commprof stats: %s\n", f.c_str());
    ctx.faults.push_back(f);
  }
  if (stats->rows.empty()) {
    std::fprintf(stderr, "commprof stats: %s: no operations%s%s on the ranks read (%zu)%s\n", o.path.c_str(),
                 o.kinds.empty() ? "" : " of kinds ", Join(o.kinds).c_str(), stats->ranks.size(),
                 o.window >= 0 ? " in the window" : "");
    return 1;
  }
  std::vector<OpStatsRow> rows = std::move(stats->rows);
  (void)SortStatsRows(rows, o.sort);  // checked in CheckUsage
  ctx.rows_total = rows.size();
  const int64_t top = o.top >= 0 ? o.top : (o.format == "text" ? kDefaultTextTop : 0);
  ctx.top = static_cast<size_t>(top);
  if (top > 0 && rows.size() > static_cast<size_t>(top)) {
    rows.resize(static_cast<size_t>(top));
  }

  std::ostringstream os;
  if (o.format == "json") {
    os << StatsToJson(stats.value(), rows, ctx).dump(2) << "\n";
  } else if (o.format == "csv") {
    WriteStatsCsv(rows, os);
  } else {
    WriteStatsText(stats.value(), rows, ctx, os);
  }
  // Exit 1 when part of the file could not be read, although the stats of the rest were written.
  const int done = ctx.faults.empty() ? 0 : 1;
  // `-o -`: standard output, as `commprof export` takes it.
  const Status st = WriteOutput(o.output.empty() ? "-" : o.output, [&os](std::ostream& out) {
    out << os.str();
    return Status::Ok();
  });
  if (!st.ok()) {
    std::fprintf(stderr, "commprof stats: %s\n", st.message().c_str());
    return 1;
  }
  return done;
}

}  // namespace

Runner AddStatsCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "stats",
      "Per-operation statistics (docs/metrics.md §12): calls, total and self time, mean, p50/p99, max, bytes, "
      "bandwidth and imbalance across ranks of every MPI/NCCL call, CUDA kernel, copy, NVTX/user range and "
      "imported torch op. Default: rows by name over every rank, largest total first, top 20.");
  sub->add_option("file", o->path, "commprof HDF5 file (recorded, or imported from torch.profiler)")->required();
  sub->add_option("--by", o->by,
                  "split the rows by comm (communicator), size (message size, powers of two) and/or rank; "
                  "repeat or give a comma list (name: the default, rows by name only)")
      ->delimiter(',')
      ->allow_extra_args(false)  // one (comma) list per occurrence: not the FILE after it
      ->type_name("name|comm|size|rank");
  sub->add_option("--sort", o->sort,
                  "order rows by this column, largest first (names A-Z; comm, size, rank, maxrk ascending): name "
                  "kind calls total self mean p50 p99 max min bytes gbps imbal maxrk comm size rank")
      ->capture_default_str()
      ->type_name("name|kind|calls|total|self|mean|p50|p99|max|min|bytes|gbps|imbal|maxrk|comm|size|rank");
  sub->add_option("--top", o->top, "show the first N rows; 0: every row (default: 20 for text, every row for csv/json)")
      ->type_name("N");
  sub->add_option("--ranks", o->ranks, "only these ranks, e.g. 0,2 or 0-3,8 (default: every rank with events)")
      ->each([o](const std::string&) { o->ranks_given = true; });
  sub->add_option("--kinds", o->kinds,
                  "only these kinds (comma list): mpi, nccl, kernel, memcpy, memset, cuda_api, nvtx, "
                  "user, torch (docs/metrics.md §12.1)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->type_name("mpi|nccl|kernel|memcpy|memset|cuda_api|nvtx|user|torch");
  sub->add_option("--format", o->format,
                  "text (a table of 100 columns), csv (raw ns, header row) or json (docs/stats-json.md)")
      ->type_name("text|csv|json")
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "write to this file instead of standard output (-: standard output)");
  AddWindowOption(sub, o->window);
  return [o] {
    return RunAnalysisCommand("stats", [&o](AnalysisWorld* world, bool tell) { return StatsOf(*o, world, tell); });
  };
}

}  // namespace commprof::cli
