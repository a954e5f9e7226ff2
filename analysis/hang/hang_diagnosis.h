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
#include <optional>
#include <string>
#include <vector>

#include "core/wire.h"

namespace commprof::hang {

using wire::CommMembership;
using wire::InflightOp;

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
  std::string source;    // "live" (the aggregator's query) or "file" (after the job ended)
  double timeout_s = 0;  // live: the --hang-timeout that fired; 0 for "file"
  uint64_t detected_utc_ns = 0;
  std::vector<RankSnapshot> ranks;  // one per rank known, any order
};

// One value of a compared field at a sequence number and the ranks that have it.
struct MismatchSide {
  std::string value;            // "MPI_Allreduce", "1024 B", "float64", "sum", "root 0"
  std::vector<uint32_t> ranks;  // ascending
};

// Members of one communicator that disagree about one field of the same sequence number.
struct Mismatch {
  std::string kind;                 // COLLECTIVE_TYPE, SIZE, DTYPE, REDUCE_OP or ROOT
  std::vector<MismatchSide> sides;  // largest group first (ties: the one with the lowest rank)
};

// A member waiting inside the stuck operation.
struct Waiter {
  uint32_t rank = 0;
  std::string op;         // what it called: "MPI_Allreduce", "MPI_Iallreduce (pending)"
  double waiting_s = 0;   // its local now minus the call's entry
  std::string call_site;  // with --stacks: "frame <- caller <- ..."; else empty
};

// A member that never entered the stuck operation, and where it is instead.
struct Absent {
  uint32_t rank = 0;
  // in_other_op | in_finalize | idle | finished | died | no_answer | unknown
  std::string state;
  std::string where;  // one line: "in MPI_Recv from rank 0 tag 7 on MPI_COMM_WORLD for 12.3 s"
};

// The stuck operation of one communicator (NCCL: of one collective type on it): the lowest
// sequence number some member has not completed while another waits in it.
struct CommFinding {
  uint64_t comm_id = 0;
  std::string comm_name;  // "MPI_COMM_WORLD", "comm 0x100000001", "nccl comm 0x5f1e..."
  bool nccl = false;
  uint64_t seq = 0;
  std::string op;                    // the operation the majority of those in it called
  uint32_t size = 0;                 // members (0: unknown)
  uint32_t unknown_members = 0;      // members no snapshot accounts for (no state, not world)
  std::vector<Waiter> waiting;       // in it, by rank
  std::vector<Absent> not_entered;   // never entered it, by rank
  std::vector<uint32_t> completed;   // already completed it (their later ops wait elsewhere)
  std::vector<Mismatch> mismatches;  // between the ranks that entered or completed it
  std::string kind;                  // never_entered | mismatch | never_entered+mismatch | stuck
  std::vector<uint32_t> culprits;    // ascending
  std::string verdict;               // one line about this communicator
};

// A thread blocked in a point-to-point call (or Wait on p2p requests): one wait-for step.
struct P2pWait {
  uint32_t rank = 0;
  std::string op;  // "MPI_Recv", "MPI_Send", "MPI_Wait (pending MPI_Irecv)"
  uint64_t comm_id = 0;
  std::string comm_name;
  int32_t peer = -1;        // in the communicator
  int64_t peer_world = -1;  // world rank of the peer (-1: unknown, or any source)
  uint32_t tag = 0;
  double waiting_s = 0;
  std::string peer_doing;  // what the peer does: "in MPI_Barrier #4 on MPI_COMM_WORLD for 3.0 s"
};

// Every rank's standing at the diagnosis.
struct RankPosition {
  uint32_t rank = 0;
  std::string condition;  // running | finished | died | no_answer
  std::string end_reason;
  bool answered = false;  // a snapshot (live answer or file events) exists
  double idle_s = -1;     // since its last completed communication call (-1: unknown)
  std::string doing;      // one line: its in-flight calls, or "idle (computing)", "finished (bye)"
};

// The diagnosis's result: what is rendered (text, JSON `hang`, HTML) and stored (/hang).
struct HangReport {
  bool hang = false;               // some rank is blocked in communication that cannot complete
  std::string verdict;             // one line: "rank 2 never entered MPI_Allreduce #41 on MPI_COMM_WORLD; ..."
  std::vector<uint32_t> culprits;  // the root causes: the ends of the wait chains, ascending
  // Ranks some finding blames that are themselves waiting in another stuck call whose chain leads
  // to the culprits (held up, not the cause), ascending.
  std::vector<uint32_t> consequences;
  std::string source;  // the input's: live | file
  double timeout_s = 0;
  uint64_t detected_utc_ns = 0;
  uint32_t world_size = 0;
  std::vector<CommFinding> comms;   // stuck operations, by communicator id then type
  std::vector<P2pWait> p2p;         // blocked point-to-point calls, by rank
  std::vector<RankPosition> ranks;  // every rank of the world, by rank
};

// Readable names shared by the renderers and the file path.
std::string CommName(uint64_t comm_id, bool nccl);
// "MPI_Allreduce", "MPI_Iallreduce", "ncclAllReduce", "MPI_Recv", "MPI_Finalize", ...
std::string OpCallName(const commprof_event& e);
const char* ConditionName(RankCondition c);

// The diagnosis. Pure: same input, same report.
HangReport Diagnose(const HangInput& input);
// The report as the text report's "hang" section and as the aggregator prints it on detection.
std::string RenderText(const HangReport& report);

}  // namespace commprof::hang
