// The HTML form of `commprof report` (DESIGN.md §8, docs/cli.md "HTML report").
//
// The page is rendered from the report JSON (schema "commprof-report", keys in docs/cli.md)
// rather than from the analysis structs, so the page and `--format json` show the
// same figures and cannot drift apart. It is one self-contained file that opens from disk with no
// network: inline CSS, charts as inline SVG drawn here (they need no JavaScript), and a few lines
// of inline JavaScript only to make the tables sortable. Every string taken from the input (host
// names, paths, job ids, collective names) is HTML-escaped.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>

#include "core/status.h"

namespace commprof {

// Checks `report` and writes the page to `out`. Required: "schema" == "commprof-report", an
// integer "world_size" >= 0, and a "ranks" array whose entries each have an integer "rank". Every
// other key is optional, and null counts as absent; a section whose data is absent says so on the
// page. A key of the wrong type or shape is rejected. On any error nothing is written and the
// Status names the key at fault, e.g. "report key ranks[2].rank: missing".
Status WriteHtmlReport(const nlohmann::ordered_json& report, std::ostream& out);

// HTML-escapes text for element content and quoted attribute values (& < > " '); control
// characters other than tab and newline become U+FFFD. Exposed for the tests.
std::string HtmlEscape(std::string_view s);

}  // namespace commprof
