// The files of a job's later incarnations: torch elastic restarts its workers as new processes with
// the old ranks (docs/torchrun.md#elastic-restarts), and incarnation K of them is kept in
// OUTPUT.restart-K.h5 beside the job's file, a whole job file of its own. Shared by the aggregator
// (`run`, `aggregate`) and `merge` (spools of restarted workers).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "aggregator/ingest.h"
#include "aggregator/rank_stream.h"
#include "core/status.h"

namespace commprof::cli {

// The file of incarnation `k` of the workers beside `output`: "job.h5" -> "job.restart-K.h5".
std::string RestartFilePath(const std::string& output, uint32_t k);

// Removes OUTPUT.restart-K.h5 files beside `output` that are not in `kept` (an earlier run's: they
// would be taken for the new job's), naming each on stderr.
void RemoveStaleRestartFiles(const std::string& output, const std::vector<std::string>& kept);

class RestartFiles {
 public:
  // `command` prefixes error messages; the files get the job's `meta` and `writer` options.
  RestartFiles(std::string output, JobMeta meta, WriterOptions writer, uint32_t flush_ms, uint64_t queue_bytes,
               std::string command)
      : output_(std::move(output)),
        meta_(std::move(meta)),
        writer_(writer),
        flush_ms_(flush_ms),
        queue_bytes_(queue_bytes),
        command_(std::move(command)) {}

  // The ingest of incarnation `k` (> 0), its file created (and named on stderr) at the first call:
  // any thread. Above kMaxIncarnations, or when the file cannot be created, an error (the hello is
  // refused with it).
  static constexpr uint32_t kMaxIncarnations = 1000;
  Result<Ingest*> For(uint32_t k);
  // For() as a RankStream's router.
  IncarnationRouter Router() {
    return [this](uint32_t k) { return For(k); };
  }
  // Ranks that said bye in any later incarnation.
  std::set<uint32_t> RanksDone();
  // The files' names (not paths), comma-separated: the job file's restart_files attribute.
  std::string Names();
  // Finishes every file: finalized, named on stderr with its ranks and events, and with `analyze`
  // given its /analysis. Returns their paths, by incarnation; error() says whether one failed.
  std::vector<std::string> Finish(bool analyze);
  // The first failure of Finish (a file not written whole: the command exits 1), or of creating
  // a file (its workers were refused).
  Status error();

 private:
  // Keeps the first failure, naming its file (mu_ held).
  void NoteFailure(const std::string& path, const Status& st);

  std::string output_;
  JobMeta meta_;
  WriterOptions writer_;
  uint32_t flush_ms_;
  uint64_t queue_bytes_;
  std::string command_;
  std::mutex mu_;
  std::map<uint32_t, std::unique_ptr<Ingest>> ingests_;  // incarnation -> its file's ingest
  Status error_;                                         // the first failure (mu_)
};

// Writes the job file's restart_files attribute (docs/file-format.md) through its writer, when
// `restarts` holds any file; before `job` finishes.
void NameRestartFiles(Ingest& job, RestartFiles& restarts);

}  // namespace commprof::cli
