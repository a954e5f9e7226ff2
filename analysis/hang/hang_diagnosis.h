// Hang and desynchronisation diagnosis across ranks (docs/hangs.md), in the Flight Recorder's
// categories: per communicator, the lowest sequence number not completed by all its members; the
// members that never entered it (the culprits) and where they are instead; those waiting in it and
// since when; mismatches at one sequence number (operation, byte count, datatype, reduction,
// root); ranks that already finished or died.
//
// One diagnosis for both ways a hang is seen: live, from the ranks' answers to the aggregator's
// hang query (wire::HangState), and after the fact, from a file whose ranks were ended by a signal
// (their in-flight calls stored as INCOMPLETE events, analysis/hang/hang_from_file.h).
//
// CONTRACT (issue 19): the input types and the function names below are shared by the aggregator
// (cli/collection, live) and the file path (report/check). Fields may be added; do not rename.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/wire.h"

namespace commprof::hang {

// How a rank stands when the diagnosis is made.
enum class RankCondition {
  kRunning,   // connected (live) or ended with in-flight calls (post-hoc: killed while blocked)
  kFinished,  // said bye after MPI_Finalize or a normal exit
  kDied,      // ended without a bye, or by a fatal signal while not blocked in communication
  kNoAnswer,  // live only: connected, but its answer did not come in time
};

// One rank as the diagnosis sees it. Times in `state` are on the rank's own clock: ages are taken
// against state.local_now_ns, so no clock alignment is needed.
struct RankSnapshot {
  uint32_t rank = 0;
  RankCondition condition = RankCondition::kRunning;
  std::string end_reason;  // kFinished/kDied: how it ended ("bye", "killed by signal 15 (SIGTERM)", ...)
  bool has_state = false;  // `state` holds an answer (live) or what its events say (post-hoc)
  wire::HangState state;
  std::vector<std::string> names;  // the rank's string table (may be empty: ops are then named by type)
};

struct HangInput {
  uint32_t world_size = 0;
  std::string source;          // "live" (the aggregator's query) or "file" (after the job ended)
  double timeout_s = 0;        // live: the --hang-timeout that fired; 0 for "file"
  uint64_t detected_utc_ns = 0;
  std::vector<RankSnapshot> ranks;  // one per rank known, any order
};

// The diagnosis's result: what is rendered (text, JSON `hang`, HTML) and stored (/hang).
struct HangReport {
  bool hang = false;               // some rank is blocked in communication that cannot complete
  std::string verdict;             // one line: "rank 2 never entered MPI_Allreduce #41 on MPI_COMM_WORLD; ..."
  std::vector<uint32_t> culprits;  // the ranks the verdict blames, ascending
  // (per-communicator findings, mismatches, per-rank positions: added by the implementation)
};

// The diagnosis. Pure: same input, same report.
HangReport Diagnose(const HangInput& input);
// The report as the text report's "hang" section and as the aggregator prints it on detection.
std::string RenderText(const HangReport& report);

}  // namespace commprof::hang
