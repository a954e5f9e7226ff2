// html_report_render REPORT.json OUT.html: renders a report JSON with WriteHtmlReport (the
// renderer under test in the browser test, check_html_report.py). Exit 1 with the Status message
// on stderr when the input is unreadable or rejected.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/report/html_report.h"

int main(int argc, char** argv) try {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s REPORT.json OUT.html\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  nlohmann::ordered_json report;
  try {
    report = nlohmann::ordered_json::parse(in);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[1], e.what());
    return 1;
  }
  std::ofstream out(argv[2]);
  const commprof::Status st = commprof::WriteHtmlReport(report, out);
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[1], st.message().c_str());
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "html_report_render: %s\n", e.what());
  return 1;
}
