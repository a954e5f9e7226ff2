// What the parts of the HTML report share (html_report.cc assembles the page, html_charts.cc draws
// the SVG charts, html_tables.cc writes the tables): the model, its ranks in rank order, the
// stragglers, and the page text being built. Each part appends its sections to `out`.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "analysis/report/report_model.h"

namespace commprof::html {

template <class T>
const std::vector<T>& List(const std::optional<std::vector<T>>& v) {
  static const std::vector<T> kEmpty;
  return v ? *v : kEmpty;
}

struct Page {
  explicit Page(const ReportModel& model);

  bool IsStraggler(int64_t rank) const { return stragglers.count(rank) != 0; }
  const ReportModel::Rank* RankEntry(int64_t rank) const;
  static int64_t RankOf(const ReportModel::Rank& r) { return r.rank.value_or(0); }

  const ReportModel& r;
  std::vector<const ReportModel::Rank*> ranks;  // sorted by rank
  std::set<int64_t> stragglers;
  std::string out;
};

// Charts (inline SVG; html_charts.cc).
void RankTimeChart(Page& p);
void LatenessHeatMap(Page& p);
void BreakdownChart(Page& p);
void StepTimeChart(Page& p);  // only when the report has steps

// Sortable tables (html_tables.cc).
void CollectivesTable(Page& p);
void RanksTable(Page& p);
void WorstInstancesTable(Page& p);
void IncompleteTable(Page& p);
void CommunicatorsTable(Page& p);  // the communicators the report names, with their members
void ClockTable(Page& p);
void CallSitesTable(Page& p);  // --stacks call sites, when the report has them

}  // namespace commprof::html
