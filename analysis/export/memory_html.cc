#include "analysis/export/memory_html.h"

#include <cinttypes>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/export/memory_assets.h"
#include "analysis/metrics/memory_usage.h"
#include "analysis/report/html_format.h"
#include "analysis/report/html_report.h"
#include "commprof/event.h"

namespace commprof {
namespace {

constexpr size_t kRanksNamed = 32;  // ranks without records named in the page's header line

std::string Ms(int64_t ns, int64_t origin) { return html::Fmt("%.3f", static_cast<double>(ns - origin) / 1e6); }

std::string DeviceLabel(const DeviceTimeline& d) { return MemoryDeviceLabel(d.device); }

// One row per chart: where its peak is, what it was made of and the largest blocks live then.
void PeakTable(const MemoryTimeline& t, std::string& out) {
  out +=
      "<h2>Peaks</h2>\n<table id=\"tbl-peaks\">\n<thead><tr><th>rank</th><th>device</th><th>peak</th>"
      "<th>at (ms)</th><th>by category</th><th>before trace</th><th>live at the peak</th></tr></thead>\n<tbody>\n";
  for (const DeviceTimeline& d : t.devices) {
    out += "<tr data-rank=\"" + std::to_string(d.rank) + "\"><td>" + std::to_string(d.rank) + "</td><td>" +
           DeviceLabel(d) + "</td><td data-v=\"" + std::to_string(d.peak_bytes) + "\">" +
           html::Bytes(static_cast<double>(d.peak_bytes)) + "</td><td>" +
           (d.peak_bytes > 0 ? Ms(d.peak_time_ns, t.start_ns) : std::string(html::kDash)) + "</td><td>";
    for (size_t c = 0; c < d.categories.size(); ++c) {
      out += (c ? ", " : "") + HtmlEscape(MemoryCategoryName(d.categories[c])) + " " +
             html::Bytes(static_cast<double>(d.peak_by_category[c]));
    }
    out += "</td><td>" +
           (d.baseline_bytes ? html::Bytes(static_cast<double>(*d.baseline_bytes)) : std::string(html::kDash)) +
           "</td><td>";
    if (d.live.empty()) {
      out += html::kDash;
    } else {
      out += "<details><summary>" + std::to_string(d.live_count) +
             " allocation(s)</summary>\n"
             "<table class=\"live\"><thead><tr><th>address</th><th>bytes</th><th>category</th>"
             "<th>allocated (ms)</th><th>name</th><th>allocated by</th></tr></thead><tbody>\n";
      for (const LiveAllocation& a : d.live) {
        out += html::Fmt("<tr><td><code>0x%" PRIx64 "</code></td>", a.address) + "<td>" +
               html::Bytes(static_cast<double>(a.bytes)) + "</td><td>" + HtmlEscape(MemoryCategoryName(a.memory_kind)) +
               "</td><td>" + Ms(a.allocated_ns, t.start_ns) + "</td><td>" + HtmlEscape(a.name) + "</td><td>" +
               HtmlEscape(a.allocated_by) + "</td></tr>\n";
      }
      if (d.live_count > d.live.size()) {
        out += "<tr class=\"more\"><td colspan=\"6\">" + std::to_string(d.live_count - d.live.size()) + " more, " +
               html::Bytes(static_cast<double>(d.more_bytes)) + " in all</td></tr>\n";
      }
      out += "</tbody></table></details>";
    }
    out += "</td></tr>\n";
  }
  out += "</tbody></table>\n";
}

}  // namespace

void WriteMemoryTimelineHtml(const MemoryTimeline& t, const MemoryExportOptions& o, std::ostream& out) {
  std::ostringstream data;
  WriteMemoryTimelineJson(t, o, data);
  std::string json = data.str();
  // Inside a script element only "</script" could end it early; '<' never occurs in JSON outside
  // strings, so escaping every one keeps the data valid JSON and the element closed.
  std::string safe;
  safe.reserve(json.size());
  for (char c : json) {
    if (c == '<') {
      safe += "\\u003c";
    } else {
      safe += c;
    }
  }
  uint32_t ranks = 0;
  for (size_t i = 0; i < t.devices.size(); ++i) {
    ranks += (i == 0 || t.devices[i].rank != t.devices[i - 1].rank) ? 1 : 0;
  }
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"generator\" content=\"commprof export --format memory-html\">\n";
  page += "<title>commprof memory timeline \xc2\xb7 " + HtmlEscape(o.file) + "</title>\n<style>\n";
  page += MemoryCss();
  page += "</style>\n</head>\n<body>\n<main>\n<h1>Memory timeline</h1>\n";
  page += "<p class=\"meta\">File <code>" + HtmlEscape(o.file) + "</code> \xc2\xb7 " + std::to_string(ranks) +
          " rank(s) with allocation records, " + std::to_string(t.devices.size()) + " chart(s)";
  if (o.window) {
    page += " \xc2\xb7 window " + std::to_string(*o.window);
  }
  // Ranks without a chart are named (the first 32), so a rank whose records went missing can be found.
  auto name_ranks = [&](const std::vector<uint32_t>& list, const char* what) {
    if (list.empty()) {
      return;
    }
    page += " \xc2\xb7 " + std::to_string(list.size()) + what;
    for (size_t i = 0; i < list.size() && i < kRanksNamed; ++i) {
      page += (i ? ", " : "") + std::to_string(list[i]);
    }
    if (list.size() > kRanksNamed) {
      page += ", \xe2\x80\xa6";
    }
  };
  name_ranks(t.ranks_without_records, " rank(s) without any: ");
  name_ranks(o.unreadable_ranks, " rank(s) that could not be read: ");
  page +=
      "</p>\n<p class=\"note\">One chart per rank and device: the bytes in use after each allocation or free "
      "record, stacked by memory kind, all on one time axis (the aligned clock, in ms from the first record). "
      "Each chart's height runs from 0 to its own peak, marked by a red line. ";
  if (o.max_points > 0) {
    page += "Charts with more than " + std::to_string(o.max_points) + " records are downsampled: each of " +
            std::to_string(o.max_points / 4) +
            " time buckets keeps its first, last, lowest and highest point, so the peak is kept. ";
  }
  page +=
      "Hover a chart for the time and bytes. Metrics: docs/metrics.md \xc2\xa7"
      "7.</p>\n";
  page +=
      "<div id=\"legend\"></div>\n<div id=\"axis\"></div>\n<div id=\"charts\"></div>\n"
      "<div id=\"tooltip\" hidden></div>\n";
  PeakTable(t, page);
  page += "<footer>Generated by commprof. This file is self-contained: it loads nothing from the network.</footer>\n";
  page += "</main>\n<script type=\"application/json\" id=\"memory-data\">";
  out << page << safe << "</script>\n<script>\n" << MemoryJs() << "</script>\n</body>\n</html>\n";
}

}  // namespace commprof
