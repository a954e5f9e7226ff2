// `commprof check FILE.h5 --max METRIC=VALUE ...`: a CI performance gate. Exit 0 when every
// metric is at or under its threshold, 1 when any passes it (each failure printed). What the file
// lacks fails the gate unless a limit allows it: a rank that could not be read `unreadable_ranks`,
// a relay's shard not linked into it `unlinked_shards`, a failed write `events_not_stored`, a rank
// that never connected `missing_ranks`. Exit 2 on bad usage (an unknown metric or a malformed
// threshold) or a file that cannot be read at all. Metrics: docs/cli.md. `--baseline BASE.h5` also
// compares FILE with an earlier run as `commprof diff BASE FILE` does (analysis/compare/,
// docs/metrics.md §13), one FAIL line per regressed figure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>

#include "analysis/compare/diff_output.h"
#include "analysis/compare/run_diff.h"
#include "analysis/compare/run_summary.h"
#include "analysis/load/profile_reader.h"
#include "analysis/metrics/op_stats.h"
#include "analysis/report/job_report.h"
#include "cli/commands.h"

namespace commprof::cli {
namespace {

struct Options {
  std::string path;
  std::vector<std::string> max;
  int64_t window = -1;
  std::string baseline;                     // --baseline BASE.h5 (docs/metrics.md §13)
  std::vector<std::string> max_regression;  // its limits; 10% for every metric when none given
  std::string noise_floor = "100us";        // the guard's floor (docs/metrics.md §13.2)
  bool allow_hang = false;                  // a hang is printed but does not fail the gate
};

// --baseline: FILE compared with BASE as `commprof diff BASE FILE` does; one FAIL line per
// regression, or one ok line. Returns the failures.
int CheckBaseline(const RunSummary& base, const JobReport& report, ProfileReader& reader, const Options& o,
                  const RegressionGate& gate, double floor_ns) {
  RunSummary next = SummarizeRun(report);
  next.path = o.path;
  StatsOptions options;
  options.screen_rows = false;  // screened before the analysis
  auto stats = ComputeOpStats(reader, options);
  if (!stats.ok()) {
    std::printf("FAIL baseline: %s\n", stats.status().message().c_str());
    return 1;
  }
  AddNameRows(stats.value(), next);
  const RunDiff d = DiffRuns(base, next, gate, floor_ns);
  for (const DiffRow& r : d.rows) {
    if (r.status == DiffStatus::kRegressed) {
      std::printf("FAIL baseline %s\n", FormatRegression(r).c_str());
    }
  }
  if (d.regressions == 0) {
    std::printf("ok   baseline %s: %zu figures compared, none regressed past its limit\n", o.baseline.c_str(),
                d.rows.size());
  }
  return static_cast<int>(d.regressions);
}

// The figures a metric reads: the same JobReport `commprof report` renders.
struct Figures {
  const ProfileInfo* info;
  const WaitReport* rep;
  const ClockViolations* cv;
  const P2PMatchResult* p2p;
  const std::vector<RankOverlap>* overlap;
  const std::vector<Straggler>* stragglers;
  const StepTable* steps;
  size_t unlinked_shards = 0;  // shard files beside the file that it does not link (UnlinkedShards)
  explicit Figures(const JobReport& r, size_t unlinked)
      : info(&r.info),
        rep(&r.wait),
        cv(&r.clock),
        p2p(&r.p2p),
        overlap(&r.overlap),
        stragglers(&r.stragglers),
        steps(&r.steps),
        unlinked_shards(unlinked) {}
};

// Each metric is the job's worst value of one report figure (docs/metrics.md).
const std::map<std::string, std::function<double(const Figures&)>>& Metrics() {
  static const std::map<std::string, std::function<double(const Figures&)>> kMetrics = {
      {"wait_share",
       [](const Figures& f) {
         double m = 0;
         for (const auto& r : f.rep->ranks) {
           m = std::max(m, r.wait_share);
         }
         return m;
       }},
      {"wait_time_ns",
       [](const Figures& f) {
         double m = 0;
         for (const auto& r : f.rep->ranks) {
           m = std::max(m, static_cast<double>(r.wait_time_ns));
         }
         return m;
       }},
      {"skew_p99_ns",
       [](const Figures& f) {
         double m = 0;
         for (const auto& t : f.rep->types) {
           m = std::max(m, static_cast<double>(t.skew_p99_ns));
         }
         return m;
       }},
      {"stragglers", [](const Figures& f) { return static_cast<double>(f.stragglers->size()); }},
      {"straggler_share", [](const Figures& f) { return f.stragglers->empty() ? 0.0 : f.stragglers->front().share; }},
      {"incomplete", [](const Figures& f) { return static_cast<double>(f.rep->incomplete); }},
      {"clock_violations", [](const Figures& f) { return static_cast<double>(f.cv->violations); }},
      {"late_sender_wait_ns",
       [](const Figures& f) {
         double m = 0;
         for (const auto& r : f.p2p->ranks) {
           m = std::max(m, static_cast<double>(r.late_sender_wait_ns));
         }
         return m;
       }},
      {"late_receiver_wait_ns",
       [](const Figures& f) {
         double m = 0;
         for (const auto& r : f.p2p->ranks) {
           m = std::max(m, static_cast<double>(r.late_receiver_wait_ns));
         }
         return m;
       }},
      {"p2p_unmatched",
       [](const Figures& f) { return static_cast<double>(f.p2p->unmatched_sends + f.p2p->unmatched_recvs); }},
      {"exposed_comm_ns",
       [](const Figures& f) {
         double m = 0;
         for (const auto& r : *f.overlap) {
           m = std::max(m, static_cast<double>(r.exposed_comm_ns));
         }
         return m;
       }},
      {"exposed_comm_share",
       [](const Figures& f) {
         double m = 0;
         for (const auto& r : *f.overlap) {
           if (r.breakdown.span_ns > 0) {
             m = std::max(m, static_cast<double>(r.exposed_comm_ns) / static_cast<double>(r.breakdown.span_ns));
           }
         }
         return m;
       }},
      // Every event recorded but not in the file: dropped in the collectors plus those shipped in
      // events frames that never arrived (ProfileInfo::missing_events).
      {"dropped_events", [](const Figures& f) { return static_cast<double>(f.info->missing_events()); }},
      {"lost_batches", [](const Figures& f) { return static_cast<double>(f.info->lost_batches()); }},
      // The 99th percentile of the steps' times (docs/metrics.md §10); 0 without steps.
      {"step_time_p99", [](const Figures& f) { return static_cast<double>(f.steps->summary.p99_ns); }},
      // Parts of the file that could not be read (left out of every other figure, or a rank's
      // damaged last chunk: the rank is read without it); checked at 0 unless a --max sets another
      // limit.
      {"unreadable_ranks", [](const Figures& f) { return static_cast<double>(f.info->faults.size()); }},
      // Shards of a `run --relay` whose writer ended before linking them: their ranks are in no
      // other figure. Checked at 0 unless a --max sets another limit, as unreadable_ranks.
      {"unlinked_shards", [](const Figures& f) { return static_cast<double>(f.unlinked_shards); }},
      // The events a failed write (a full disk, a relay's failed shard) could not store, as its
      // write_status counts them: checked at 0 when the write failed, unless a --max sets another limit.
      {"events_not_stored", [](const Figures& f) { return static_cast<double>(f.info->events_not_stored); }},
      // Ranks below the world size that never connected (no data from them): checked at 0 when
      // there are any, unless a --max sets another limit.
      {"missing_ranks",
       [](const Figures& f) {
         double n = 0;
         for (const auto& [first, last] : f.info->NeverConnected()) {
           n += static_cast<double>(last - first) + 1;
         }
         return n;
       }},
  };
  return kMetrics;
}

// A metric measured in ns: its threshold may also be written with a unit (50ms, 1.5s, 200us).
bool IsDuration(const std::string& metric) {
  return metric == "step_time_p99" || (metric.size() > 3 && metric.compare(metric.size() - 3, 3, "_ns") == 0);
}

int RunCheck(const Options& o) {
  std::vector<std::pair<std::string, double>> limits;
  for (const auto& spec : o.max) {
    size_t eq = spec.find('=');
    std::string name = spec.substr(0, eq);
    char* end = nullptr;
    double v = eq == std::string::npos ? 0 : std::strtod(spec.c_str() + eq + 1, &end);
    const bool number = eq != std::string::npos && end != nullptr && end != spec.c_str() + eq + 1 && std::isfinite(v);
    const double unit = number && IsDuration(name) ? DurationUnitNs(end) : (number && *end == '\0' ? 1 : 0);
    if (!number || unit == 0) {
      std::fprintf(stderr,
                   "commprof check: --max %s is not METRIC=VALUE with a finite number (a duration metric also takes "
                   "a unit: ns, us, ms, s)\n",
                   spec.c_str());
      return 2;
    }
    v *= unit;
    if (Metrics().count(name) == 0) {
      std::string known;
      for (const auto& [k, fn] : Metrics()) {
        known += (known.empty() ? "" : ", ") + k;
      }
      std::fprintf(stderr, "commprof check: unknown metric '%s' (known: %s)\n", name.c_str(), known.c_str());
      return 2;
    }
    limits.emplace_back(name, v);
  }
  if (!o.max_regression.empty() && o.baseline.empty()) {
    std::fprintf(stderr, "commprof check: --max-regression needs --baseline BASE.h5 to compare with\n");
    return 2;
  }
  RegressionGate gate;
  if (Status st = ParseRegressionGate(o.max_regression, gate); !st.ok()) {
    std::fprintf(stderr, "commprof check: %s\n", st.message().c_str());
    return 2;
  }
  if (gate.empty()) {
    gate.all = 0.10;
  }
  const std::optional<double> floor = ParseDurationNs(o.noise_floor);
  if (!floor) {
    std::fprintf(stderr, "commprof check: --noise-floor %s is not a duration >= 0 (ns, us, ms or s)\n",
                 o.noise_floor.c_str());
    return 2;
  }
  // The baseline is summarized first, so that one analysis is held at a time.
  std::optional<RunSummary> base;
  if (!o.baseline.empty()) {
    auto opened = ProfileReader::Open(o.baseline);
    if (!opened.ok()) {
      std::fprintf(stderr, "commprof check: baseline: %s\n", opened.status().message().c_str());
      return 2;
    }
    SayUnlinkedShards("check", opened.value()->info());  // the warning names the baseline's file
    auto s = SummarizeProfile(*opened.value(), o.window);
    opened.value().reset();
    if (!s.ok()) {
      std::fprintf(stderr, "commprof check: baseline: %s\n", s.status().message().c_str());
      return 2;
    }
    base = std::move(s.value());
    for (const std::string& fault : base->faults) {
      std::fprintf(stderr, "commprof check: baseline %s (left out of the comparison)\n",
                   FaultOfFile(o.baseline, fault).c_str());
    }
    for (const std::string& partly : base->partly_read) {
      std::fprintf(stderr, "commprof check: baseline %s\n", FaultOfFile(o.baseline, partly).c_str());
    }
  }
  auto reader = OpenOrSay(o.path, "check");
  if (reader == nullptr) {
    return kExitUnreadable;
  }
  if (!SelectWindowIfAsked(*reader, o.window, "check")) {
    return 2;
  }
  auto report = AnalyzeReadable(*reader);  // unreadable ranks left out (screened when needed)
  for (const RankFault& fault : reader->info().faults) {
    std::fprintf(stderr, "commprof check: %s\n", fault.message.c_str());
  }
  if (!report.ok()) {
    std::fprintf(stderr, "commprof check: %s\n", report.status().message().c_str());
    return 2;
  }
  // A gate cannot vouch for what the file lacks: unreadable parts, a failed write, ranks that never
  // connected, unlinked shards each fail it unless a limit for them was given.
  auto at_zero_unless_given = [&limits](const char* metric, bool applies) {
    if (applies && std::none_of(limits.begin(), limits.end(), [&](const auto& l) { return l.first == metric; })) {
      limits.emplace_back(metric, 0.0);
    }
  };
  const ProfileInfo& info = reader->info();
  const size_t unlinked = UnlinkedShards(info).size();
  at_zero_unless_given("unreadable_ranks", !info.faults.empty());
  at_zero_unless_given("events_not_stored", info.write_failed());
  at_zero_unless_given("missing_ranks", !info.NeverConnected().empty());
  at_zero_unless_given("unlinked_shards", unlinked > 0);
  Figures f(report.value(), unlinked);
  int failed = 0;
  for (const auto& [name, limit] : limits) {
    double value = Metrics().at(name)(f);
    bool ok = value <= limit;
    // %.15g: a value one above its threshold must not print the same as it (6 digits would).
    std::printf("%s %s = %.15g (max %.15g)\n", ok ? "ok  " : "FAIL", name.c_str(), value, limit);
    if (!ok) {
      ++failed;
    }
  }
  if (base) {
    failed += CheckBaseline(*base, report.value(), *reader, o, gate, *floor);
    // What the baseline lacks reads as removed rows and changed totals: the gate cannot vouch for it.
    if (!base->faults.empty()) {
      std::printf("FAIL baseline unreadable: %zu part(s) of %s could not be read and were left out of the comparison\n",
                  base->faults.size(), o.baseline.c_str());
      ++failed;
    }
  }
  // A hang outranks any figure: the figures of a job that never finished say little.
  const auto& hang = report.value().hang;
  if (hang && hang->report.hang) {
    std::printf("%s hang: %s\n", o.allow_hang ? "ok  " : "FAIL", hang->report.verdict.c_str());
    if (!o.allow_hang) {
      return 3;
    }
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

Runner AddCheckCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("check",
                         "CI gate: exit 1 when a metric passes its threshold, 3 when the job hung "
                         "(docs/hangs.md), printing what failed. Metrics: wait_share, wait_time_ns, skew_p99_ns, "
                         "stragglers, straggler_share, incomplete, clock_violations, late_sender_wait_ns, "
                         "late_receiver_wait_ns, p2p_unmatched, exposed_comm_ns, "
                         "exposed_comm_share, dropped_events, lost_batches, unreadable_ranks, "
                         "unlinked_shards, events_not_stored, missing_ranks, step_time_p99.");
  sub->add_option("file", o->path, "commprof HDF5 file")->required();
  // One value per --max (repeatable): a vector option would otherwise take the FILE after it too.
  sub->add_option("--max", o->max, "METRIC=VALUE: fail when the job's worst value of METRIC exceeds VALUE (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--baseline", o->baseline,
                  "BASE.h5: also fail when FILE regressed against this earlier run, as `commprof diff BASE FILE "
                  "--max-regression` judges it (docs/metrics.md §13)")
      ->type_name("BASE.h5");
  sub->add_option("--max-regression", o->max_regression,
                  "with --baseline: P% or METRIC=P% (repeatable), as for `commprof diff` (default 10% for every "
                  "metric)")
      ->allow_extra_args(false)
      ->type_name("[METRIC=]P%");
  sub->add_option("--noise-floor", o->noise_floor, "with --baseline: the noise guard's floor, as for `commprof diff`")
      ->type_name("DURATION");
  sub->add_flag("--allow-hang", o->allow_hang,
                "do not fail on a hang or desync found in FILE (docs/hangs.md); it is still printed");
  AddWindowOption(sub, o->window);
  return [o] { return RunCheck(*o); };
}

}  // namespace commprof::cli
