// The hang diagnosis of a file (docs/hangs.md "After the fact"): the /hang group when the
// aggregator stored one (live detection), else a diagnosis built from the events of ranks that
// ended while blocked: a call given up at a signal is stored INCOMPLETE (end = the flush time),
// a request still pending at the end NONBLOCKING|INCOMPLETE. Reads each rank's events once, in
// chunks, keeping per rank only its in-flight calls, its last few collectives per communicator
// and its communicators.
#pragma once

#include <optional>

#include "analysis/hang/hang_diagnosis.h"
#include "analysis/load/profile_reader.h"
#include "core/status.h"

namespace commprof::hang {

// How many completed collectives per communicator (NCCL: per type) the file path keeps per rank.
inline constexpr size_t kRecentPerStream = 8;

struct FileHang {
  HangInput input;
  HangReport report;
  bool stored = false;  // true: from the /hang group; false: diagnosed here from the events
};

// The input the events give (source "file"), or nullopt when no rank ended inside a
// communication call: a clean job has no hang section.
Result<std::optional<HangInput>> HangInputFromEvents(const ProfileReader& reader);

// /hang when present, else the events' diagnosis; nullopt when neither has evidence of a hang.
Result<std::optional<FileHang>> DiagnoseFile(const ProfileReader& reader);

}  // namespace commprof::hang
