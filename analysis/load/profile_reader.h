// Reads a commprof HDF5 file: job metadata, per-rank metadata, and events streamed in chunks
// (never a whole table in memory). Errors name the file and the object at fault. A file that
// cannot be read at all fails Open; a rank group that cannot be read becomes a RankFault and the
// other ranks are read (docs/file-format.md#reading-rules).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "commprof/event.h"
#include "core/clock_model.h"
#include "core/h5/damage_guard.h"
#include "core/h5/h5_util.h"
#include "core/status.h"

namespace commprof {

struct RankInfo {
  uint32_t rank = 0;
  std::string host;
  uint64_t pid = 0;
  std::string status;  // schema::RankStatusName: complete | disconnected | corrupt | connected | missing
  std::string end_reason;
  uint64_t event_count = 0;
  int64_t clock_offset_ns = 0;
  double clock_drift_ppm = 0.0;
  int64_t clock_error_bound_ns = -1;
  std::string clock_method;
  // The shard file a relay stored the rank in, as the job file links it (docs/file-format.md#shards);
  // empty when the rank is stored in the file itself.
  std::string shard;
  std::vector<ClockPoint> clock_points;  // the piecewise-linear model; empty: not aligned
  uint64_t start_steady_ns = 0;
  uint64_t start_utc_ns = 0;  // UTC at start_steady_ns (0: not recorded)
  ClockModel clock_model() const { return ClockModel(clock_points); }
  // How far clock_drift_ppm (the slope from the first to the last point) may be off: the two
  // points' half round trips over the time between them, in ppm. Over a short job this exceeds the
  // drift itself. nullopt with fewer than two points.
  std::optional<double> clock_drift_uncertainty_ppm() const;
  std::map<std::string, uint64_t> counters;  // events_recorded, dropped_*, ...
  uint64_t dropped_events = 0;               // attribute dropped_events: lost inside the collector
  uint64_t batches_lost = 0;                 // attribute batches_lost: events frames that never arrived
  // Events the collector shipped that are not in the file (its bye's events_shipped minus the rows
  // stored); unknown without a bye. Lost batches are where these went.
  std::optional<uint64_t> events_lost;
  // Rows at the end of /ranks/R/events that cannot be read: the last chunk of a rank whose writer
  // failed or was killed while rewriting it (docs/reliability.md); event_count leaves them out.
  uint64_t damaged_tail = 0;
  // Every event the rank recorded that is not in the file (or not readable), as far as it can tell.
  uint64_t missing_events() const { return dropped_events + events_lost.value_or(0) + damaged_tail; }
  // Nothing of the rank is known to be missing: its bye arrived and no event or batch was lost.
  bool whole() const { return status == "complete" && batches_lost == 0 && missing_events() == 0; }
};

// A child of /ranks that could not be read: the rank it is (none when its name is not a rank
// number) and one line naming the file, the object and, for a table, the row.
struct RankFault {
  std::optional<uint32_t> rank;
  std::string message;
  // The rank is read, less a damaged last chunk (RankInfo::damaged_tail); otherwise it is left out.
  bool partial = false;
};

// Inclusive ranges of ranks, in order.
using RankRanges = std::vector<std::pair<uint32_t, uint32_t>>;
std::string FormatRankRanges(const RankRanges& ranges);               // "2-5,9"
RankRanges RangesOfRanks(const std::vector<uint32_t>& sorted_ranks);  // {2,3,4,5,9} -> {2-5, 9}

struct ProfileInfo {
  std::string path;
  std::string format;
  uint64_t format_version = 0;
  std::string job_id;
  std::string command_line;
  // Elastic restarts (docs/torchrun.md#elastic-restarts): in a later incarnation's file its number,
  // in the job's file the later incarnations' file names (root attributes; 0 and empty otherwise).
  uint64_t incarnation = 0;
  // A relay's shard (root attribute `shard`): it holds some of the job's ranks, the others are in
  // other shards, so none of them is missing (NeverConnected is empty).
  bool shard = false;
  std::vector<std::string> restart_files;
  // Shard files beside the job file holding a part of a rank that the file takes from elsewhere
  // (root attribute unjoined_shards: the rank's relay ended mid-run); names, not paths.
  std::vector<std::string> unjoined_shards;
  uint64_t world_size = 0;
  uint64_t start_epoch_ns = 0;
  bool finalized = false;
  // The writer's own account, when the file has one (dataset /write_status): "writing",
  // "complete", or "failed: REASON; N events not stored" (a disk that filled up). Empty: not
  // recorded (files of writers before it).
  std::string write_status;
  bool write_failed() const { return write_status.rfind("failed", 0) == 0; }
  // The "N events not stored" a failed write_status gives: events that reached an aggregator (or a
  // relay) and are not in the file; 0 without one.
  uint64_t events_not_stored = 0;
  std::vector<RankInfo> ranks;  // sorted by rank; readable ones only (the analyses read these)
  // What could not be read, in name order: ranks left out of `ranks`, and (`partial`) ranks read
  // without their damaged last chunk.
  std::vector<RankFault> faults;
  // Ranks below world_size that never connected: status "missing", or no group at all.
  RankRanges NeverConnected() const;
  uint64_t lost_batches() const;    // over every readable rank
  uint64_t missing_events() const;  // over every readable rank, and events_not_stored
};

// The largest root world_size a file may have: the analyses take world_size as the size of
// MPI_COMM_WORLD, so an absurd one (a damaged file) would cost memory for nothing.
inline constexpr uint64_t kMaxFileWorldSize = uint64_t{1} << 24;

class ProfileReader {
 public:
  static Result<std::unique_ptr<ProfileReader>> Open(const std::string& path);
  // Closes the file inside a read scope: libhdf5 flushes its metadata cache then, and on a damaged
  // global heap frees a pointer glibc aborts on (the damage guard names the file instead).
  ~ProfileReader();
  ProfileReader(const ProfileReader&) = delete;
  ProfileReader& operator=(const ProfileReader&) = delete;

