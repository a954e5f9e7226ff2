// The one HDF5 writer of a job (docs/file-format.md), laid out by core/schema/file_schema.h. It
// takes storage types of its own, not wire frames: the aggregator converts what ranks send
// (aggregator/ingest.cc), the Kineto import fills them from traces. Not thread-safe by design:
// exactly one thread (the Ingest writer thread, or `commprof merge`) drives it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "commprof/event.h"
#include "core/clock_model.h"
#include "core/h5/failsafe_driver.h"
#include "core/h5/h5_util.h"
#include "core/schema/enums.h"
#include "core/status.h"

namespace commprof {

struct JobMeta {
  std::string job_id;
  std::string command_line;
  uint32_t world_size = 0;      // 0: learn it from the ranks' hellos
  uint64_t start_epoch_ns = 0;  // UTC ns of the job's start
};

// How the events tables are compressed (docs/file-format.md#compression). Every codec is
// preceded by HDF5's shuffle filter, which groups the records' bytes by position.
enum class Compression {
  kNone,     // plain chunks
  kLz4,      // HDF5 filter 32004 (core/h5/lz4_filter.h): the default, fast enough to keep up
  kDeflate,  // HDF5's built-in deflate, readable without any plugin, but about 2 M events/s
};

struct WriterOptions {
  Compression compression = Compression::kLz4;
  int deflate_level = 1;  // 1-9, with kDeflate
  // A relay's shard (docs/scale.md#relays): it holds some of the job's ranks, the others are in
  // other shards, so Finalize marks none missing.
  bool shard = false;
};

// "lz4", "deflate" (level 1), "deflate:N" (N = 1-9) or "none"; nullopt for anything else.
std::optional<WriterOptions> ParseCompression(const std::string& text);

namespace h5 {
class ChunkEncoder;
}

// How a rank's stream ended: kComplete, kDisconnected or kCorrupt (stored by schema name).
using RankEnd = schema::RankStatus;

// What the file records of a rank when its group is created.
struct RankDescription {
  uint32_t rank = 0;
  uint32_t world_size = 0;  // the rank's view of the job's size (the file keeps the largest)
  uint32_t pid = 0;
  uint64_t start_steady_ns = 0;  // the rank's steady clock ...
  uint64_t start_utc_ns = 0;     // ... and UTC, read together when its recording started
  std::string host;
};

// Consecutive entries of a rank's string table, from id first_id.
struct StringBatch {
  uint32_t first_id = 0;
  std::vector<std::string> strings;
};

// A rank's clock model (core/clock_model.h) and its summary attributes; each one replaces the
// previous model, while its samples are appended to the ones stored before.
struct RankClock {
  int64_t offset_ns = 0;  // the model's offset at anchor_local_ns
  double drift_ppm = 0.0;
  int64_t error_bound_ns = -1;   // -1: not measured
  uint64_t anchor_local_ns = 0;  // the local time of the first sync epoch (start_steady_ns without one)
  std::string method;            // docs/file-format.md `clock_method`
  std::vector<ClockPoint> points;
  std::vector<ClockSample> samples;
};

class Hdf5Writer {
 public:
  static Result<std::unique_ptr<Hdf5Writer>> Create(const std::string& path, const JobMeta& meta,
                                                    const WriterOptions& options);
  ~Hdf5Writer();

