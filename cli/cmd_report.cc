// `commprof report FILE.h5 [--format text|json] [-o OUT]`: cross-rank wait and straggler report
// over the matched blocking MPI collectives (docs/metrics.md, docs/report-json.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "analysis/hang/hang_from_file.h"
#include "analysis/load/event_screen.h"
#include "analysis/load/profile_reader.h"
#include "analysis/report/analysis_group.h"
#include "analysis/report/html_report.h"
#include "analysis/report/job_report.h"
#include "analysis/report/report_json.h"
#include "analysis/report/report_model.h"
#include "analysis/report/report_parts_codec.h"
#include "analysis/report/text_report.h"
#include "cli/analysis_open.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "core/log.h"

namespace commprof::cli {
namespace {

struct Options {
  std::string path;
  std::string format = "text";
  std::string output;
  bool save = false;
  int64_t window = -1;
};

// The processes of a distributed report (docs/scale.md#distributed-analysis): the first does the
// cross-rank matching and everything after it and writes the output; process 1 screens the rows
// and matches the point-to-point messages; the last one says whether the job may have hung; the
// per-rank passes are split in contiguous blocks of ranks over the processes after 1 (over
// process 1 when there are two).
constexpr int kTagScreening = 1;
constexpr int kTagP2P = 2;
constexpr int kTagRankPasses = 3;
constexpr int kTagHang = 4;

std::vector<int> RankPassProcesses(int size) {
  std::vector<int> out;
  for (int p = size > 2 ? 2 : 1; p < size; ++p) {
    out.push_back(p);
  }
  return out;
}

// A process after the first: screens the rows as the first would (every process must analyse the
// same ranks; process 1 sends what it left out), computes its parts and sends them to the first,
// errors included. Sends return at once, so a process goes on to its next part while the first is
// still busy; FinishSends (before the closing barrier) waits for them.
void ComputeGivenParts(AnalysisWorld& world, ProfileReader& reader) {
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const std::vector<RankFault> left_out = ScreenEventRowsLeftOut(reader);
  if (world.rank() == 1) {
    world.Send(0, kTagScreening, EncodeScreeningPart(left_out));
    world.Send(0, kTagP2P, EncodeP2PPart(MatchP2PMessages(reader, ReportP2POptions())));
    COMMPROF_LOG_INFO("analysis process 1: screening and point-to-point matching done after %.3f s", seconds());
  }
  if (world.rank() == world.size() - 1) {
    // "0": no hang to diagnose. "1": maybe (or the diagnosis failed): the first process diagnoses it
    // itself, so what it reports (or its error) is what one process reports.
    auto hang = hang::DiagnoseFile(reader);
    world.Send(0, kTagHang, hang.ok() && !hang.value().has_value() ? "0" : "1");
  }
  const std::vector<int> procs = RankPassProcesses(world.size());
  const auto it = std::find(procs.begin(), procs.end(), world.rank());
  if (it != procs.end()) {
    const std::vector<RankInfo>& ranks = reader.info().ranks;
    const auto [first, last] = BlockOf(ranks.size(), static_cast<size_t>(it - procs.begin()), procs.size());
    Result<IndexedRankPasses> part = IndexedRankPasses{};
    for (size_t i = first; i < last; ++i) {
      auto pass = ComputeRankPass(reader, ranks[i]);
      if (!pass.ok()) {
        part = pass.status();  // the first failing rank of the block, as one process would stop there
        break;
      }
      part.value().emplace_back(static_cast<uint32_t>(i), std::move(pass.value()));
      world.Progress();  // the point-to-point part may be on its way meanwhile
    }
    world.Send(0, kTagRankPasses, EncodeRankPassPart(part));
    COMMPROF_LOG_INFO("analysis process %d: passes of %zu rank(s) from index %zu done after %.3f s", world.rank(),
                      last - first, first, seconds());
  }
  world.FinishSends();
}

// On the first process: the parts the others send, as AnalysisSources, and a drain for those the
// analysis did not ask for (it stopped early), so no process is left blocked in a send.
class GivenParts {
 public:
  GivenParts(AnalysisWorld& world, ProfileReader& reader) : world_(world), reader_(reader) {}

  AnalysisSources Sources() {
    AnalysisSources s;
    s.screened = [this] { return TakeScreening(); };
    s.p2p = [this] {
      p2p_taken_ = true;
      return DecodeP2PPart(world_.Receive(1, kTagP2P));
    };
    s.rank_passes = [this] { return TakeRankPasses(); };
    s.may_have_hung = [this] {
      hang_taken_ = true;
      return world_.Receive(world_.size() - 1, kTagHang) != "0";
    };
    return s;
  }
  // Whether the first analysis stopped because process 1's screening left ranks out (now marked).
  bool analyze_again() const { return analyze_again_; }
  const Status& screening_error() const { return screening_error_; }
  void Drain() {
    (void)TakeScreening();
    if (!p2p_taken_) {
      (void)world_.Receive(1, kTagP2P);
    }
    if (!passes_taken_) {
      (void)TakeRankPasses();
    }
    if (!hang_taken_) {
      (void)world_.Receive(world_.size() - 1, kTagHang);
    }
  }

 private:
  // The analysis read the file unscreened meanwhile, which stands when nothing was left out.
  bool TakeScreening() {
    if (!screening_taken_) {
      screening_taken_ = true;
      auto left_out = DecodeScreeningPart(world_.Receive(1, kTagScreening));
      if (!left_out.ok()) {
        screening_error_ = left_out.status();
        return true;  // reported by AnalyzeAndWrite
      }
      for (RankFault& f : left_out.value()) {
        reader_.MarkUnreadable(*f.rank, std::move(f.message));
        analyze_again_ = true;
      }
      return !analyze_again_;
    }
    return true;
  }