  const ProfileInfo& info() const { return info_; }
  // Moves a rank out of info().ranks into info().faults (a bad row found by a later pass), so
  // every analysis leaves it out and says why.
  void MarkUnreadable(uint32_t rank, std::string message);
  Result<std::vector<std::string>> Strings(uint32_t rank) const;
  // Calls `fn` with consecutive chunks of the rank's events, in stored order. After SelectWindow,
  // only the events of the selected window (see there).
  Status ForEachEventChunk(uint32_t rank, const std::function<void(std::span<const commprof_event>)>& fn) const;

  // `--window K` (docs/cli.md): from now on every reader of the events sees, of each rank, only
  // its capture window K: the events that start within [start_ns, end_ns] of the rank's WINDOW
  // event with seq K (that event included, the other WINDOW events not), plus the definitions the
  // analyses need whenever they were recorded (communicator creation, stack frames). Reads each
  // rank's events once. Fails, naming the file and listing the windows it has, when no rank has
  // window K; a rank that lacks it (while others have it) is moved to info().faults, named.
  Status SelectWindow(uint64_t k);
  const std::optional<uint64_t>& window() const { return window_; }

 private:
  ProfileReader() = default;
  // One /ranks child: its attributes and the shape of its tables (not their rows).
  Result<RankInfo> ReadRank(hid_t ranks, const std::string& name, uint32_t rank) const;
  // Whether the shard file at `path` (beside the job file) exists and opens, checked once per
  // shard: only then is a link into it followed (HDF5 would try a same-named file in the working
  // directory in place of a missing or damaged one).
  const Status& ShardStatus(const std::string& path) const;
  std::string RankPath(uint32_t rank) const {
    return std::string("/") + schema::kRanksGroup + "/" + std::to_string(rank);
  }

  // Every stored event of the rank, whatever the window.
  Status ForEachStoredChunk(uint32_t rank, const std::function<void(std::span<const commprof_event>)>& fn) const;

  h5::Handle file_;
  // How a crash or stall of libhdf5 reading this file is told (h5::ReadScope around its reads).
  const h5::DamageMessages* damage_ = nullptr;
  bool opened_ = false;  // Open finished: a crash in the destructor is one at close (h5::ReadScope)
  ProfileInfo info_;
  std::optional<uint64_t> window_;                                 // SelectWindow's K
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> window_span_;  // rank -> [start_ns, end_ns] of window K
  mutable std::map<std::string, Status> shard_status_;             // ShardStatus, by shard path
  // The directory of the file itself (a symbolic link to it followed), with its '/': where HDF5
  // looks for the shards its relative links name. Resolved once, in Open.
  std::string file_dir_;
};

}  // namespace commprof
