// The HTML report's charts (html_page.h), inline SVG drawn here so they need no JavaScript:
// horizontal bars (one row per rank, so thousands of ranks stay legible as a column) and a
// rank x time-bin heat map. Each bar or cell carries a <title> (the browser's hover tip, also read
// by screen readers) and data-* attributes with the raw values (used by the tests and by anyone
// scripting the page). The heat map draws at most kMaxHeatRows rows; a larger job is shown in
// bands of consecutive ranks, each cell the largest mean lateness of the band's ranks, so the page
// stays a few MB at thousands of ranks. The bar charts keep one row per rank.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/report/html_format.h"
#include "analysis/report/html_page.h"
#include "analysis/report/html_report.h"

namespace commprof::html {
namespace {

constexpr size_t kMaxHeatRows = 256;

// Shared chart geometry (SVG user units = CSS px at full width).
constexpr double kChartWidth = 1060;
constexpr double kLabelGutter = 118;  // "rank 12345" plus the straggler mark
constexpr double kValueGutter = 210;  // the text after each bar

// With thin rows only every k-th row is labelled (k = 1, 2, 5, 10, 20, ...: about 14 px apart).
size_t LabelEvery(double row_height) {
  if (row_height >= 10 || !(row_height > 0)) {
    return 1;
  }
  static constexpr size_t kSteps[] = {2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};
  for (size_t k : kSteps) {
    if (static_cast<double>(k) * row_height >= 14) {
      return k;
    }
  }
  return 10000;
}

double RowHeight(size_t rows, double max_h) {
  if (rows == 0) {
    return max_h;
  }
  return std::clamp(std::floor(560.0 / static_cast<double>(rows)), 3.0, max_h);
}

// A horizontal axis under a plot of width `pw` starting at x0, for [0, axis_max] in ns.
void TimeAxis(std::string& h, double x0, double pw, double y, double axis_max, double step) {
  for (double t = 0; t <= axis_max * (1 + 1e-9); t += step) {
    const double x = x0 + pw * t / axis_max;
    h += "<line class=\"grid\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(y - 4) + "\" y2=\"" + Px(y) +
         "\"/><text class=\"axis\" x=\"" + Px(x) + "\" y=\"" + Px(y + 13) + "\" text-anchor=\"middle\">" + Dur(t) +
         "</text>";
  }
}

void Legend(std::string& h, double x, double y, std::initializer_list<std::pair<const char*, const char*>> items) {
  for (const auto& [cls, label] : items) {
    h += "<rect class=\"" + std::string(cls) + "\" x=\"" + Px(x) + "\" y=\"" + Px(y - 9) +
         "\" width=\"11\" height=\"11\" rx=\"2\"/><text x=\"" + Px(x + 16) + "\" y=\"" + Px(y) + "\">" + label +
         "</text>";
    x += 30 + 7.2 * static_cast<double>(std::string(label).size());
  }
}

// Row i of n (rows rh high) is labelled when it falls on the label step, or marks a straggler;
// a regular label too close to a straggler's is left out so the two do not overlap.
bool Labelled(size_t i, double rh, const std::vector<size_t>& straggler_rows) {
  const size_t every = LabelEvery(rh);
  if (std::find(straggler_rows.begin(), straggler_rows.end(), i) != straggler_rows.end()) {
    return true;
  }
  if (i % every != 0) {
    return false;
  }
  for (size_t sr : straggler_rows) {
    if (std::fabs(static_cast<double>(sr) - static_cast<double>(i)) * rh < 14) {
      return false;
    }
  }
  return true;
}

std::vector<size_t> StragglerRows(const Page& p, const std::vector<int64_t>& row_ranks) {
  std::vector<size_t> out;
  for (size_t i = 0; i < row_ranks.size(); ++i) {
    if (p.IsStraggler(row_ranks[i])) {
      out.push_back(i);
    }
  }
  return out;
}

void RankLabel(Page& p, int64_t rank, double y) {
  p.out += "<text class=\"lbl\" x=\"" + Px(kLabelGutter - 8) + "\" y=\"" + Px(y) + "\" text-anchor=\"end\">" +
           (p.IsStraggler(rank) ? "\xe2\x96\xb6 " : "") + "rank " + std::to_string(rank) + "</text>";
}

// Per-rank time in matched collectives, split into waiting for other ranks and the rest.
}  // namespace

void RankTimeChart(Page& p) {
  std::string& h_ = p.out;
  const auto& ranks_ = p.ranks;
  h_ += "<section id=\"rank-time\"><h2>Time in collectives per rank</h2>\n<div class=\"panel\">";
  if (ranks_.empty()) {
    h_ += "<p class=\"empty\">No ranks in this report.</p></div></section>\n";
    return;
  }
  double max = 0;
  for (const ReportModel::Rank* rr : ranks_) {
    max = std::max(max, NumOr(rr->comm_time_ns, 0));
  }
  if (!(max > 0)) {
    h_ += "<p class=\"empty\">No rank has time in matched collectives in this report.</p></div></section>\n";
    return;
  }
  const double step = NiceStep(max, 6);
  const double axis_max = max > 0 ? std::ceil(max / step) * step : 1;
  const double rh = RowHeight(ranks_.size(), 24);
  const double bh = std::max(2.0, std::round(rh * 0.72));
  const double top = 30, pw = kChartWidth - kLabelGutter - kValueGutter;
  const double height = top + rh * static_cast<double>(ranks_.size()) + 26;
  const bool labels = rh >= 10;
  std::vector<int64_t> row_ranks;
  row_ranks.reserve(ranks_.size());
  for (const ReportModel::Rank* rr : ranks_) {
    row_ranks.push_back(Page::RankOf(*rr));
  }
  const std::vector<size_t> straggler_rows = StragglerRows(p, row_ranks);
  h_ += "<svg class=\"chart\" id=\"chart-rank-time\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
        Px(kChartWidth) + " " + Px(height) + "\" width=\"" + Px(kChartWidth) + "\" height=\"" + Px(height) +
        "\" role=\"img\" aria-label=\"time in collectives per rank, waiting versus the rest\">";
  Legend(
      h_, kLabelGutter, 16,
      {{"seg-wait", "waiting for other ranks to arrive"}, {"seg-rest", "rest of the time in the call (the transfer)"}});
  for (double t = step; t <= axis_max * (1 + 1e-9); t += step) {
    const double x = kLabelGutter + pw * t / axis_max;
    h_ += "<line class=\"grid\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(top - 4) + "\" y2=\"" +
          Px(height - 26) + "\"/>";
  }
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const ReportModel::Rank& rr = *ranks_[i];
    const int64_t rank = Page::RankOf(rr);
    const double comm = std::max(0.0, NumOr(rr.comm_time_ns, 0));
    const double wait = std::clamp(NumOr(rr.wait_time_ns, 0), 0.0, comm);
    const double y = top + rh * static_cast<double>(i) + (rh - bh) / 2;
    const double ww = pw * wait / axis_max, rw = pw * (comm - wait) / axis_max;
    const std::string host = rr.host.value_or("");
    std::string tip = "rank " + std::to_string(rank) + (host.empty() ? "" : " (" + HtmlEscape(host) + ")") +
                      (p.IsStraggler(rank) ? ", the straggler" : "") + ": in collectives " + Dur(comm) + ", waiting " +
                      Dur(wait) + " (" + Pct(comm > 0 ? wait / comm : 0) + "), rest " + Dur(comm - wait);
    if (Num(rr.times_last)) {
      tip += "; last to arrive " + Count(*Num(rr.times_last)) + " times";
    }
    h_ += "<g class=\"bar" + std::string(p.IsStraggler(rank) ? " straggler" : "") + "\" data-rank=\"" +
          std::to_string(rank) + "\"><title>" + tip + "</title>";
    if (Labelled(i, rh, straggler_rows)) {
      RankLabel(p, rank, y + bh / 2 + 4);
    }
    h_ += "<rect class=\"seg seg-wait\" data-v=\"" + SortKey(wait) + "\" x=\"" + Px(kLabelGutter) + "\" y=\"" + Px(y) +
          "\" width=\"" + Px(ww) + "\" height=\"" + Px(bh) + "\"/>";
    h_ += "<rect class=\"seg seg-rest\" data-v=\"" + SortKey(comm - wait) + "\" x=\"" + Px(kLabelGutter + ww) +
          "\" y=\"" + Px(y) + "\" width=\"" + Px(rw) + "\" height=\"" + Px(bh) + "\"/>";
    if (labels) {
      h_ += "<text class=\"val\" x=\"" + Px(kLabelGutter + ww + rw + 6) + "\" y=\"" + Px(y + bh / 2 + 4) + "\">" +
            Dur(comm) + ", waiting " + Pct(comm > 0 ? wait / comm : 0) + "</text>";
    }
    h_ += "</g>";
  }
  TimeAxis(h_, kLabelGutter, pw, height - 22, axis_max, step);
  h_ += "</svg>";
  h_ +=
      "<p class=\"note\">Each bar is the rank's summed time inside matched blocking collectives; the "
      "first part is its wait for other ranks (for the last arrival, or for the root of a rooted collective; "
      "metrics.md &sect;2). A rank that waits little while the others wait much is the one they wait for.";
  if (!labels) {
    h_ += " Hover a bar for its rank and values.";
  }
  h_ += "</p></div></section>\n";
}

