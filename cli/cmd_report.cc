// `commprof report FILE.h5 [--format text|json] [-o OUT]`: cross-rank wait and straggler report
// over the matched blocking MPI collectives (docs/metrics.md, docs/report-json.md).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analysis/load/event_screen.h"
#include "analysis/load/profile_reader.h"
#include "analysis/report/analysis_group.h"
#include "analysis/report/html_report.h"
#include "analysis/report/job_report.h"
#include "analysis/report/report_json.h"
#include "analysis/report/report_model.h"
#include "analysis/report/text_report.h"
#include "cli/commands.h"

namespace commprof::cli {
namespace {

struct Options {
  std::string path;
  std::string format = "text";
  std::string output;
  bool save = false;
  int64_t window = -1;
};

int RunReport(const Options& o) {
  if (o.format != "text" && o.format != "json" && o.format != "html") {
    std::fprintf(stderr, "commprof report: --format %s is not supported (text, json or html)\n", o.format.c_str());
    return 2;
  }
  auto reader = ProfileReader::Open(o.path);
  if (!reader.ok()) {
    std::fprintf(stderr, "commprof report: %s\n", reader.status().message().c_str());
    return 1;
  }
  if (!SelectWindowIfAsked(*reader.value(), o.window, "report")) {
    return 1;
  }
  // A rank with a row the analyses cannot take is left out like an unreadable group, and named.
  ScreenEventRows(*reader.value());
  const std::vector<RankFault> faults = reader.value()->info().faults;
  for (const RankFault& f : faults) {
    std::fprintf(stderr, "commprof report: %s\n", f.message.c_str());
  }
  auto report = AnalyzeJob(*reader.value());
  if (!report.ok()) {
    std::fprintf(stderr, "commprof report: %s\n", report.status().message().c_str());
    return 1;
  }
  if (o.save) {
    reader.value().reset();  // the writer opens the file read-write
    Status st = WriteAnalysisGroup(o.path, report.value());
    if (!st.ok()) {
      std::fprintf(stderr, "commprof report: %s\n", st.message().c_str());
      return 1;
    }
  }
  // One model, built once, for whichever form is asked for.
  const ReportModel model = BuildReportModel(report.value());
  std::ostringstream os;
  if (o.format == "json") {
    os << ReportModelToJson(model).dump(2) << "\n";
  } else if (o.format == "html") {
    Status st = WriteHtmlReport(model, os);
    if (!st.ok()) {
      std::fprintf(stderr, "commprof report: %s\n", st.message().c_str());
      return 1;
    }
  } else {
    WriteTextReport(model, os);
  }
  // Exit 1 when some ranks could not be read, although the report of the others was written.
  const int done = faults.empty() ? 0 : 1;
  if (o.output.empty()) {
    std::cout << os.str();
    return done;
  }
  std::ofstream f(o.output);
  f << os.str();
  if (!f) {
    std::fprintf(stderr, "commprof report: cannot write %s\n", o.output.c_str());
    return 1;
  }
  return done;
}

}  // namespace

Runner AddReportCommand(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("report",
                                     "Cross-rank report: wait, transfer and bandwidth per collective type "
                                     "and per rank, stragglers and the verdict, point-to-point Late "
                                     "Sender/Receiver, overlap and where each rank's time went "
                                     "(definitions: docs/metrics.md).");
  sub->add_option("file", o->path, "commprof HDF5 file")->required();
  sub->add_option("--format", o->format, "text, json (schema in docs/report-json.md) or html (a self-contained page)")
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "write to this file instead of standard output");
  sub->add_flag("--save", o->save, "also (re)write the analysis into the file's /analysis group");
  AddWindowOption(sub, o->window);
  return [o] { return RunReport(*o); };
}

}  // namespace commprof::cli
