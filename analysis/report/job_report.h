// One job's cross-rank analysis, computed once and rendered many ways: the text and JSON reports,
// the HTML page, `commprof check` and the HDF5 analysis group all read a JobReport, so they can
// never disagree (docs/metrics.md defines every figure; docs/cli.md the JSON schema).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "analysis/load/profile_reader.h"
#include "analysis/match/clock_violations.h"
#include "analysis/match/collective_instances.h"
#include "analysis/match/p2p_messages.h"
#include "analysis/metrics/memory_usage.h"
#include "analysis/metrics/overlap.h"
#include "analysis/metrics/wait_metrics.h"

namespace commprof {

inline constexpr int kReportSchemaVersion = 2;

struct JobReport {
  ProfileInfo info;
  std::vector<CollectiveInstance> instances;  // every blocking instance, by first arrival (§1)
  WaitReport wait;
  ClockViolations clock;
  P2PMatchResult p2p;                // point-to-point messages, Late Sender / Late Receiver (§5)
  std::vector<RankOverlap> overlap;  // per rank, parallel to info.ranks (§6)
  std::vector<MemorySeries> memory;  // per rank, device and memory kind that has alloc/free records (§7)
};

// Reads the file once per pass it needs (matching, ...) and computes every figure.
Result<JobReport> AnalyzeJob(const ProfileReader& reader);

// The versioned JSON report (schema "commprof-report", version kReportSchemaVersion).
nlohmann::ordered_json ReportToJson(const JobReport& report);

// The terminal report: header, per-collective table, per-rank table, worst instances, verdict;
// every line but the first (the path) fits 100 columns.
void WriteTextReport(const JobReport& report, std::ostream& os);

}  // namespace commprof
