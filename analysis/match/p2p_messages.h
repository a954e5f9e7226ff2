// Point-to-point messages matched across ranks, with Late Sender / Late Receiver wait
// (docs/metrics.md §5 is the authoritative text; the formulas are in analysis/metrics/p2p_wait.h).
//
// Purpose: pair every recorded send with the receive that got its message, on the aligned time
// base, and charge the wait states of each pair to the rank that waited.
// Concepts: a message's *key* is (communicator id, source world rank, destination world rank,
// tag). MPI's non-overtaking rule makes the n-th send on a key the message of the n-th receive on
// that key, both counted in posting order (event start on the rank's own clock), once each
// receive's source and tag are the ones it actually got (the collector stores those). Peers in
// events are ranks within the communicator; CommMembership turns them into world ranks.
// A Sendrecv is recorded as two events over one call: its send half is a send, its receive half
// (RECV_HALF) a receive, and the call is charged once. An older file's Sendrecv is one event, a
// send whose bytes add both halves (a rank without any RECV_HALF event is read that way).
// Operation: one pass over each rank's events keeps its P2P operations (a compact record each),
// its MPI_COMM events (membership) and, while that rank is read, its Wait*/Test* calls: a
// non-blocking operation ends exactly when the Wait*/Test* call that completed it returns, on the
// thread that called it, so (thread, end) finds that call, which is where the rank blocked for it;
// the two halves of a Sendrecv find their one call the same way.
// Then the records are sorted by key and posting order and paired; what is left over on a key is
// unmatched, counted by reason and listed (earliest first, up to a bound), never dropped.
// Memory: under 200 bytes per P2P operation of the job (record, sort entry, completing call),
// plus one rank's Wait*/Test* and Sendrecv calls while that rank is read, plus every message
// (P2PMessage) when P2PMatchOptions::keep_messages.
// Example: rank 1 posts MPI_Send(dest 0, tag 5) at 300 ns; rank 0 entered MPI_Recv(src 1, tag 5)
// at 100 ns and left at 350 ns: one message on key (1, 1, 0, 5), Late Sender 200 ns charged to
// rank 0.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "analysis/load/profile_reader.h"

namespace commprof {

enum class P2PUnmatchedReason : uint8_t {
  kNoPartner = 0,   // nothing left on its key on the other side
  kWildcardSource,  // a receive whose source or tag stayed a wildcard (never completed)
  kUntrackedComm,   // communicator id is rank-local (COMMPROF_FLAG_UNTRACKED_COMM)
  kUnknownPeer,     // the peer's world rank is unknown: no creation event for that member
};
constexpr size_t kP2PUnmatchedReasons = 4;
const char* P2PUnmatchedReasonName(P2PUnmatchedReason r);  // "no_partner", "wildcard_source", ...

struct UnmatchedP2P {
  uint32_t rank = 0;  // world rank that recorded it
  bool is_send = false;
  uint8_t op = 0;  // enum commprof_op_type: SEND, RECV or SENDRECV (either half: see flags)
  uint16_t flags = 0;
  uint64_t comm_id = 0;
  int32_t peer = 0;  // as recorded: rank in the communicator
  uint32_t tag = 0;
  uint64_t bytes = 0;
  int64_t start = 0;  // aligned
  int64_t end = 0;
  P2PUnmatchedReason reason = P2PUnmatchedReason::kNoPartner;
};

// P2PMessage::send_call_start / recv_call_start when the side did not block for its operation.
constexpr int64_t kNoCallStart = std::numeric_limits<int64_t>::min();

struct P2PMessage {
  uint64_t comm_id = 0;
  uint32_t src = 0;  // world ranks
  uint32_t dst = 0;
  uint32_t tag = 0;
  uint64_t bytes = 0;
  uint8_t send_op = 0;  // SEND or SENDRECV
  uint16_t send_flags = 0;
  uint16_t recv_flags = 0;               // RECV_HALF: received by a Sendrecv
  int64_t send_start = 0, send_end = 0;  // aligned: post and completion
  int64_t recv_start = 0, recv_end = 0;
  // Aligned entry of the call in which each side blocked to complete its operation: the blocking
  // call itself, or the Wait* call that completed it (§5.4). kNoCallStart when a Test* call
  // completed it, it never completed (INCOMPLETE), or the completing call is not in the file.
  int64_t send_call_start = kNoCallStart;
  int64_t recv_call_start = kNoCallStart;
  int64_t late_sender_ns = 0;  // of this message alone (before the per-call max of §5.4)
  int64_t late_receiver_ns = 0;
};

struct P2PRankStats {
  uint32_t rank = 0;
  uint64_t sent = 0;        // send operations to a real peer (Send, Isend, Sendrecv)
  uint64_t received = 0;    // receive operations from a real peer (Recv, Irecv, Sendrecv receive half)
  uint64_t bytes_sent = 0;  // §5.5
  uint64_t bytes_received = 0;
  int64_t p2p_time_ns = 0;            // §5.5: blocking P2P calls + Wait*/Test* calls that completed P2P requests
  int64_t late_sender_wait_ns = 0;    // charged to this rank as a receiver
  int64_t late_receiver_wait_ns = 0;  // charged to this rank as a sender
  uint64_t late_sender_calls = 0;     // completing calls charged a Late Sender wait > 0
  uint64_t late_receiver_calls = 0;
  uint64_t unmatched_sends = 0;
  uint64_t unmatched_recvs = 0;
};

struct P2PMatchOptions {
  bool aligned = true;               // apply each rank's clock model (false: raw local times)
  size_t max_unmatched_listed = 20;  // P2PMatchResult::unmatched keeps the earliest this many
  size_t max_worst = 10;             // P2PMatchResult::worst keeps this many messages
  bool keep_messages = false;        // fill P2PMatchResult::messages
};

struct P2PMatchResult {
  uint64_t sends = 0;      // send operations to a real peer, all ranks
  uint64_t recvs = 0;      // receive operations from a real peer
  uint64_t proc_null = 0;  // operations on MPI_PROC_NULL: no message, neither matched nor unmatched
  uint64_t matched = 0;    // messages (pairs)
  uint64_t unmatched_sends = 0;
  uint64_t unmatched_recvs = 0;
  uint64_t unmatched_sendrecv = 0;  // of unmatched_sends, the ones that are Sendrecv sends
  std::array<uint64_t, kP2PUnmatchedReasons> unmatched_by_reason{};  // sends + receives
  uint64_t bytes = 0;                                                // bytes of the matched messages
  int64_t late_sender_wait_ns = 0;
  int64_t late_receiver_wait_ns = 0;
  uint64_t membership_conflicts = 0;    // contradicting MPI_COMM records (CommMembership)
  std::vector<P2PRankStats> ranks;      // one per rank of the file, by rank
  std::vector<UnmatchedP2P> unmatched;  // the earliest (aligned start) max_unmatched_listed
  std::vector<P2PMessage> worst;        // largest late_sender_ns + late_receiver_ns first (> 0 only)
  std::vector<P2PMessage> messages;     // every matched message, in no particular order (keep_messages only)
};

// Matches every point-to-point operation of the file. Errors: the file's events cannot be read
// (the Status names the file and the rank's dataset).
Result<P2PMatchResult> MatchP2PMessages(const ProfileReader& reader, const P2PMatchOptions& options = {});

}  // namespace commprof
