// `commprof import kineto PATH... -o FILE.h5` (docs/kineto-import.md): torch.profiler traces in,
// the same HDF5 file as a native run out, with its /analysis stored.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "analysis/load/kineto_import.h"
#include "cli/commands.h"
#include "cli/import_writer.h"
#include "cli/output_file.h"

namespace commprof::cli {
namespace {

struct Options {
  std::vector<std::string> inputs;
  std::string output;
  std::string align = "none";
  bool quiet = false;
};

int RunImportKineto(const Options& o) {
  auto align = kineto::ParseAlign(o.align);
  if (!align.ok()) {
    std::fprintf(stderr, "commprof import kineto: %s\n", align.status().message().c_str());
    return 2;
  }
  // The output is checked before the traces are read (minutes for large ones), as `run` checks it.
  if (Status st = CheckOutputTarget(o.output, OutputKind::kRegularFile); !st.ok()) {
    std::fprintf(stderr, "commprof import kineto: %s\n", st.message().c_str());
    return 1;
  }
  kineto::ImportOptions opts;
  opts.inputs = o.inputs;
  opts.align = align.value();
  // A progress bar only on a terminal: logs and CI get the summary lines alone.
  const bool bar = !o.quiet && isatty(STDERR_FILENO) == 1;
  int last_percent = -1;
  if (bar) {
    opts.progress = [&](uint64_t done, uint64_t total) {
      int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
      if (percent == last_percent) {
        return;
      }
      last_percent = percent;
      std::fprintf(stderr, "\rcommprof import kineto: [%-40.*s] %3d%%", percent * 40 / 100,
                   "########################################", percent);
      std::fflush(stderr);
    };
  }
  auto job = kineto::ImportKineto(opts);
  if (bar) {
    std::fprintf(stderr, "\n");
  }
  if (!job.ok()) {
    std::fprintf(stderr, "commprof import kineto: %s\n", job.status().message().c_str());
    return job.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  for (const auto& e : job->errors) {
    std::fprintf(stderr, "commprof import kineto: error: %s\n", e.c_str());
  }
  for (const auto& w : job->warnings) {
    std::fprintf(stderr, "commprof import kineto: warning: %s\n", w.c_str());
  }
  if (!o.quiet) {
    for (const auto& n : job->notes) {
      std::fprintf(stderr, "commprof import kineto: %s\n", n.c_str());
    }
  }
  // The alignment estimate is a result, printed even with --quiet.
  for (const auto& a : job->alignment) {
    std::fprintf(stderr, "commprof import kineto: %s\n", a.c_str());
  }
  std::string command_line = "commprof import kineto";
  for (const auto& in : o.inputs) {
    command_line += " " + in;
  }
  if (o.align != "none") {
    command_line += " --align " + o.align;
  }
  // An existing output is replaced only by an import written whole; a failed write leaves no
  // partial file (the traces are still there to import again).
  const std::string write_path = HdfWritePath(o.output);
  Status st = WriteImportedJob(job.value(), write_path, command_line);
  std::error_code ec;
  if (st.ok() && write_path != o.output) {
    std::filesystem::rename(write_path, o.output, ec);
    if (ec) {
      st = IoError("cannot rename " + write_path + " to " + o.output + ": " + ec.message());
    }
  }
  if (!st.ok()) {
    std::filesystem::remove(write_path, ec);
    std::fprintf(stderr, "commprof import kineto: %s\n", st.message().c_str());
    if (write_path != o.output) {
      std::fprintf(stderr, "commprof import kineto: %s is left as it was\n", o.output.c_str());
    }
    return 1;
  }
  uint64_t records = 0;
  for (const auto& r : job->ranks) {
    records += r.trace.events.size();
  }
  std::fprintf(stderr,
               "commprof import kineto: wrote %s (%zu of %u ranks, %llu records; %llu collective instances, %llu "
               "complete on every member)\n",
               o.output.c_str(), job->ranks.size(), job->world_size, static_cast<unsigned long long>(records),
               static_cast<unsigned long long>(job->matching.instances),
               static_cast<unsigned long long>(job->matching.complete));
  bool analysed = StoreAnalysis(o.output, "commprof import kineto");
  return job->errors.empty() && analysed ? 0 : 1;
}

}  // namespace

Runner AddImportCommand(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("import", "Import traces of other profilers into a commprof HDF5 file.");
  sub->require_subcommand(1);
  CLI::App* kin = sub->add_subcommand(
      "kineto", "torch.profiler (Kineto) Chrome traces, one per rank (.json or .json.gz, files or directories).");
  kin->add_option("inputs", opts->inputs, "trace files or directories holding them")->required();
  kin->add_option("-o,--output", opts->output, "output HDF5 file")->required();
  kin->add_option("--align", opts->align,
                  "none: trust the times as written (default); collective-ends: estimate per-rank clock offsets from "
                  "the ends of blocking collectives")
      ->check(CLI::IsMember({"none", "collective-ends"}))
      ->capture_default_str();
  kin->add_flag("-q,--quiet", opts->quiet, "no progress bar and no per-rank notes");
  return [opts] { return RunImportKineto(*opts); };
}

}  // namespace commprof::cli
