// One job's cross-rank analysis, computed once: `commprof check` and the HDF5 analysis group read
// the JobReport, and the text, JSON and HTML reports render the report model built from it
// (report_model.h), so they can never disagree. docs/metrics.md defines every figure;
// docs/report-json.md the JSON keys.
#pragma once

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

// Computes every figure, reading the file three times: point-to-point matching, collective
// matching (blocking and non-blocking; it also gathers the step marks of §10), and one pass that
// feeds the overlap (§6), memory (§7) and time-category (§9.5) builders together. Each
// collective instance is measured once (`measured`), for the wait metrics and the /analysis tables.
Result<JobReport> AnalyzeJob(const ProfileReader& reader);

// The versioned JSON report (schema "commprof-report", version kReportSchemaVersion): the report
// model's JSON (report_json.h).
nlohmann::ordered_json ReportToJson(const JobReport& report);

// The terminal report of the report model (text_report.h).
void WriteTextReport(const JobReport& report, std::ostream& os);

}  // namespace commprof
