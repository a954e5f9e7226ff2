// `commprof merge DIR|FILE... -o FILE.h5`: turns spool files into the same HDF5 file a live
// aggregator would have written.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "aggregator/spool_reader.h"
#include "cli/commands.h"
#include "cli/output_file.h"
#include "cli/restart_files.h"
#include "core/clock.h"

namespace commprof::cli {
namespace {

struct Options {
  std::vector<std::string> inputs;
  std::string output;
  std::string secret;
  CompressionChoice compression;
};

int RunMerge(const Options& o) {
  namespace fs = std::filesystem;
  // The output is checked before any spool is read, as `run` checks it before the job starts.
  if (Status st = CheckOutputTarget(o.output, OutputKind::kRegularFile); !st.ok()) {
    std::fprintf(stderr, "commprof merge: %s\n", st.message().c_str());
    return 1;
  }
  std::vector<std::string> files;
  for (const auto& in : o.inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      for (const auto& entry : fs::directory_iterator(in, ec)) {
        if (entry.path().extension() == ".cpspool") {
          files.push_back(entry.path().string());
        }
      }
    } else if (fs::is_regular_file(in, ec)) {
      files.push_back(in);
    } else if (fs::exists(in, ec)) {
      // A FIFO would block the read until something wrote into it, a device read forever.
      std::fprintf(stderr, "commprof merge: %s: not a regular file or directory\n", in.c_str());
      return 2;
    } else {
      std::fprintf(stderr, "commprof merge: %s: no such file or directory\n", in.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::string where;
    for (const auto& in : o.inputs) {
      where += (where.empty() ? "" : ", ") + in;
    }
    std::fprintf(stderr, "commprof merge: no .cpspool files found in %s\n", where.c_str());
    return 1;
  }
  const bool progress = isatty(STDERR_FILENO) == 1;
  JobMeta meta;
  meta.command_line = "commprof merge";
  for (const auto& in : o.inputs) {
    meta.command_line += " " + in;
  }
  meta.start_epoch_ns = UINT64_MAX;
  for (const auto& f : files) {
    auto h = ReadSpoolHello(f);
    if (!h.ok()) {
      continue;
    }
    if (meta.job_id.empty()) {
      meta.job_id = h->job_id;
    }
    meta.start_epoch_ns = std::min(meta.start_epoch_ns, h->start_utc_ns);
    meta.world_size = std::max(meta.world_size, h->world_size);
  }
  if (meta.start_epoch_ns == UINT64_MAX) {
    meta.start_epoch_ns = UtcNowNs();
  }
  // An output that exists is replaced only by a merge written whole (as `run` does): until then
  // the merge goes to OUTPUT.tmp-PID beside it.
  std::error_code ec;
  const std::string write_path = HdfWritePath(o.output);
  const bool replacing = write_path != o.output;
  auto ingest = Ingest::Start(write_path, meta, ResolveCompression(o.compression));
  if (!ingest.ok()) {
    std::filesystem::remove(write_path, ec);  // what a failed start made (a file-size limit) is no file
    std::fprintf(stderr, "commprof merge: %s\n", ingest.status().message().c_str());
    return 1;
  }
  StreamPolicy policy;
  if (!o.secret.empty()) {
    policy.secret = o.secret;
  }
  // Spools of restarted workers (docs/torchrun.md#elastic-restarts) go to OUTPUT.restart-K.h5.
  // Each restart file learns its world size from its own hellos (a restart may have fewer workers).
  JobMeta restart_meta = meta;
  restart_meta.world_size = 0;
  RestartFiles restarts(o.output, restart_meta, ResolveCompression(o.compression), 1000, uint64_t{256} << 20,
                        "commprof merge");
  int bad = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    SpoolResult r = IngestSpoolFile(*ingest.value(), files[i], policy, restarts.Router());
    if (r.accepted && !meta.job_id.empty() && r.job_id != meta.job_id) {
      std::fprintf(stderr, "commprof merge: warning: %s belongs to job '%s', the others to '%s'\n", files[i].c_str(),
                   r.job_id.c_str(), meta.job_id.c_str());
    }
    if (!r.status.ok()) {
      ++bad;
      std::fprintf(stderr, "commprof merge: %s%s\n", r.status.message().c_str(),
                   r.accepted ? " (frames before it are kept)" : " (file skipped)");
    }
    if (progress) {  // a line redrawn in place on a terminal only: in a log it would run together
      std::fprintf(stderr, "\rcommprof merge: %zu/%zu spool files", i + 1, files.size());
    }
  }
  if (progress) {
    std::fprintf(stderr, "\n");
  }
  NameRestartFiles(*ingest.value(), restarts);
  const std::vector<std::string> restart_files = restarts.Finish(true);
  Status st = ingest.value()->Finish();
  if (!st.ok()) {
    std::fprintf(stderr, "commprof merge: %s\n", st.message().c_str());
    if (replacing) {
      std::fprintf(stderr, "commprof merge: %s is left as it was; what could be written is in %s\n", o.output.c_str(),
                   write_path.c_str());
    }
    return 1;
  }
  if (replacing) {
    std::filesystem::rename(write_path, o.output, ec);
    if (ec) {
      std::fprintf(stderr, "commprof merge: cannot rename %s to %s: %s\n", write_path.c_str(), o.output.c_str(),
                   ec.message().c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "commprof merge: wrote %s (%zu ranks, %llu events)\n", o.output.c_str(),
               ingest.value()->ranks_claimed().size(),
               static_cast<unsigned long long>(ingest.value()->events_written()));
  (void)StoreAnalysis(o.output, "commprof merge");
  RemoveStaleRestartFiles(o.output, restart_files);
  if (!restarts.error().ok()) {
    return 1;
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace

Runner AddMergeCommand(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "merge", "Turn spool files (written by ranks that could not reach the aggregator) into a commprof HDF5 file.");
  sub->add_option("inputs", opts->inputs, "spool directories or .cpspool files")->required();
  sub->add_option("-o,--output", opts->output, "output HDF5 file")->required();
  AddCompressionOptions(sub, opts->compression);
  sub->add_option("--secret", opts->secret,
                  "job secret: when given, spools whose hello proof does not match are refused");
  return [opts] { return RunMerge(*opts); };
}

}  // namespace commprof::cli
