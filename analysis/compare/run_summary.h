// What `commprof diff` compares of one run (docs/metrics.md §13.1): one value per (group, row,
// metric), with the repetitions its noise guard judges by (noise_guard.h).
//
// Groups and their rows: "type" (one row per collective type), "rank" (one per rank), "step"
// (one per step number), "steps" (one row, "all": the step-time summary) and "name" (the
// `commprof stats` rows). A summary is built from one run's JobReport, which can then be freed:
// it keeps a fixed amount per row, so two runs are compared holding one analysis at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/compare/noise_guard.h"
#include "analysis/metrics/op_stats.h"
#include "analysis/report/job_report.h"
#include "core/status.h"

namespace commprof {

// Which way is worse: a regression is a larger value of a time, a smaller one of a bandwidth.
// kNeither: a change is reported, never a regression (a count).
enum class Worse : uint8_t { kNeither, kHigher, kLower };

struct MetricValue {
  std::string group, row, metric;
  std::string unit;  // "ns", "GB/s", "calls"
  Worse worse = Worse::kHigher;
  double value = 0;
  // A sum over the repetitions (total_time, comm_time, ...): the guard also asks that both runs
  // have as many repetitions, since doing the same thing more often is a real change.
  bool total = false;
  std::string reps_unit = "ns";  // what the repetitions measure (busbw's: its transfers, in ns)
  Repetitions per_call;          // one per call (arrival or instance); n == 0: none
  Repetitions per_step;          // one per step, where the metric has a per-step figure; n == 0: none
};

struct RunSummary {
  std::string path;
  bool has_steps = false;
  std::vector<std::string> faults;       // parts of the file that could not be read (left out)
  std::vector<std::string> partly_read;  // ranks compared without their damaged last chunk
  std::vector<MetricValue> metrics;      // by group, row, metric as added
};

// The comparable figures of an analysed run: by collective type, rank and step.
RunSummary SummarizeRun(const JobReport& report);

// Adds the "name" rows: per `commprof stats` row (by name), its total and mean time. The stats
// keep min, p50, p99 and max of a name's calls, not p10/p90: a name's spread is [min, p99]
// (docs/metrics.md §13.2).
void AddNameRows(const OpStats& stats, RunSummary& out);

// The part of AnalyzeJob (job_report.h) a diff compares, computed the same way: the collective
// instances, measured, with the wait metrics (§2, §4), the step table (§10; its delay-cost
// columns stay empty) and each rank's overlap (§6). It skips what the diff does not compare: the
// point-to-point matching, delay costs, verdict, memory series, time categories and call sites.
// Two reads of the file instead of four.
Result<JobReport> AnalyzeForDiff(const ProfileReader& reader);

// Opens `path`, selects capture window `window` when >= 0, screens and analyses it
// (AnalyzeForDiff), computes its operation statistics (as `commprof stats` does) and summarizes
// both. Errors name the file.
Result<RunSummary> SummarizeProfile(const std::string& path, int64_t window);
// The same of a file already open (`reader`; a window selected here when `window` >= 0).
Result<RunSummary> SummarizeProfile(ProfileReader& reader, int64_t window);

}  // namespace commprof
