// `commprof diff BASE.h5 NEW.h5 [--max-regression [METRIC=]P%]... [--format text|json] [--top N]
// [--window K]`: two runs of the same program compared by collective type, rank and step
// (docs/metrics.md §13, docs/cli.md). Exit 0 when nothing passed its --max-regression limit,
// 1 when something did (each printed), 2 when a file could not be read or on bad usage.
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "analysis/compare/diff_output.h"
#include "analysis/compare/run_diff.h"
#include "analysis/compare/run_summary.h"
#include "cli/commands.h"

namespace commprof::cli {
namespace {

struct Options {
  std::string base, next;
  std::vector<std::string> max_regression;
  std::string format = "text";
  size_t top = 30;
  int64_t window = -1;
  std::string noise_floor = "100us";
};

// One file's summary; a failure is printed naming the command (the message names the file).
std::optional<RunSummary> Summarize(const std::string& path, int64_t window, const char* command) {
  std::unique_ptr<ProfileReader> reader = OpenOrSay(path, command);  // warns of shards it lacks
  if (reader == nullptr) {
    return std::nullopt;
  }
  auto s = SummarizeProfile(*reader, window);
  if (!s.ok()) {
    std::fprintf(stderr, "commprof %s: %s\n", command, s.status().message().c_str());
    return std::nullopt;
  }
  for (const std::string& fault : s.value().faults) {
    std::fprintf(stderr, "commprof %s: %s (left out of the comparison)\n", command, FaultOfFile(path, fault).c_str());
  }
  for (const std::string& partly : s.value().partly_read) {
    std::fprintf(stderr, "commprof %s: %s\n", command, FaultOfFile(path, partly).c_str());
  }
  return std::move(s.value());
}

int RunDiffCommand(const Options& o) {
  if (o.format != "text" && o.format != "json") {
    std::fprintf(stderr, "commprof diff: --format %s is not supported (text or json)\n", o.format.c_str());
    return 2;
  }
  RegressionGate gate;
  if (Status st = ParseRegressionGate(o.max_regression, gate); !st.ok()) {
    std::fprintf(stderr, "commprof diff: %s\n", st.message().c_str());
    return 2;
  }
  const std::optional<double> floor = ParseDurationNs(o.noise_floor);
  if (!floor) {
    std::fprintf(stderr, "commprof diff: --noise-floor %s is not a duration >= 0 (ns, us, ms or s)\n",
                 o.noise_floor.c_str());
    return 2;
  }
  // One analysis held at a time: the base's summary is all that is kept of it.
  // A file that cannot be compared is exit code 2, as diff(1) says trouble: 1 must mean "regressed"
  // alone, so a CI script can tell a slower run from a broken artifact.
  std::optional<RunSummary> base = Summarize(o.base, o.window, "diff");
  if (!base) {
    return 2;
  }
  std::optional<RunSummary> next = Summarize(o.next, o.window, "diff");
  if (!next) {
    return 2;
  }
  const RunDiff d = DiffRuns(*base, *next, gate, *floor);
  // A gate cannot vouch for a comparison that left ranks out: their rows read as removed or added,
  // and the rest as changed. Told after the rows, exit 2 (a damaged artifact), not a verdict.
  const size_t left_out = base->faults.size() + next->faults.size();
  if (o.format == "json") {
    std::cout << DiffToJson(d, gate).dump(2) << "\n";
  } else {
    WriteDiffText(d, o.top, std::cout);
  }
  // The verdict also goes to stderr with --format json, so a CI log shows what regressed.
  if (o.format == "json") {
    for (const DiffRow& r : d.rows) {
      if (r.status == DiffStatus::kRegressed) {
        std::fprintf(stderr, "commprof diff: regressed: %s\n", FormatRegression(r).c_str());
      }
    }
  }
  if (!o.max_regression.empty() && left_out > 0) {
    std::fprintf(stderr,
                 "commprof diff: %zu part(s) of the files could not be read and were left out (above): the "
                 "--max-regression gate cannot judge a comparison without them\n",
                 left_out);
    return 2;
  }
  return d.regressions > 0 ? 1 : 0;
}

}  // namespace

Runner AddDiffCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("diff",
                         "Compare two runs of the same program (BASE against NEW) by collective type, rank and step, "
                         "with a noise guard; with --max-regression, exit 1 when a figure regressed past its limit.");
  sub->add_option("base", o->base, "the reference run: a commprof HDF5 file (recorded or imported)")->required();
  sub->add_option("new", o->next, "the run to judge: a commprof HDF5 file")->required();
  sub->add_option("--max-regression", o->max_regression,
                  "P% (every metric) or METRIC=P% (one metric; repeatable): a figure that got worse by more "
                  "than P% and is not within noise is a regression (exit 1). Metrics: total_time, "
                  "mean_duration, wait_time, transfer_time, busbw, comm_time, exposed_comm, step_time, "
                  "step_time_p50, step_time_p99, step_time_max, total, mean (docs/metrics.md §13)")
      ->allow_extra_args(false)  // one value per occurrence: not the files after it
      ->type_name("[METRIC=]P%");
  sub->add_option("--format", o->format, "text (table) or json (schema commprof-diff, docs/diff-json.md)")
      ->type_name("text|json")
      ->capture_default_str();
  sub->add_option("--top", o->top, "text: rows shown, largest relative change first (0: all)")
      ->type_name("N")
      ->capture_default_str();
  sub->add_option("--noise-floor", o->noise_floor,
                  "the guard's floor: a per-call (or per-step) median or middle-half mean that moved less "
                  "than this beyond the base's spread is noise (default 100us; 0 for none; units ns, us, "
                  "ms, s)")
      ->type_name("DURATION");
  AddWindowOption(sub, o->window);
  return [o] { return RunDiffCommand(*o); };
}

}  // namespace commprof::cli
