// The HTML report's static assets, kept as files in analysis/report/assets/ and embedded at build
// time (assets/embed_assets.cmake generates the definitions), so the page needs nothing at run
// time and the CSS and JavaScript are edited as what they are.
#pragma once

#include <string_view>

namespace commprof {

std::string_view ReportCss();  // assets/report.css: the page's whole style sheet
std::string_view ReportJs();   // assets/report.js: makes the tables sortable (the page works without it)

}  // namespace commprof