  Result<std::vector<RankPass>> TakeRankPasses() {
    passes_taken_ = true;
    std::vector<std::optional<RankPass>> got(reader_.info().ranks.size());
    Status first_error;  // processes in rank-block order: the lowest failing rank, as one process finds it
    for (int p : RankPassProcesses(world_.size())) {
      auto part = DecodeRankPassPart(world_.Receive(p, kTagRankPasses));
      if (!part.ok()) {
        if (first_error.ok()) {
          first_error = part.status();
        }
        continue;
      }
      for (auto& [index, pass] : part.value()) {
        // Placed by position, so both sides must have screened the same ranks: a pass of another
        // rank is an error, never a figure under the wrong rank. (Every part is still received:
        // its sender waits for that.)
        if (index >= got.size() || pass.overlap.rank != reader_.info().ranks[index].rank) {
          if (first_error.ok()) {
            first_error = Internal("distributed report: process " + std::to_string(p) +
                                   " analysed other ranks than the first (its view of the file differs)");
          }
          continue;
        }
        got[index] = std::move(pass);
      }
    }
    COMMPROF_RETURN_IF_ERROR(first_error);
    std::vector<RankPass> out;
    out.reserve(got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (!got[i]) {
        return Internal("distributed report: no process sent the pass of rank index " + std::to_string(i));
      }
      out.push_back(std::move(*got[i]));
    }
    return out;
  }

 private:
  AnalysisWorld& world_;
  ProfileReader& reader_;
  bool screening_taken_ = false;
  bool analyze_again_ = false;
  bool p2p_taken_ = false;
  bool passes_taken_ = false;
  bool hang_taken_ = false;
  Status screening_error_;  // process 1's screening part could not be read
};

// Writes the report of `report` in the asked form to stdout or o.output; returns the exit code.
int WriteReport(const Options& o, JobReport& report, bool some_ranks_unreadable) {
  // One model, built once, for whichever form is asked for.
  const ReportModel model = BuildReportModel(report);
  std::ostringstream os;
  if (o.format == "json") {
    // Invalid UTF-8 (a path, a host name) becomes U+FFFD rather than an exception.
    os << ReportModelToJson(model).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
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
  const int done = some_ranks_unreadable ? 1 : 0;
  const Status st = WriteOutput(o.output.empty() ? "-" : o.output, [&os](std::ostream& out) {
    out << os.str();
    return Status::Ok();
  });
  if (!st.ok()) {
    std::fprintf(stderr, "commprof report: %s\n", st.message().c_str());
    return 1;
  }
  return done;
}

void PrintFaults(const ProfileReader& reader) {
  for (const RankFault& f : reader.info().faults) {
    std::fprintf(stderr, "commprof report: %s\n", f.message.c_str());
  }
}

// The first process (the only one without MPI): the analysis, /analysis when asked, the output.
// Without MPI the rows are screened when the analysis needs it (AnalyzeReadable); with it, process
// 1 screens them meanwhile.
int AnalyzeAndWrite(const Options& o, std::unique_ptr<ProfileReader> reader, AnalysisWorld* world) {
  std::optional<GivenParts> given;
  if (world != nullptr) {
    given.emplace(*world, *reader);
  }
  auto report = given ? AnalyzeJob(*reader, given->Sources()) : AnalyzeReadable(*reader);  // screened when needed
  if (!given) {
    PrintFaults(*reader);
  }
  if (given && given->analyze_again()) {
    report = AnalyzeJob(*reader, given->Sources());  // the screened ranks, as one process analyses them
  }
  if (given) {
    given->Drain();
    PrintFaults(*reader);
    world->Barrier();  // every other process has closed the file: --save may open it read-write
    if (report.ok() && !given->screening_error().ok()) {
      report = given->screening_error();
    }
  }
  if (!report.ok()) {
    std::fprintf(stderr, "commprof report: %s\n", report.status().message().c_str());
    return 1;
  }
  const bool some_ranks_unreadable = !reader->info().faults.empty();
  if (o.save) {
    reader.reset();  // the writer opens the file read-write
    Status st = WriteAnalysisGroup(o.path, report.value());
    if (!st.ok()) {
      std::fprintf(stderr, "commprof report: %s\n", st.message().c_str());
      return 1;
    }
  }
  return WriteReport(o, report.value(), some_ranks_unreadable);
}

// The whole command on one process of `world` (nullptr: alone); returns its exit code.
int ReportOf(const Options& o, AnalysisWorld* world, bool first) {
  if (o.format != "text" && o.format != "json" && o.format != "html") {
    SayIf(first, "commprof report: --format %s is not supported (text, json or html)\n", o.format.c_str());
    return 2;
  }
  int open_exit = 0;
  std::unique_ptr<ProfileReader> reader =
      OpenEverywhere("report", world, o.path, o.window, o.output, OutputKind::kStream, open_exit);
  if (reader == nullptr) {
    return open_exit;
  }
  if (first) {
    return AnalyzeAndWrite(o, std::move(reader), world);
  }
  ComputeGivenParts(*world, *reader);
  reader.reset();
  world->Barrier();
  return 0;
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
      ->type_name("text|json|html")
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "write to this file instead of standard output");
  sub->add_flag("--save", o->save, "also (re)write the analysis into the file's /analysis group");
  AddWindowOption(sub, o->window);
  return [o] {
    return RunAnalysisCommand("report", [&o](AnalysisWorld* world, bool first) { return ReportOf(*o, world, first); });
  };
}

}  // namespace commprof::cli