struct HeatRow {
  int64_t first = 0, last = 0;           // ranks covered (first == last unless banded)
  std::vector<std::optional<double>> v;  // per bin
  std::vector<int64_t> worst_rank;       // per bin: the rank with that value (bands)
  std::vector<int64_t> times_last;       // per bin, summed over the band
  bool has_times_last = false;
  int64_t total_last = 0;
};

void LatenessHeatMap(Page& p) {
  std::string& h_ = p.out;
  h_ += "<section id=\"lateness\"><h2>Lateness over time</h2>\n<div class=\"panel\">";
  if (!p.r.lateness) {
    h_ += "<p class=\"empty\">No lateness data in this report.</p></div></section>\n";
    return;
  }
  const ReportModel::Lateness& l = *p.r.lateness;
  const size_t bins = static_cast<size_t>(l.bins.value_or(0));
  const double bin_ns = NumOr(l.bin_ns, 0);
  std::vector<const ReportModel::LatenessRank*> rows;
  for (const ReportModel::LatenessRank& lr : List(l.ranks)) {
    rows.push_back(&lr);
  }
  std::stable_sort(
      rows.begin(), rows.end(),
      [](const ReportModel::LatenessRank* a, const ReportModel::LatenessRank* b) { return a->rank < b->rank; });
  if (bins == 0 || rows.empty()) {
    h_ += "<p class=\"empty\">The lateness section has no bins or no ranks.</p></div></section>\n";
    return;
  }
  // Band consecutive ranks when there are too many rows to draw one each.
  const size_t band = (rows.size() + kMaxHeatRows - 1) / kMaxHeatRows;
  std::vector<HeatRow> heat;
  double vmax = 0;
  bool any_value = false;
  for (size_t i = 0; i < rows.size(); i += band) {
    HeatRow hr;
    hr.first = rows[i]->rank.value_or(0);
    hr.v.assign(bins, std::nullopt);
    hr.worst_rank.assign(bins, hr.first);
    hr.times_last.assign(bins, 0);
    for (size_t k = i; k < std::min(rows.size(), i + band); ++k) {
      const ReportModel::LatenessRank& lr = *rows[k];
      const int64_t rank = lr.rank.value_or(0);
      hr.last = rank;
      const std::vector<Opt<double>>& ml = List(lr.mean_lateness_ns);
      const std::vector<Opt<int64_t>>& tl = List(lr.times_last);
      for (size_t b = 0; b < bins; ++b) {
        if (b < ml.size() && Num(ml[b])) {
          const double v = *ml[b];
          if (!hr.v[b] || v > *hr.v[b]) {
            hr.v[b] = v;
            hr.worst_rank[b] = rank;
          }
          vmax = std::max(vmax, v);
          any_value = true;
        }
        if (b < tl.size() && tl[b]) {
          hr.times_last[b] += *tl[b];
          hr.total_last += *tl[b];
          hr.has_times_last = true;
        }
      }
    }
    heat.push_back(std::move(hr));
  }

  const double rh = RowHeight(heat.size(), 26);
  const double right = 96;  // "last N×" column
  const double pw = kChartWidth - kLabelGutter - right;
  const double cw = pw / static_cast<double>(bins);
  const double gap = cw >= 5 ? 1 : 0;
  const double top = 44;
  const double height = top + rh * static_cast<double>(heat.size()) + 40;
  const double span = bin_ns * static_cast<double>(bins);
  const TimeUnit unit = AxisUnit(span);
  // Exact for round bin widths (1 us bins: no decimals); a real run's bins (9.316 ms) get three
  // significant digits, not the six it would take to print them exactly.
  const int decimals = bin_ns > 0
                           ? std::min(DecimalsFor(bin_ns / unit.div),
                                      std::max(0, 2 - static_cast<int>(std::floor(std::log10(bin_ns / unit.div)))))
                           : 0;
  auto at = [&](size_t b) { return Fmt("%.*f", decimals, bin_ns * static_cast<double>(b) / unit.div); };
  const bool labels = rh >= 10;
  std::vector<int64_t> row_ranks;
  // A band row counts as the straggler's when the straggler is one of its ranks.
  for (const HeatRow& hr : heat) {
    int64_t marked = INT64_MIN;
    for (int64_t sr : p.stragglers) {
      if (sr >= hr.first && sr <= hr.last) {
        marked = sr;
      }
    }
    row_ranks.push_back(marked);
  }
  const std::vector<size_t> straggler_rows = StragglerRows(p, row_ranks);

  h_ += "<svg class=\"chart\" id=\"chart-lateness\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
        Px(kChartWidth) + " " + Px(height) + "\" width=\"" + Px(kChartWidth) + "\" height=\"" + Px(height) +
        "\" role=\"img\" aria-label=\"mean lateness per rank and time bin\">";
  // Legend: the colour scale from 0 to the largest mean lateness, and the "no instance" swatch.
  h_ += "<defs><linearGradient id=\"heat-scale\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">";
  for (int s = 0; s < kHeatStopCount; ++s) {
    h_ += "<stop offset=\"" + Px(static_cast<double>(s) / (kHeatStopCount - 1)) + "\" stop-color=\"" +
          HeatColour(static_cast<double>(s) / (kHeatStopCount - 1)) + "\"/>";
  }
  h_ += "</linearGradient></defs>";
  const double lx = kLabelGutter, lw = 260;
  h_ += "<g id=\"heat-legend\"><text x=\"" + Px(lx) +
        "\" y=\"12\">mean lateness (arrival minus the first arrival)"
        "</text><rect x=\"" +
        Px(lx) + "\" y=\"17\" width=\"" + Px(lw) + "\" height=\"10\" fill=\"url(#heat-scale)\" stroke=\"#c8ccd2\"/>";
  h_ += "<text class=\"axis\" x=\"" + Px(lx) + "\" y=\"38\">0</text><text class=\"axis\" x=\"" + Px(lx + lw / 2) +
        "\" y=\"38\" text-anchor=\"middle\">" + Dur(vmax / 2) + "</text><text class=\"axis\" x=\"" + Px(lx + lw) +
        "\" y=\"38\" text-anchor=\"end\" id=\"heat-max\">" + Dur(vmax) + "</text>";
  h_ += "<rect class=\"cell empty\" x=\"" + Px(lx + lw + 24) +
        "\" y=\"17\" width=\"14\" height=\"10\"/>"
        "<text x=\"" +
        Px(lx + lw + 44) + "\" y=\"26\">no instance in the bin</text>";
  if (band > 1) {
    h_ += "<text x=\"" + Px(lx + lw + 220) + "\" y=\"26\">one row per " + std::to_string(band) +
          " ranks (largest value)</text>";
  }
  h_ += "</g>";

  for (size_t i = 0; i < heat.size(); ++i) {
    const HeatRow& hr = heat[i];
    const double y = top + rh * static_cast<double>(i);
    const bool straggler_row = row_ranks[i] != INT64_MIN;
    const std::string who = band == 1 ? "rank " + std::to_string(hr.first)
                                      : "ranks " + std::to_string(hr.first) + "\xe2\x80\x93" + std::to_string(hr.last);
    h_ += "<g class=\"heat-row" + std::string(straggler_row ? " straggler" : "") + "\" data-rank=\"" +
          std::to_string(hr.first) + "\"";
    if (band > 1) {
      h_ += " data-ranks=\"" + std::to_string(hr.first) + "-" + std::to_string(hr.last) + "\"";
    }
    h_ += ">";
    if (Labelled(i, rh, straggler_rows)) {
      h_ += "<text class=\"lbl\" x=\"" + Px(kLabelGutter - 8) + "\" y=\"" + Px(y + rh / 2 + 4) +
            "\" text-anchor=\"end\">" + (straggler_row ? "\xe2\x96\xb6 " : "") + who + "</text>";
    }
    for (size_t b = 0; b < bins; ++b) {
      std::string tip = who + " \xc2\xb7 " + at(b) + "\xe2\x80\x93" + at(b + 1) + " " + unit.suffix + " \xc2\xb7 ";
      if (hr.v[b]) {
        tip += (band > 1 ? "largest mean lateness " : "mean lateness ") + Dur(*hr.v[b]);
        if (band > 1) {
          tip += " (rank " + std::to_string(hr.worst_rank[b]) + ")";
        }
      } else {
        tip += "no instance in this bin";
      }
      if (hr.has_times_last && hr.times_last[b] > 0) {
        tip += " \xc2\xb7 last to arrive " + std::to_string(hr.times_last[b]) + "\xc3\x97";
      }
      h_ += "<rect class=\"cell" + std::string(hr.v[b] ? "" : " empty") + "\" data-rank=\"" + std::to_string(hr.first) +
            "\" data-bin=\"" + std::to_string(b) + "\"";
      if (hr.v[b]) {
        h_ += " data-v=\"" + SortKey(*hr.v[b]) + "\" fill=\"" + HeatColour(vmax > 0 ? *hr.v[b] / vmax : 0) + "\"";
      }
      h_ += " x=\"" + Px(kLabelGutter + cw * static_cast<double>(b)) + "\" y=\"" + Px(y) + "\" width=\"" +
            Px(std::max(0.5, cw - gap)) + "\" height=\"" + Px(std::max(1.0, rh - (rh >= 6 ? 1 : 0))) + "\"><title>" +
            tip + "</title></rect>";
    }
    if (labels && hr.has_times_last) {
      h_ += "<text class=\"val\" x=\"" + Px(kLabelGutter + pw + 8) + "\" y=\"" + Px(y + rh / 2 + 4) + "\">last " +
            std::to_string(hr.total_last) + "\xc3\x97</text>";
    }
    h_ += "</g>";
  }
  // Time axis: about 10 labels at bin edges.
  const size_t every = std::max<size_t>(1, (bins + 9) / 10);
  const double ay = top + rh * static_cast<double>(heat.size()) + 4;
  for (size_t b = 0; b <= bins; b += every) {
    const double x = kLabelGutter + cw * static_cast<double>(b);
    h_ += "<line class=\"grid\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(ay - 2) + "\" y2=\"" +
          Px(ay + 3) + "\" stroke=\"#9aa1ab\"/><text class=\"axis\" x=\"" + Px(x) + "\" y=\"" + Px(ay + 15) +
          "\" text-anchor=\"middle\">" + at(b) + "</text>";
  }
  h_ += "<text class=\"axis\" x=\"" + Px(kLabelGutter + pw / 2) + "\" y=\"" + Px(ay + 30) +
        "\" text-anchor=\"middle\">time since the start of the first bin (" + unit.suffix + ")</text>";
  h_ += "</svg>";
  h_ += "<p class=\"note\">Rows are ranks, columns are " + Dur(bin_ns) +
        " bins of the run; a cell's colour is the rank's mean lateness over the matched instances that started "
        "in the bin (0 for the first to arrive). A persistent straggler is a dark row; a transient one, a dark "
        "patch.";
  if (!any_value) {
    h_ += " No bin has an instance.";
  }
  if (!labels) {
    h_ += " Hover a cell for its rank, time and value.";
  }
  h_ += "</p></div></section>\n";
}

