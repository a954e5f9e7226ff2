// The /hang group (docs/file-format.md "The hang group"): what the ranks said when a hang was
// found (their in-flight calls, their recent collectives, their communicators), how each rank
// stood, and the diagnosis as JSON, so every reader shows the diagnosis the aggregator printed.
// Written by the aggregator's writer thread with the open file (live), read by report/check.
#pragma once

#include <hdf5.h>

#include <optional>
#include <string>

#include "analysis/hang/hang_diagnosis.h"
#include "core/status.h"

namespace commprof::hang {

inline constexpr const char* kHangGroup = "hang";
inline constexpr uint64_t kHangGroupVersion = 1;

struct StoredHang {
  HangInput input;    // rebuilt from the tables (names and end reasons as stored)
  HangReport report;  // from `report_json`
};

// Creates /hang in `file` (open read-write), replacing an earlier one (a later hang of the same
// job); fails, naming the object, if a write fails. `path` only names the file in errors.
Status WriteHangGroup(hid_t file, const HangInput& input, const HangReport& report, const std::string& path = "");
// Opens `path` read-write and writes the group (for tools that hold no open handle).
Status WriteHangGroup(const std::string& path, const HangInput& input, const HangReport& report);

// nullopt: the file has no /hang group. An error names the file and the object at fault.
Result<std::optional<StoredHang>> ReadHangGroup(hid_t file, const std::string& path);
Result<std::optional<StoredHang>> ReadHangGroup(const std::string& path);

}  // namespace commprof::hang
