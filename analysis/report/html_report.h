// The HTML form of `commprof report` (docs/cli.md "HTML report").
//
// The page is rendered from the typed report model (report_model.h), the same model the text and
// JSON reports render, so the page and `--format json` show the same figures and cannot drift
// apart. It is one self-contained file that opens from disk with no network: the style sheet and
// the small script that makes the tables sortable are embedded (assets/), and the charts are
// inline SVG drawn here (they need no JavaScript). Every string taken from the report (host names,
// paths, job ids, collective names) is HTML-escaped.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>

#include "analysis/report/report_model.h"
#include "core/status.h"

namespace commprof {

// Writes the page of `report` to `out`. A section whose data the model lacks says so on the page.
Status WriteHtmlReport(const ReportModel& report, std::ostream& out);

// The page of a report JSON (a saved `--format json` report, or a hand-made one): read into the
// model with ReportModelFromJson (report_json.h), then rendered. On a malformed input nothing is
// written and the Status names the key at fault, e.g. "report key ranks[2].rank: missing".
Status WriteHtmlReport(const nlohmann::ordered_json& report, std::ostream& out);

// HTML-escapes text for element content and quoted attribute values (& < > " '); control
// characters other than tab and newline become U+FFFD. Exposed for the tests.
std::string HtmlEscape(std::string_view s);

}  // namespace commprof