// Per-rank temporal breakdown of the run and the overlap of communication with computation.
void BreakdownChart(Page& p) {
  std::string& h_ = p.out;
  const auto& ranks_ = p.ranks;
  h_ += "<section id=\"breakdown\"><h2>Where each rank's time went</h2>\n<div class=\"panel\">";
  std::vector<const ReportModel::Rank*> rows;
  std::set<std::string> bases;
  for (const ReportModel::Rank* rr : ranks_) {
    if (rr->breakdown || Num(rr->overlap)) {
      rows.push_back(rr);
    }
    if (rr->overlap_basis) {
      bases.insert(*rr->overlap_basis);
    }
  }
  if (rows.empty()) {
    h_ +=
        "<p class=\"empty\">No breakdown or overlap data in this report (they come with report "
        "schema_version 2).</p></div></section>\n";
    return;
  }
  double max = 0;
  for (const ReportModel::Rank* rr : rows) {
    max = std::max(max, NumOr(rr->breakdown.value_or(ReportModel::Breakdown()).span_ns, 0));
  }
  const double step = NiceStep(max, 6);
  const double axis_max = max > 0 ? std::ceil(max / step) * step : 1;
  const double rh = RowHeight(rows.size(), 24);
  const double bh = std::max(2.0, std::round(rh * 0.72));
  const double top = 30, pw = kChartWidth - kLabelGutter - kValueGutter;
  const double height = top + rh * static_cast<double>(rows.size()) + 26;
  const bool labels = rh >= 10;
  std::vector<int64_t> row_ranks;
  row_ranks.reserve(rows.size());
  for (const ReportModel::Rank* rr : rows) {
    row_ranks.push_back(Page::RankOf(*rr));
  }
  const std::vector<size_t> straggler_rows = StragglerRows(p, row_ranks);
  h_ += "<svg class=\"chart\" id=\"chart-breakdown\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
        Px(kChartWidth) + " " + Px(height) + "\" width=\"" + Px(kChartWidth) + "\" height=\"" + Px(height) +
        "\" role=\"img\" aria-label=\"per-rank breakdown of the run and overlap\">";
  Legend(h_, kLabelGutter, 16,
         {{"seg-compute", "compute"},
          {"seg-exposed", "exposed communication"},
          {"seg-memory", "memory operations"},
          {"seg-idle", "idle"}});
  for (double t = step; t <= axis_max * (1 + 1e-9); t += step) {
    const double x = kLabelGutter + pw * t / axis_max;
    h_ += "<line class=\"grid\" x1=\"" + Px(x) + "\" x2=\"" + Px(x) + "\" y1=\"" + Px(top - 4) + "\" y2=\"" +
          Px(height - 26) + "\"/>";
  }
  struct Part {
    Opt<int64_t> ReportModel::Breakdown::*value;
    const char* cls;
    const char* name;
  };
  const Part parts[] = {{&ReportModel::Breakdown::compute_ns, "seg-compute", "compute"},
                        {&ReportModel::Breakdown::exposed_comm_ns, "seg-exposed", "exposed comm"},
                        {&ReportModel::Breakdown::memory_ns, "seg-memory", "memory"},
                        {&ReportModel::Breakdown::idle_ns, "seg-idle", "idle"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const ReportModel::Rank& rr = *rows[i];
    const int64_t rank = Page::RankOf(rr);
    const ReportModel::Breakdown bd = rr.breakdown.value_or(ReportModel::Breakdown());
    const double span = NumOr(bd.span_ns, 0);
    const std::optional<double> overlap = Num(rr.overlap);
    const double y = top + rh * static_cast<double>(i) + (rh - bh) / 2;
    std::string tip = "rank " + std::to_string(rank) + ": span " + Dur(span);
    for (const Part& part : parts) {
      if (Num(bd.*part.value)) {
        tip += "; " + std::string(part.name) + " " + Dur(*Num(bd.*part.value)) +
               (span > 0 ? " (" + Pct(*Num(bd.*part.value) / span) + ")" : "");
      }
    }
    tip += "; overlap " + (overlap ? Pct(*overlap) : std::string(kDash));
    const std::string basis = rr.overlap_basis.value_or("");
    if (!basis.empty()) {
      tip += " (" + HtmlEscape(basis) + ")";
    }
    h_ += "<g class=\"bar" + std::string(p.IsStraggler(rank) ? " straggler" : "") + "\" data-rank=\"" +
          std::to_string(rank) + "\"><title>" + tip + "</title>";
    if (Labelled(i, rh, straggler_rows)) {
      RankLabel(p, rank, y + bh / 2 + 4);
    }
    double x = kLabelGutter;
    for (const Part& part : parts) {
      const double v = std::max(0.0, NumOr(bd.*part.value, 0));
      const double w = std::min(pw * v / axis_max, kLabelGutter + pw - x);
      if (w <= 0) {
        continue;
      }
      h_ += "<rect class=\"seg " + std::string(part.cls) + "\" data-v=\"" + SortKey(v) + "\" x=\"" + Px(x) + "\" y=\"" +
            Px(y) + "\" width=\"" + Px(w) + "\" height=\"" + Px(bh) + "\"/>";
      x += w;
    }
    if (labels) {
      h_ += "<text class=\"val\" x=\"" + Px(x + 6) + "\" y=\"" + Px(y + bh / 2 + 4) + "\">overlap " +
            (overlap ? Pct(*overlap) : std::string(kDash)) + "</text>";
    }
    h_ += "</g>";
  }
  TimeAxis(h_, kLabelGutter, pw, height - 22, axis_max, step);
  h_ +=
      "</svg><p class=\"note\">Each bar is the rank's span split into compute, communication not hidden "
      "behind compute (exposed), memory operations and idle time; <i>overlap</i> is the share of its "
      "communication that ran while it computed.";
  if (!bases.empty()) {
    h_ += " Overlap basis: ";
    bool first = true;
    for (const std::string& b : bases) {
      h_ += (first ? "" : ", ") + std::string("<code>") + HtmlEscape(b) + "</code>";
      first = false;
    }
    h_ += ".";
  }
  h_ += "</p></div></section>\n";
}

// The steps' times (docs/metrics.md §10): one column per step in step order, its height the step's
// time (its slowest rank), its lower part the mean per-rank wait in the step's collectives. A step
// with a straggler is marked with the rank. Past kMaxStepColumns steps, each column is a band of
// consecutive steps shown by its slowest one.
void StepTimeChart(Page& p) {
  constexpr size_t kMaxStepColumns = 240;
  const auto& steps = List(p.r.steps);
  if (steps.empty()) {
    return;  // no step marks: no section (the JSON's steps is empty)
  }
  std::string& h = p.out;
  h += "<section id=\"step-time\"><h2>Step time</h2>\n<div class=\"panel\">";
  const size_t per = (steps.size() + kMaxStepColumns - 1) / kMaxStepColumns;
  std::vector<const ReportModel::Step*> cols;  // the slowest step of each band
  for (size_t i = 0; i < steps.size(); i += per) {
    const ReportModel::Step* worst = &steps[i];
    for (size_t k = i; k < std::min(steps.size(), i + per); ++k) {
      if (NumOr(steps[k].max_ns, 0) > NumOr(worst->max_ns, 0)) {
        worst = &steps[k];
      }
    }
    cols.push_back(worst);
  }
  double max = 0;
  for (const ReportModel::Step* s : cols) {
    max = std::max(max, NumOr(s->max_ns, 0));
  }
  const double step = NiceStep(max > 0 ? max : 1, 5);
  const double axis_max = max > 0 ? std::ceil(max / step) * step : 1;
  const double left = 80, top = 30, ph = 220, pw = kChartWidth - left - 20;
  const double height = top + ph + 40;
  const double cw = pw / static_cast<double>(cols.size());
  const double bw = std::max(1.0, cw * 0.8);
  const size_t label_every = std::max<size_t>(1, static_cast<size_t>(std::ceil(48.0 / cw)));  // labels 48 px apart
  h += "<svg class=\"chart\" id=\"chart-step-time\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " +
       Px(kChartWidth) + " " + Px(height) + "\" width=\"" + Px(kChartWidth) + "\" height=\"" + Px(height) +
       "\" role=\"img\" aria-label=\"time of each step, its slowest rank, and the mean wait in it\">";
  Legend(h, left, 16, {{"seg-wait", "mean wait per rank in the step's collectives"}, {"seg-rest", "rest of the step"}});
  for (double t = 0; t <= axis_max * (1 + 1e-9); t += step) {
    const double y = top + ph - ph * t / axis_max;
    h += "<line class=\"grid\" x1=\"" + Px(left) + "\" x2=\"" + Px(left + pw) + "\" y1=\"" + Px(y) + "\" y2=\"" +
         Px(y) + "\"/><text class=\"axis\" x=\"" + Px(left - 6) + "\" y=\"" + Px(y + 4) + "\" text-anchor=\"end\">" +
         Dur(t) + "</text>";
  }
  for (size_t i = 0; i < cols.size(); ++i) {
    const ReportModel::Step& s = *cols[i];
    const double time = std::max(0.0, NumOr(s.max_ns, 0));
    const size_t ranks = List(s.duration_ns).size();
    const double wait = std::clamp(ranks > 0 ? NumOr(s.wait_ns, 0) / static_cast<double>(ranks) : 0.0, 0.0, time);
    const double x = left + cw * static_cast<double>(i) + (cw - bw) / 2;
    const double hw = ph * wait / axis_max, hr = ph * (time - wait) / axis_max;
    const std::string number = std::to_string(s.step.value_or(0));
    std::string tip = "step " + number + (per > 1 ? " (slowest of its band of " + std::to_string(per) + ")" : "") +
                      ": " + Dur(time) + " on its slowest rank, " + Dur(NumOr(s.min_ns, 0)) +
                      " on its fastest; mean wait " + Dur(wait);
    const Opt<int64_t> straggler = s.Straggler();
    if (straggler) {
      tip += "; straggler rank " + std::to_string(*straggler);
    }
    if (s.Window()) {
      tip += "; window " + std::to_string(*s.Window());
    }
    h += "<g class=\"bar" + std::string(straggler ? " straggler" : "") + "\" data-step=\"" + number + "\"";
    if (straggler) {
      h += " data-straggler=\"" + std::to_string(*straggler) + "\"";
    }
    h += "><title>" + tip + "</title>";
    h += "<rect class=\"seg seg-wait\" data-v=\"" + SortKey(wait) + "\" x=\"" + Px(x) + "\" y=\"" + Px(top + ph - hw) +
         "\" width=\"" + Px(bw) + "\" height=\"" + Px(hw) + "\"/>";
    h += "<rect class=\"seg seg-rest\" data-v=\"" + SortKey(time - wait) + "\" x=\"" + Px(x) + "\" y=\"" +
         Px(top + ph - hw - hr) + "\" width=\"" + Px(bw) + "\" height=\"" + Px(hr) + "\"/>";
    if (straggler) {
      h += "<text class=\"lbl\" x=\"" + Px(x + bw / 2) + "\" y=\"" + Px(top + ph - hw - hr - 4) +
           "\" text-anchor=\"middle\">rank " + std::to_string(*straggler) + "</text>";
    }
    if (i % label_every == 0) {
      h += "<text class=\"axis\" x=\"" + Px(x + bw / 2) + "\" y=\"" + Px(top + ph + 13) + "\" text-anchor=\"middle\">" +
           number + "</text>";
    }
    h += "</g>";
  }
  h += "<text class=\"axis\" x=\"" + Px(left + pw / 2) + "\" y=\"" + Px(top + ph + 30) +
       "\" text-anchor=\"middle\">steps " + std::to_string(steps.front().step.value_or(0)) + " to " +
       std::to_string(steps.back().step.value_or(0)) + ", in order</text>";
  h += "</svg>";
  h += "<p class=\"note\">Each column is one step: its time on its slowest rank, its lower part the mean wait "
       "per rank in the step's collectives. A step whose lateness one rank caused is marked with that rank "
       "(metrics.md &sect;10).";
  if (per > 1) {
    h += " With " + std::to_string(steps.size()) + " steps, each column is the slowest of " + std::to_string(per) +
         " consecutive steps.";
  }
  h += "</p></div></section>\n";
}

}  // namespace commprof::html
