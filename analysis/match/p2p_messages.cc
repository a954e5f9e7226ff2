#include "analysis/match/p2p_messages.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analysis/match/comm_membership.h"
#include "analysis/metrics/p2p_wait.h"

namespace commprof {
namespace {

constexpr size_t kNoCall = std::numeric_limits<size_t>::max();
// MPI_ANY_TAG stored as uint32 (docs/file-format.md Limitations): a receive that never learnt its tag.
constexpr uint32_t kAnyTag = 0xFFFFFFFFu;

// One recorded P2P operation, reduced to what matching and the metrics need.
struct Op {
  int64_t start = 0;  // aligned
  int64_t end = 0;
  uint64_t local_start = 0;  // the rank's own clock: posting order
  uint64_t row = 0;          // stored order on the rank: tie-break for equal starts
  uint64_t comm_id = 0;
  uint64_t bytes = 0;
  size_t call = kNoCall;  // the call the rank blocked in to complete it (index into calls)
  uint32_t rank = 0;
  uint32_t rank_index = 0;  // into P2PMatchResult::ranks
  uint32_t tag = 0;
  int32_t peer = 0;
  uint16_t flags = 0;
  uint8_t op = 0;
  bool send = false;
  bool whole_sendrecv = false;  // an older file's Sendrecv: one event for both halves, bytes of both
};

// A call in which a rank completed P2P operations: a blocking Send/Recv, a Sendrecv (both its
// halves), or the Wait*/Test* call that completed non-blocking ones. Waits are charged per call
// (§5.4).
struct Call {
  int64_t start = 0;
  int64_t end = 0;
  uint32_t rank_index = 0;
  bool blocking = false;  // Test* calls do not block: no wait is charged in them
  int64_t max_late_sender = 0;
  int64_t max_late_receiver = 0;
};

struct WaitCall {
  uint64_t start = 0;  // raw
  uint8_t subtype = 0;
  size_t call = kNoCall;
};

struct ThreadEndHash {
  size_t operator()(const std::pair<uint32_t, uint64_t>& k) const {
    return static_cast<size_t>(k.second * 0x9E3779B97F4A7C15ull ^ k.first);
  }
};

// Sort key of an operation: its message key, then posting order on its rank.
struct Entry {
  uint64_t comm_id;
  uint32_t src;
  uint32_t dst;
  uint32_t tag;
  uint64_t local_start;
  uint64_t row;
  size_t op;
  auto key() const { return std::tie(comm_id, src, dst, tag); }
  auto order() const { return std::tie(comm_id, src, dst, tag, local_start, row); }
};

bool IsP2POp(uint8_t subtype) {
  return subtype == COMMPROF_OP_SEND || subtype == COMMPROF_OP_RECV || subtype == COMMPROF_OP_SENDRECV;
}

bool IsRecvHalf(uint16_t flags) { return (flags & COMMPROF_FLAG_RECV_HALF) != 0; }

// Where the side of `o` blocked to complete it (P2PMessage::send_call_start / recv_call_start).
int64_t CallStart(const Op& o, const std::vector<Call>& calls) {
  return o.call != kNoCall && calls[o.call].blocking ? calls[o.call].start : kNoCallStart;
}

}  // namespace

const char* P2PUnmatchedReasonName(P2PUnmatchedReason r) {
  switch (r) {
    case P2PUnmatchedReason::kNoPartner:
      return "no_partner";
    case P2PUnmatchedReason::kWildcardSource:
      return "wildcard_source";
    case P2PUnmatchedReason::kUntrackedComm:
      return "untracked_comm";
    case P2PUnmatchedReason::kUnknownPeer:
      return "unknown_peer";
  }
  return "?";
}

Result<P2PMatchResult> MatchP2PMessages(const ProfileReader& reader, const P2PMatchOptions& options) {
  const ProfileInfo& info = reader.info();
  P2PMatchResult out;
  CommMembership membership(std::max<uint64_t>(info.world_size, info.ranks.size()));
  std::vector<Op> ops;
  std::vector<Call> calls;

  // ---- one pass per rank ----
  for (uint32_t ri = 0; ri < info.ranks.size(); ++ri) {
    const RankInfo& r = info.ranks[ri];
    out.ranks.push_back(P2PRankStats{.rank = r.rank});
    const ClockModel model = r.clock_model();
    auto to_ref = [&](uint64_t t) {
      auto v = static_cast<int64_t>(t);
      return options.aligned ? model.ToReference(v) : v;
    };
    // This rank's Wait*/Test* calls by (thread, end): a non-blocking operation's end is the
    // return of the call that completed it, on the thread that called it (file-format.md).
    std::unordered_map<std::pair<uint32_t, uint64_t>, WaitCall, ThreadEndHash> waits;
    std::vector<std::pair<size_t, std::pair<uint32_t, uint64_t>>> completed_by_wait;
    // This rank's Sendrecv calls by (thread, end): both halves of one call share it.
    std::unordered_map<std::pair<uint32_t, uint64_t>, size_t, ThreadEndHash> sendrecv_calls;
    bool recv_halves = false;  // none: an older file, whose Sendrecv is one event
    const size_t first_op = ops.size();
    uint64_t row = 0;
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const commprof_event& e : chunk) {
        ++row;
        if (membership.Add(e, r.rank)) {
          continue;
        }
        if (e.kind == COMMPROF_KIND_MPI_WAIT) {
          waits.emplace(std::pair{e.thread_id, e.end_ns}, WaitCall{e.start_ns, e.subtype, kNoCall});
          continue;
        }
        // NCCL send/recv (kind NCCL_COLLECTIVE, docs/metrics.md §1) have no tag: order alone pairs
        // them on (commHash, source, destination), as NCCL's own matching does.
        const bool nccl =
            e.kind == COMMPROF_KIND_NCCL_COLLECTIVE && (e.subtype == COMMPROF_OP_SEND || e.subtype == COMMPROF_OP_RECV);
        if (!nccl && (e.kind != COMMPROF_KIND_MPI_P2P || !IsP2POp(e.subtype))) {
          continue;
        }
        Op o;
        o.start = to_ref(e.start_ns);
        o.end = to_ref(e.end_ns);
        o.local_start = e.start_ns;
        o.row = row;
        o.comm_id = e.comm_id;
        o.bytes = e.bytes;
        o.rank = r.rank;
        o.rank_index = ri;
        o.tag = nccl ? 0 : e.correlation;
        o.peer = e.peer;
        o.flags = e.flags;
        o.op = e.subtype;
        o.send = e.subtype != COMMPROF_OP_RECV && !IsRecvHalf(e.flags);
        recv_halves = recv_halves || (e.subtype == COMMPROF_OP_SENDRECV && IsRecvHalf(e.flags));
        // An INCOMPLETE operation's end is not a completion: it matches (it was posted) but was
        // never seen blocking anyone.
        if ((e.flags & COMMPROF_FLAG_INCOMPLETE) == 0) {
          if ((e.flags & COMMPROF_FLAG_NONBLOCKING) != 0) {
            completed_by_wait.push_back({ops.size(), {e.thread_id, e.end_ns}});
          } else if (e.subtype == COMMPROF_OP_SENDRECV) {
            // One blocking call for both halves: charged once (§5.4).
            auto [it, fresh] = sendrecv_calls.try_emplace({e.thread_id, e.end_ns}, calls.size());
            if (fresh) {
              calls.push_back(Call{o.start, o.end, ri, true, 0, 0});
            }
            o.call = it->second;
          } else {
            o.call = calls.size();
            calls.push_back(Call{o.start, o.end, ri, true, 0, 0});
          }
        }
        ops.push_back(o);
      }
    });
    COMMPROF_RETURN_IF_ERROR(st);
    if (!recv_halves) {
      for (size_t k = first_op; k < ops.size(); ++k) {
        ops[k].whole_sendrecv = ops[k].op == COMMPROF_OP_SENDRECV;
      }
    }
    for (const auto& [op_index, at] : completed_by_wait) {
      auto it = waits.find(at);
      if (it == waits.end()) {
        continue;  // completed out of sight: no call to charge
      }
      WaitCall& w = it->second;
      if (w.call == kNoCall) {
        w.call = calls.size();
        calls.push_back(Call{to_ref(w.start), to_ref(at.second), ri, w.subtype != COMMPROF_OP_TEST, 0, 0});
      }
      ops[op_index].call = w.call;
    }
  }
  out.membership_conflicts = membership.conflicts();

  // ---- keys ----
  // Unmatched operations: counted, and the earliest max_unmatched_listed kept (a max-heap by start).
  auto later = [](const UnmatchedP2P& a, const UnmatchedP2P& b) {
    return std::tie(a.start, a.rank, a.end) < std::tie(b.start, b.rank, b.end);
  };
  std::priority_queue<UnmatchedP2P, std::vector<UnmatchedP2P>, decltype(later)> listed(later);
  auto unmatched = [&](const Op& o, P2PUnmatchedReason reason) {
    P2PRankStats& rs = out.ranks[o.rank_index];
    if (o.send) {
      ++out.unmatched_sends;
      ++rs.unmatched_sends;
      if (o.op == COMMPROF_OP_SENDRECV) {
        ++out.unmatched_sendrecv;
      }
      // An older file's Sendrecv adds its receive to its send: with no receive to tell them
      // apart the sent part is unknown (§5.5).
      if (!o.whole_sendrecv) {
        rs.bytes_sent += o.bytes;
      }
    } else {
      ++out.unmatched_recvs;
      ++rs.unmatched_recvs;
    }
    ++out.unmatched_by_reason[static_cast<size_t>(reason)];
    if (options.max_unmatched_listed == 0) {
      return;
    }
    listed.push(UnmatchedP2P{o.rank, o.send, o.op, o.flags, o.comm_id, o.peer, o.tag, o.bytes, o.start, o.end, reason});
    if (listed.size() > options.max_unmatched_listed) {
      listed.pop();
    }
  };

  std::vector<Entry> sends, recvs;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    P2PRankStats& rs = out.ranks[o.rank_index];
    // Negative peers: a send's can only be MPI_PROC_NULL; a receive's -1 (COMMPROF_NO_PEER) is
    // Open MPI's MPI_ANY_SOURCE left unresolved, any other is MPI_PROC_NULL (-2 in Open MPI).
    if (o.peer < 0 && (o.send || o.peer != COMMPROF_NO_PEER)) {
      ++out.proc_null;
      continue;
    }
    if (o.send) {
      ++out.sends;
      ++rs.sent;
    } else {
      ++out.recvs;
      ++rs.received;
      rs.bytes_received += o.bytes;
    }
    if ((o.flags & COMMPROF_FLAG_UNTRACKED_COMM) != 0) {
      unmatched(o, P2PUnmatchedReason::kUntrackedComm);
      continue;
    }
    if (!o.send && (o.peer == COMMPROF_NO_PEER || o.tag == kAnyTag)) {
      unmatched(o, P2PUnmatchedReason::kWildcardSource);
      continue;
    }
    std::optional<uint32_t> peer_world = membership.WorldRank(o.comm_id, o.peer);
    if (!peer_world) {
      unmatched(o, P2PUnmatchedReason::kUnknownPeer);
      continue;
    }
    if (o.send) {
      sends.push_back(Entry{o.comm_id, o.rank, *peer_world, o.tag, o.local_start, o.row, i});
    } else {
      recvs.push_back(Entry{o.comm_id, *peer_world, o.rank, o.tag, o.local_start, o.row, i});
    }
  }
  auto by_order = [](const Entry& a, const Entry& b) { return a.order() < b.order(); };
  std::sort(sends.begin(), sends.end(), by_order);
  std::sort(recvs.begin(), recvs.end(), by_order);

  // ---- pairing: the n-th send on a key with the n-th receive on it ----
  auto smaller_wait = [](const P2PMessage& a, const P2PMessage& b) {
    return std::make_tuple(a.late_sender_ns + a.late_receiver_ns, -a.send_start, a.src) >
           std::make_tuple(b.late_sender_ns + b.late_receiver_ns, -b.send_start, b.src);
  };
  std::priority_queue<P2PMessage, std::vector<P2PMessage>, decltype(smaller_wait)> worst(smaller_wait);
  size_t i = 0, j = 0;
  while (i < sends.size() || j < recvs.size()) {
    if (j == recvs.size() || (i < sends.size() && sends[i].key() < recvs[j].key())) {
      unmatched(ops[sends[i++].op], P2PUnmatchedReason::kNoPartner);
      continue;
    }
    if (i == sends.size() || recvs[j].key() < sends[i].key()) {
      unmatched(ops[recvs[j++].op], P2PUnmatchedReason::kNoPartner);
      continue;
    }
    const Op& s = ops[sends[i].op];
    const Op& r = ops[recvs[j].op];
    P2PMessage m;
    m.comm_id = s.comm_id;
    m.src = sends[i].src;
    m.dst = sends[i].dst;
    m.tag = s.tag;
    // §5.5: a send's bytes are the message; an older file's Sendrecv's also hold its receive, so
    // take the receiver's count (the bytes it actually got) for those.
    m.bytes = s.whole_sendrecv ? r.bytes : s.bytes;
    m.send_op = s.op;
    m.send_flags = s.flags;
    m.recv_flags = r.flags;
    m.send_start = s.start;
    m.send_end = s.end;
    m.recv_start = r.start;
    m.recv_end = r.end;
    m.send_call_start = CallStart(s, calls);
    m.recv_call_start = CallStart(r, calls);
    if (r.call != kNoCall && calls[r.call].blocking) {
      Call& c = calls[r.call];
      m.late_sender_ns = LateSenderWait(s.start, BlockedCall{c.start, c.end});
      c.max_late_sender = std::max(c.max_late_sender, m.late_sender_ns);
    }
    // An older file's Sendrecv also received inside the same call, unrecorded, so time in it may
    // be its own receive waiting: not charged as Late Receiver (§5.3). A recorded receive half
    // shares the call, which is charged once (§5.4).
    if (!s.whole_sendrecv && s.call != kNoCall && calls[s.call].blocking) {
      Call& c = calls[s.call];
      m.late_receiver_ns = LateReceiverWait(r.start, BlockedCall{c.start, c.end});
      c.max_late_receiver = std::max(c.max_late_receiver, m.late_receiver_ns);
    }
    ++out.matched;
    out.bytes += m.bytes;
    out.ranks[s.rank_index].bytes_sent += m.bytes;
    if (options.keep_messages) {
      out.messages.push_back(m);
    }
    if (options.max_worst > 0 && m.late_sender_ns + m.late_receiver_ns > 0) {
      worst.push(m);
      if (worst.size() > options.max_worst) {
        worst.pop();
      }
    }
    ++i;
    ++j;
  }

  // ---- charging, once per completing call (§5.4) ----
  for (const Call& c : calls) {
    P2PRankStats& rs = out.ranks[c.rank_index];
    rs.p2p_time_ns += c.end - c.start;
    if (c.max_late_sender > 0) {
      rs.late_sender_wait_ns += c.max_late_sender;
      ++rs.late_sender_calls;
    } else if (c.max_late_receiver > 0) {
      rs.late_receiver_wait_ns += c.max_late_receiver;
      ++rs.late_receiver_calls;
    }
  }
  for (const P2PRankStats& rs : out.ranks) {
    out.late_sender_wait_ns += rs.late_sender_wait_ns;
    out.late_receiver_wait_ns += rs.late_receiver_wait_ns;
  }

  out.unmatched.reserve(listed.size());
  for (; !listed.empty(); listed.pop()) {
    out.unmatched.push_back(listed.top());
  }
  std::reverse(out.unmatched.begin(), out.unmatched.end());
  out.worst.reserve(worst.size());
  for (; !worst.empty(); worst.pop()) {
    out.worst.push_back(worst.top());
  }
  std::reverse(out.worst.begin(), out.worst.end());
  return out;
}

}  // namespace commprof
