// Reads a commprof HDF5 file: job metadata, per-rank metadata, and events streamed in chunks
// (never a whole table in memory). Errors name the file and the object at fault.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "commprof/event.h"
#include "core/clock_model.h"
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
  std::vector<ClockPoint> clock_points;  // the piecewise-linear model; empty: not aligned
  uint64_t start_steady_ns = 0;
  uint64_t start_utc_ns = 0;  // UTC at start_steady_ns (0: not recorded)
  ClockModel clock_model() const { return ClockModel(clock_points); }
  std::map<std::string, uint64_t> counters;  // events_recorded, dropped_*, ...
  uint64_t dropped_events = 0;
};

struct ProfileInfo {
  std::string path;
  std::string format;
  uint64_t format_version = 0;
  std::string job_id;
  std::string command_line;
  uint64_t world_size = 0;
  uint64_t start_epoch_ns = 0;
  bool finalized = false;
  std::vector<RankInfo> ranks;  // sorted by rank
};

class ProfileReader {
 public:
  static Result<std::unique_ptr<ProfileReader>> Open(const std::string& path);

  const ProfileInfo& info() const { return info_; }
  Result<std::vector<std::string>> Strings(uint32_t rank) const;
  // Calls `fn` with consecutive chunks of the rank's events, in stored order.
  Status ForEachEventChunk(uint32_t rank, const std::function<void(std::span<const commprof_event>)>& fn) const;

 private:
  ProfileReader() = default;
  std::string RankPath(uint32_t rank) const {
    return std::string("/") + schema::kRanksGroup + "/" + std::to_string(rank);
  }

  h5::Handle file_;
  ProfileInfo info_;
};

}  // namespace commprof
