// One job's cross-rank analysis, computed once: `commprof check` and the HDF5 analysis group read
// the JobReport, and the text, JSON and HTML reports render the report model built from it
// (report_model.h), so they can never disagree. docs/metrics.md defines every figure;
// docs/report-json.md the JSON keys.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "analysis/hang/hang_from_file.h"
#include "analysis/load/profile_reader.h"
#include "analysis/match/clock_violations.h"
#include "analysis/match/collective_instances.h"
#include "analysis/match/p2p_messages.h"
#include "analysis/metrics/call_sites.h"
#include "analysis/metrics/delay_costs.h"
#include "analysis/metrics/memory_usage.h"
#include "analysis/metrics/overlap.h"
#include "analysis/metrics/step_table.h"
#include "analysis/metrics/straggler_verdict.h"
#include "analysis/metrics/time_categories.h"
#include "analysis/metrics/wait_metrics.h"

namespace commprof {

inline constexpr int kReportSchemaVersion = 3;

struct JobReport {
  ProfileInfo info;
  std::vector<CollectiveInstance> instances;  // every blocking instance, by first arrival (§1)
  std::vector<InstanceMetrics> measured;      // parallel to instances, each measured once (§2)
  WaitReport wait;
  ClockViolations clock;
  P2PMatchResult p2p;                 // point-to-point messages, Late Sender / Late Receiver (§5)
  std::vector<RankOverlap> overlap;   // per rank, parallel to info.ranks (§6)
  std::vector<MemorySeries> memory;   // per rank, device and memory kind that has alloc/free records (§7)
  DelayAnalysis delay;                // root causes of waiting (§9.1-§9.2); its graph is freed once judged
  std::vector<Straggler> stragglers;  // the verdict (§9.3), largest delay cost first
  std::vector<RankTime> time;         // per rank, parallel to info.ranks (§9.5)
  StepTable steps;                    // per training step (§10); empty when no rank marked one
  CallSiteReport call_sites;          // `--stacks` call sites (§11); empty without stacks
  // The hang diagnosis (docs/hangs.md): the stored /hang group, else one made from ranks that
  // ended inside a communication call; nullopt for a job that did not hang.
  std::optional<hang::FileHang> hang;
};

// What one pass over one rank's events gives on its own (§6, §7, §9.5 parts): independent of every
// other rank, so it may be computed anywhere (another process of a distributed report).
struct RankPass {
  RankOverlap overlap;
  RankTimeBuilder::Parts time;
  std::vector<MemorySeries> memory;
};
Result<RankPass> ComputeRankPass(const ProfileReader& reader, const RankInfo& rank);

// The point-to-point matching options of the report (the delay costs need every message).
P2PMatchOptions ReportP2POptions();

// Where the parts of the analysis that need nothing else come from. An empty member: computed here,
// from the reader. `commprof report` run as an MPI job fills them with what its other processes
// computed from the same file meanwhile (docs/scale.md#distributed-analysis), so the result is the
// same.
struct AnalysisSources {
  std::function<Result<P2PMatchResult>()> p2p;                 // MatchP2PMessages(reader, ReportP2POptions())
  std::function<Result<std::vector<RankPass>>()> rank_passes;  // ComputeRankPass of every rank, by rank index
  // Asked once the collective matching has read the file: whether the rows were screened elsewhere
  // (ScreenEventRows) with nothing to leave out, so what was read stands. False: AnalyzeJob returns
  // kAnalyzeAgain; the caller marks the ranks to leave out and analyses again.
  std::function<bool()> screened;
  // False: another process found no rank that ended inside a communication call and no stored
  // /hang, so the hang diagnosis (hang::DiagnoseFile) is nullopt without reading the file again.
  std::function<bool()> may_have_hung;
};
// AnalyzeJob's status code when `screened` said no: nothing is computed, nothing is consumed after
// the collective matching.
inline constexpr StatusCode kAnalyzeAgain = StatusCode::kUnavailable;

// Computes every figure, reading the file three times: point-to-point matching, collective
// matching (blocking and non-blocking; it also gathers the step marks of §10), and one pass that
// feeds the overlap (§6), memory (§7) and time-category (§9.5) builders together. Each
// collective instance is measured once (`measured`), for the wait metrics and the /analysis tables.
Result<JobReport> AnalyzeJob(const ProfileReader& reader, const AnalysisSources& sources = {});

// ScreenEventRows, then AnalyzeJob: a rank whose string table cannot be read, or whose event rows
// the matching refuses (a row that ends before it starts, a sequence number used twice, a
// collective the ranks disagree on, an unreadable chunk), is marked unreadable in `reader` and the
// others are analysed. When every string table reads, the analysis of every rank is tried first and
// the rows are screened only if it fails: a file the screening would find nothing in (nearly every
// file) is then read once less, and one it would leave ranks out of cannot be analysed whole (the
// matching checks the same rules), so the result is always that of screening first.
Result<JobReport> AnalyzeReadable(ProfileReader& reader);

// The versioned JSON report (schema "commprof-report", version kReportSchemaVersion): the report
// model's JSON (report_json.h).
nlohmann::ordered_json ReportToJson(const JobReport& report);

// The terminal report of the report model (text_report.h).
void WriteTextReport(const JobReport& report, std::ostream& os);

}  // namespace commprof
