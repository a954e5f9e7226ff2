// The one HDF5 writer of a job (DESIGN.md §6, docs/file-format.md). Not thread-safe by design:
// exactly one thread (the Ingest writer thread, or `commprof merge`) drives it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "commprof/event.h"
#include "core/h5/h5_util.h"
#include "core/status.h"
#include "core/wire.h"

namespace commprof {

struct JobMeta {
  std::string job_id;
  std::string command_line;
  uint32_t world_size = 0;      // 0: learn it from the ranks' hellos
  uint64_t start_epoch_ns = 0;  // UTC ns of the job's start
};

struct WriterOptions {
  int deflate_level = 0;  // 0 = no compression (reference/hdf5.md: deflate caps near 2 M events/s)
};

// How a rank's stream ended.
enum class RankEnd { kComplete, kDisconnected, kCorrupt };
const char* RankEndName(RankEnd end);

class Hdf5Writer {
 public:
  static Result<std::unique_ptr<Hdf5Writer>> Create(const std::string& path, const JobMeta& meta,
                                                    const WriterOptions& options);
  ~Hdf5Writer();

  Status OpenRank(const wire::Hello& hello);
  Status AppendStrings(uint32_t rank, const wire::Strings& strings);
  Status AppendEvents(uint32_t rank, std::span<const commprof_event> events);
  Status SetClock(uint32_t rank, const wire::Clock& clock);
  // Counters from the bye (empty when the rank vanished) and what the aggregator counted itself.
  Status CloseRank(uint32_t rank, RankEnd end, const std::vector<std::pair<std::string, uint64_t>>& counters,
                   uint64_t batches_lost, const std::string& reason);
  bool HasRank(uint32_t rank) const { return ranks_.count(rank) != 0; }
  Status Flush();
  // Writes the job-level attributes that are only known at the end, marks ranks that never said
  // hello as "missing", and closes the file.
  Status Finalize();
  const std::string& path() const { return path_; }

 private:
  struct RankOut {
    h5::Handle group;
    h5::Handle events;
    h5::Handle strings;
    uint64_t n_events = 0;
    uint64_t n_strings = 0;
    bool closed = false;
  };
  Hdf5Writer(std::string path, JobMeta meta, WriterOptions options);
  Status Err(const std::string& what) const;

  std::string path_;
  JobMeta meta_;
  WriterOptions options_;
  h5::Handle file_;
  h5::Handle ranks_group_;
  std::map<uint32_t, RankOut> ranks_;
  uint32_t world_size_seen_ = 0;
  bool finalized_ = false;
};

}  // namespace commprof