  Status OpenRank(const RankDescription& rank);
  Status AppendStrings(uint32_t rank, const StringBatch& strings);
  Status AppendEvents(uint32_t rank, std::span<const commprof_event> events);
  Status SetClock(uint32_t rank, const RankClock& clock);
  // Counters from the bye (empty when the rank vanished) and what the aggregator counted itself.
  Status CloseRank(uint32_t rank, RankEnd end, const std::vector<std::pair<std::string, uint64_t>>& counters,
                   uint64_t batches_lost, const std::string& reason);
  // A rank a relay stored in its shard (docs/scale.md#relays): /ranks/RANK becomes an HDF5
  // external link to `shard_file`:/ranks/RANK (a path relative to this file's directory, or
  // absolute), so that readers see one job. The rank counts as present, and as closed.
  Status LinkRank(uint32_t rank, uint32_t world_size, const std::string& shard_file);
  // A world size known without a rank of it in the file (a relay that failed before storing any of
  // its ranks): Finalize writes at least this, and lists the ranks below it that are absent as
  // missing. Called before Finalize, on the thread that finalizes.
  void RaiseWorldSize(uint32_t world_size) { world_floor_ = std::max(world_floor_, world_size); }
  bool HasRank(uint32_t rank) const { return ranks_.count(rank) != 0; }
  Status Flush();
  // Writes the job-level attributes that are only known at the end, marks ranks that never said
  // hello as "missing", and closes the file. `incomplete`: why the job's events are not all in the
  // file although it was written whole (a relay's shard that failed): write_status then says
  // "failed: INCOMPLETE" instead of "complete".
  Status Finalize(const std::string& incomplete = "");
  const std::string& path() const { return path_; }
  // The open file, for a group written beside the writer's own (/hang, Ingest::RunOnWriter); only on
  // the writer's thread, and only while failed() is false.
  hid_t file_id() const { return file_.get(); }

  // The failed state. The first write that fails (a full disk, EIO, a file size limit) stops the
  // writer: every later call returns the same error and stores nothing, events are counted as not
  // stored, and Finalize closes the file without writing and records the failure in the file's
  // `write_status` (docs/file-format.md). write_error() is "writing PATH failed: REASON".
  bool failed() const { return !write_error_.ok(); }
  const Status& write_error() const { return write_error_; }
  // Events handed to AppendEvents that the file does not hold: once failed, those received since
  // the last complete flush and every one after; 0 while the writer has not failed.
  uint64_t events_not_stored() const;
  // Events the file holds: every one appended; once failed, those of the last complete flush.
  uint64_t events_stored() const { return failed() ? events_flushed_ : events_appended_; }

 private:
  struct RankOut {
    h5::Handle group;
    h5::Handle events;
    h5::Handle strings;
    // The records of the events chunk not yet full (the table's last n_events % chunk records),
    // kept here until it fills; `pending_stored` while the file holds them as they are.
    std::vector<commprof_event> pending;
    bool pending_stored = true;
    uint64_t extent = 0;  // the events table's current size in the file
    uint64_t n_events = 0;
    uint64_t n_strings = 0;
    bool closed = false;  // a linked rank is closed from the start: its shard holds it
  };
  Hdf5Writer(std::string path, JobMeta meta, WriterOptions options);
  // A failed HDF5 step: the driver's errno when a write failed, else `what`; enters the failed state.
  Status Err(const std::string& what);
  // Enters the failed state when the driver saw a write fail since the last check.
  bool DeviceFailed();
  Status WriteStatus(const std::string& text);
  // Stores the chunk that ends with the table's last record, `records` (padded with zeros while
  // not full), after growing the table to n_events; false on a failed write.
  bool WriteEventChunk(RankOut& r, std::span<const commprof_event> records);
  // Stores every rank's partly filled chunk that changed since it was last stored.
  bool StorePendingChunks();

  std::string path_;
  JobMeta meta_;
  WriterOptions options_;
  std::unique_ptr<h5::ChunkEncoder> encoder_;
  h5::Handle file_;
  h5::Handle ranks_group_;
  h5::Handle write_status_;           // the root `write_status` dataset
  uint64_t write_status_offset_ = 0;  // its bytes' place in the file, rewritten in place on failure
  const h5::FailSafeFile* driver_ = nullptr;
  std::map<uint32_t, RankOut> ranks_;
  uint32_t world_size_seen_ = 0;
  uint32_t world_floor_ = 0;  // RaiseWorldSize's
  // Stores the root attribute world_size as soon as a hello raises it, so a file whose writer is
  // killed or fails before Finalize still sizes MPI_COMM_WORLD (its collectives match).
  bool SeeWorldSize(uint32_t world_size);
  bool finalized_ = false;
  Status write_error_;
  std::string failure_;           // write_error_'s reason alone, for `write_status`
  uint64_t events_received_ = 0;  // handed to AppendEvents
  uint64_t events_appended_ = 0;  // appended without an error
  uint64_t events_flushed_ = 0;   // of those, on disk at the last complete flush
};

}  // namespace commprof
