// Hang diagnosis (hang_diagnosis.h, docs/hangs.md).
//
// Design. A "stream" is what one sequence counter numbers: an MPI communicator (every collective
// on it shares one counter) or, for NCCL, one collective type on one communicator (NCCL's
// seqNumber counts per type). For every stream some rank has an operation in flight on, each
// member's first sequence number not completed is taken from its snapshot: the lowest in-flight
// sequence number on the stream, else one past the last completed one (`recent`), else 0. The
// lowest of these over the members is the stuck operation (a dead rank's number is set aside when a
// living member's records show that every member entered it: its last records died with it).
// Members that neither wait in it nor completed it never entered it (culprits, with
// what they do instead); the ranks that entered or completed it are compared field by field (type, root, size,
// datatype, reduction) and the minority side of a disagreement is blamed. Blocked point-to-point calls get one wait-for
// step (what the peer does); they blame the peer only when no stuck collective explains the hang. Every time is an age
// on the rank's own clock (its now minus the call's entry), so no clock alignment is needed.
#include "analysis/hang/hang_diagnosis.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "core/schema/enums.h"

namespace commprof::hang {
namespace {

constexpr uint32_t kAnyTag = 0xFFFFFFFFu;  // MPI_ANY_TAG (-1) stored as uint32

bool IsNonblocking(const commprof_event& e) { return (e.flags & COMMPROF_FLAG_NONBLOCKING) != 0; }
bool IsNcclP2p(const commprof_event& e) {
  return e.kind == COMMPROF_KIND_NCCL_COLLECTIVE && (e.subtype == COMMPROF_OP_SEND || e.subtype == COMMPROF_OP_RECV);
}
bool IsCollective(const commprof_event& e) {
  return e.kind == COMMPROF_KIND_MPI_COLLECTIVE || (e.kind == COMMPROF_KIND_NCCL_COLLECTIVE && !IsNcclP2p(e));
}
bool IsP2p(const commprof_event& e) { return e.kind == COMMPROF_KIND_MPI_P2P || IsNcclP2p(e); }

// What one sequence counter numbers (see the design comment).
struct StreamKey {
  uint64_t comm = 0;
  bool nccl = false;
  uint8_t op = 0;  // NCCL only: the collective type; 0 for MPI
  // Spelled out: clang-tidy misreads a defaulted <=> (modernize-use-nullptr on its 0 literal).
  bool operator<(const StreamKey& o) const { return std::tie(comm, nccl, op) < std::tie(o.comm, o.nccl, o.op); }
  bool operator==(const StreamKey& o) const { return std::tie(comm, nccl, op) == std::tie(o.comm, o.nccl, o.op); }
};
StreamKey KeyOf(const commprof_event& e) {
  const bool nccl = e.kind == COMMPROF_KIND_NCCL_COLLECTIVE;
  return {e.comm_id, nccl, nccl ? e.subtype : uint8_t{0}};
}

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// "rank 3", "ranks 0,1,2", "ranks 0-62,63"-style: runs of four or more are written as ranges.
std::string RankList(const std::vector<uint32_t>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) {
      ++j;
    }
    if (i > 0) {
      out += ",";
    }
    if (j - i >= 3) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      out += std::to_string(ranks[i]);
      ++i;
    }
  }
  return out;
}

// The C identifier without its family prefix, lower case: COMMPROF_DT_FLOAT64 -> "float64",
// COMMPROF_RED_SUM -> "sum" (the prefix is the identifier up to its second underscore).
std::string ShortEnumName(std::span<const schema::EnumEntry> entries, uint32_t value) {
  for (const auto& e : entries) {
    if (e.value == value && e.c_name != nullptr) {
      std::string s = e.c_name;
      const size_t first = s.find('_');
      const size_t second = first == std::string::npos ? first : s.find('_', first + 1);
      if (second != std::string::npos) {
        s = s.substr(second + 1);
      }
      std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
      return s;
    }
  }
  return "type " + std::to_string(value);
}

// The operation's name without the I-form: MPI_Iallreduce and MPI_Allreduce are one operation.
std::string TypeName(const commprof_event& e) {
  commprof_event blocking = e;
  blocking.flags = static_cast<uint16_t>(blocking.flags & ~COMMPROF_FLAG_NONBLOCKING);
  return OpCallName(blocking);
}

double AgeS(const wire::HangState& st, uint64_t start_ns) {
  return st.local_now_ns > start_ns ? static_cast<double>(st.local_now_ns - start_ns) / 1e9 : 0.0;
}

}  // namespace

std::string CommName(uint64_t comm_id, bool nccl) {
  if (nccl) {
    return "nccl comm " + Hex(comm_id);
  }
  if (comm_id == COMMPROF_COMM_WORLD_ID) {
    return "MPI_COMM_WORLD";
  }
  return "comm " + Hex(comm_id);
}

std::string OpCallName(const commprof_event& e) {
  if (e.kind == COMMPROF_KIND_MPI_FINALIZE) {
    return "MPI_Finalize";
  }
  if (e.kind == COMMPROF_KIND_MPI_INIT) {
    return "MPI_Init";
  }
  const char* name = schema::OpName(e.subtype);
  if (e.kind == COMMPROF_KIND_NCCL_COLLECTIVE || e.kind == COMMPROF_KIND_NCCL_API) {
    if (e.subtype == COMMPROF_OP_SEND) {
      return "ncclSend";
    }
    if (e.subtype == COMMPROF_OP_RECV) {
      return "ncclRecv";
    }
    return std::string("nccl") + schema::CanonicalOpName(e.subtype);
  }
  std::string s = name;
  if (s == "other") {
    return "MPI call " + std::to_string(e.subtype);
  }
  s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  if (IsNonblocking(e) && (e.kind == COMMPROF_KIND_MPI_COLLECTIVE || e.kind == COMMPROF_KIND_MPI_P2P)) {
    s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
    return "MPI_I" + s;
  }
  return "MPI_" + s;
}

const char* ConditionName(RankCondition c) {
  switch (c) {
    case RankCondition::kRunning:
      return "running";
    case RankCondition::kFinished:
      return "finished";
    case RankCondition::kDied:
      return "died";
    case RankCondition::kNoAnswer:
      return "no_answer";
  }
  return "unknown";
}

namespace {

class Diagnoser {
 public:
  explicit Diagnoser(const HangInput& in) : in_(in) {
    for (const RankSnapshot& s : in.ranks) {
      snaps_[s.rank] = &s;
      if (!s.has_state) {
        continue;
      }
      for (const wire::CommMembership& m : s.state.comms) {
        members_[m.comm_id].insert(s.rank);
        comm_size_[m.comm_id] = std::max(comm_size_[m.comm_id], m.size);
        rank_in_comm_[{m.comm_id, s.rank}] = m.rank_in_comm;
      }
      for (const wire::InflightOp& op : s.state.inflight) {
        if (IsCollective(op.event)) {
          streams_.insert(KeyOf(op.event));
          if (op.event.comm_id != COMMPROF_COMM_WORLD_ID) {
            members_[op.event.comm_id].insert(s.rank);  // a member even if its comms list lacks it
          }
        }
      }
      for (const commprof_event& e : s.state.recent) {
        if (IsCollective(e) && e.comm_id != COMMPROF_COMM_WORLD_ID) {
          members_[e.comm_id].insert(s.rank);
        }
      }
    }
  }

  HangReport Run() {
    HangReport r;
    r.source = in_.source;
    r.timeout_s = in_.timeout_s;
    r.detected_utc_ns = in_.detected_utc_ns;
    r.world_size = in_.world_size;
    for (const StreamKey& k : streams_) {
      if (auto f = Stream(k)) {
        r.comms.push_back(std::move(*f));
      }
    }
    P2p(r);
    std::set<uint32_t> blamed;
    std::vector<std::string> verdicts;
    for (const CommFinding& f : r.comms) {
      blamed.insert(f.culprits.begin(), f.culprits.end());
    }
    if (r.comms.empty()) {
      P2pBlame(r, blamed);
    }
    const std::set<uint32_t> roots = FollowWaitChains(r, blamed);
    if (r.comms.empty()) {
      verdicts = P2pVerdict(r, roots);
    }
    r.culprits.assign(roots.begin(), roots.end());
    std::set_difference(blamed.begin(), blamed.end(), roots.begin(), roots.end(), std::back_inserter(r.consequences));
    // The findings that blame a root cause first: they are where to look.
    std::vector<std::string> held_up;
    for (const CommFinding& f : r.comms) {
      const bool names_root =
          std::any_of(f.culprits.begin(), f.culprits.end(), [&](uint32_t c) { return roots.contains(c); });
      (names_root ? verdicts : held_up).push_back(f.verdict);
    }
    verdicts.insert(verdicts.end(), held_up.begin(), held_up.end());
    r.hang = !r.comms.empty() || !r.p2p.empty();
    if (r.hang) {
      std::string v;
      for (const std::string& s : verdicts) {
        v += (v.empty() ? "" : "; ") + s;
      }
      r.verdict = v;
    } else {
      r.verdict = "no hang: no rank is blocked in a communication call";
    }
    Positions(r);
    return r;
  }

 private:
  const RankSnapshot* Snap(uint32_t rank) const {
    auto it = snaps_.find(rank);
    return it == snaps_.end() ? nullptr : it->second;
  }
  const wire::HangState* State(uint32_t rank) const {
    const RankSnapshot* s = Snap(rank);
    return s != nullptr && s->has_state ? &s->state : nullptr;
  }

  std::vector<uint32_t> Members(uint64_t comm) const {
    std::vector<uint32_t> out;
    if (comm == COMMPROF_COMM_WORLD_ID) {
      for (uint32_t i = 0; i < in_.world_size; ++i) {
        out.push_back(i);
      }
      for (const auto& [rank, s] : snaps_) {
        if (rank >= in_.world_size) {
          out.push_back(rank);
        }
      }
      return out;
    }
    auto it = members_.find(comm);
    if (it != members_.end()) {
      out.assign(it->second.begin(), it->second.end());
    }
    return out;
  }

  // The world rank that is `peer` in `comm` (-1: unknown).
  int64_t WorldRankOf(uint64_t comm, int32_t peer) const {
    if (peer < 0) {
      return -1;
    }
    if (comm == COMMPROF_COMM_WORLD_ID) {
      return peer;
    }
    for (const auto& [key, in_comm] : rank_in_comm_) {
      if (key.first == comm && in_comm == static_cast<uint32_t>(peer)) {
        return key.second;
      }
    }
    return -1;
  }

  std::string CallSite(const wire::HangState& st, uint32_t stack) const {
    if (stack == 0) {
      return "";
    }
    for (const auto& [id, text] : st.call_sites) {
      if (id == stack) {
        return text;
      }
    }
    return "";
  }

  // "MPI_Recv from rank 0 tag 7 on MPI_COMM_WORLD" / "MPI_Allreduce #41 on MPI_COMM_WORLD".
  std::string Describe(const commprof_event& e) const {
    std::string s = OpCallName(e);
    const bool nccl = e.kind == COMMPROF_KIND_NCCL_COLLECTIVE;
    if (IsCollective(e)) {
      s += " #" + std::to_string(e.seq) + " on " + CommName(e.comm_id, nccl);
    } else if (IsP2p(e)) {
      const bool recv = e.subtype == COMMPROF_OP_RECV;
      s += recv ? " from " : " to ";
      if (e.peer < 0 && recv) {
        s += "any source";
      } else {
        s += "rank " + std::to_string(e.peer);
        const int64_t w = WorldRankOf(e.comm_id, e.peer);
        if (e.comm_id != COMMPROF_COMM_WORLD_ID && w >= 0) {
          s += " (world rank " + std::to_string(w) + ")";
        }
      }
      if (e.kind == COMMPROF_KIND_MPI_P2P) {
        s += e.correlation == kAnyTag ? " any tag" : " tag " + std::to_string(e.correlation);
      }
      s += " on " + CommName(e.comm_id, nccl);
    }
    return s;
  }

  // Every blocking call the rank is in, or how it stands when in none.
  std::string Doing(uint32_t rank) const {
    const RankSnapshot* snap = Snap(rank);
    if (snap == nullptr) {
      return "unknown (no answer)";
    }
    const wire::HangState* st = State(rank);
    std::vector<std::string> parts;
    if (st != nullptr) {
      std::vector<std::string> pending;
      for (const wire::InflightOp& op : st->inflight) {
        if (IsNonblocking(op.event)) {
          pending.push_back(Describe(op.event));
        }
      }
      for (const wire::InflightOp& op : st->inflight) {
        const commprof_event& e = op.event;
        if (IsNonblocking(e)) {
          continue;
        }
        std::string d = "in " + Describe(e) + " for " + Seconds(AgeS(*st, e.start_ns));
        if (e.kind == COMMPROF_KIND_MPI_WAIT && !pending.empty()) {
          std::string p;
          for (const std::string& x : pending) {
            p += (p.empty() ? "" : ", ") + x;
          }
          d += " (pending: " + p + ")";
        }
        parts.push_back(d);
      }
    }
    if (parts.empty()) {
      switch (snap->condition) {
        case RankCondition::kFinished:
          return "finished (" + (snap->end_reason.empty() ? std::string("bye") : snap->end_reason) + ")";
        case RankCondition::kDied:
          return "died (" + (snap->end_reason.empty() ? std::string("no bye") : snap->end_reason) + ")";
        case RankCondition::kNoAnswer:
          return "did not answer";
        case RankCondition::kRunning:
          break;
      }
      if (st == nullptr) {
        return "unknown (no state)";
      }
      std::string s = "idle (in no communication call: computing?)";
      if (st->last_completion_ns != 0) {
        s += ", last completed one " + Seconds(AgeS(*st, st->last_completion_ns)) + " ago";
      }
      return s;
    }
    std::string out;
    for (const std::string& p : parts) {
      out += (out.empty() ? "" : "; ") + p;
    }
    return out;
  }

  std::string AbsentState(uint32_t rank) const {
    const RankSnapshot* snap = Snap(rank);
    if (snap == nullptr) {
      return "no_answer";
    }
    const wire::HangState* st = State(rank);
    if (st != nullptr) {
      for (const wire::InflightOp& op : st->inflight) {
        if (op.event.kind == COMMPROF_KIND_MPI_FINALIZE) {
          return "in_finalize";
        }
      }
      for (const wire::InflightOp& op : st->inflight) {
        if (!IsNonblocking(op.event)) {
          return "in_other_op";
        }
      }
    }
    switch (snap->condition) {
      case RankCondition::kFinished:
        return "finished";
      case RankCondition::kDied:
        return "died";
      case RankCondition::kNoAnswer:
        return "no_answer";
      case RankCondition::kRunning:
        break;
    }
    return st != nullptr ? "idle" : "unknown";
  }

  // The field comparisons of one sequence number (only those that must agree for the type).
  static std::vector<std::pair<std::string, std::string>> Fields(const commprof_event& e) {
    std::vector<std::pair<std::string, std::string>> out;
    const uint8_t op = e.subtype;
    const bool nccl = e.kind == COMMPROF_KIND_NCCL_COLLECTIVE;
    const bool rooted = op == COMMPROF_OP_BCAST || op == COMMPROF_OP_REDUCE || op == COMMPROF_OP_GATHER ||
                        op == COMMPROF_OP_GATHERV || op == COMMPROF_OP_SCATTER || op == COMMPROF_OP_SCATTERV;
    // Per-rank counts differ by design in the v-forms and carry nothing in a barrier.
    const bool sized = op != COMMPROF_OP_BARRIER && op != COMMPROF_OP_GATHERV && op != COMMPROF_OP_SCATTERV &&
                       op != COMMPROF_OP_ALLTOALLV;
    const bool reducing = !nccl && (op == COMMPROF_OP_REDUCE || op == COMMPROF_OP_ALLREDUCE || op == COMMPROF_OP_SCAN ||
                                    op == COMMPROF_OP_EXSCAN || op == COMMPROF_OP_REDUCE_SCATTER ||
                                    op == COMMPROF_OP_REDUCE_SCATTER_BLOCK);
    if (rooted) {
      out.emplace_back("ROOT", "root " + std::to_string(e.peer));
    }
    if (sized) {
      out.emplace_back("SIZE", std::to_string(e.bytes) + " B");
    }
    // A derived or unknown datatype may legitimately differ from a basic one of the same signature.
    if (sized && e.datatype != COMMPROF_DT_NONE && e.datatype != COMMPROF_DT_DERIVED &&
        e.datatype != COMMPROF_DT_OTHER) {
      out.emplace_back("DTYPE", ShortEnumName(schema::Datatypes(), e.datatype));
    }
    if (reducing) {
      out.emplace_back("REDUCE_OP", ShortEnumName(schema::ReduceOps(), e.reduce_op));
    }
    return out;
  }

  // Groups ranks by value; a mismatch when there is more than one value.
  static std::optional<Mismatch> Compare(const std::string& kind,
                                         const std::vector<std::pair<uint32_t, std::string>>& values) {
    std::map<std::string, std::vector<uint32_t>> groups;
    for (const auto& [rank, v] : values) {
      groups[v].push_back(rank);
    }
    if (groups.size() < 2) {
      return std::nullopt;
    }
    Mismatch m;
    m.kind = kind;
    for (auto& [v, ranks] : groups) {
      std::sort(ranks.begin(), ranks.end());
      m.sides.push_back({v, ranks});
    }
    // The majority first; a tie goes to the side holding the lowest rank (documented in hangs.md).
    std::sort(m.sides.begin(), m.sides.end(), [](const MismatchSide& a, const MismatchSide& b) {
      return std::make_tuple(-static_cast<int64_t>(a.ranks.size()), a.ranks.front()) <
             std::make_tuple(-static_cast<int64_t>(b.ranks.size()), b.ranks.front());
    });
    return m;
  }

  // Whether a member that did not die completed operation q of stream k where that shows that
  // every member entered it: its record of q is a barrier or a collective with data that waits for
  // all (not a rooted one), or its history no longer holds q (older than every kept record).
  bool LivingMemberCompletedForAll(const StreamKey& k, uint64_t q, const std::map<uint32_t, uint64_t>& first_open) {
    for (const auto& [m, open] : first_open) {
      const RankSnapshot* snap = Snap(m);
      const wire::HangState* st = State(m);
      if (open <= q || snap == nullptr || st == nullptr || snap->condition == RankCondition::kDied) {
        continue;
      }
      const commprof_event* at_q = nullptr;
      for (const commprof_event& e : st->recent) {
        if (IsCollective(e) && KeyOf(e) == k && e.seq == q) {
          at_q = &e;
        }
      }
      if (at_q == nullptr || NeedsEveryMember(*at_q)) {
        return true;
      }
    }
    return false;
  }
  static bool NeedsEveryMember(const commprof_event& e) {
    switch (e.subtype) {
      case COMMPROF_OP_BARRIER:
      case COMMPROF_OP_ALLTOALLV:  // with every count 0 too (CollectiveInstance::zero_byte)
        return true;
      case COMMPROF_OP_ALLTOALL:  // with an empty type signature it returns at once, whatever the count
        return e.bytes > 0;
      case COMMPROF_OP_ALLREDUCE:
      case COMMPROF_OP_ALLGATHER:
      case COMMPROF_OP_ALLGATHERV:
      case COMMPROF_OP_REDUCE_SCATTER:
      case COMMPROF_OP_REDUCE_SCATTER_BLOCK:
        return e.bytes > 0 || (e.flags & COMMPROF_FLAG_SIZELESS_TYPE) != 0;
      default:
        return false;
    }
  }

  std::optional<CommFinding> Stream(const StreamKey& k) {
    const std::vector<uint32_t> members = Members(k.comm);
    // Each member's first not-completed sequence number, its op there (in flight or completed).
    std::map<uint32_t, uint64_t> first_open;
    bool any_inflight = false;
    for (uint32_t m : members) {
      const wire::HangState* st = State(m);
      if (st == nullptr) {
        continue;
      }
      std::optional<uint64_t> low_inflight;
      std::optional<uint64_t> last_done;
      for (const wire::InflightOp& op : st->inflight) {
        if (IsCollective(op.event) && KeyOf(op.event) == k) {
          low_inflight = std::min(low_inflight.value_or(op.event.seq), op.event.seq);
          any_inflight = true;
        }
      }
      for (const commprof_event& e : st->recent) {
        if (IsCollective(e) && KeyOf(e) == k && (e.flags & COMMPROF_FLAG_INCOMPLETE) == 0) {
          last_done = std::max(last_done.value_or(e.seq), e.seq);
        }
      }
      uint64_t open = last_done ? *last_done + 1 : 0;
      if (low_inflight) {
        open = std::min(open, *low_inflight);
      }
      first_open[m] = open;
    }
    if (!any_inflight || first_open.empty()) {
      return std::nullopt;
    }
    // The stuck operation is the lowest first-open number. A rank that died may have completed
    // calls whose records died with it (in its rings, not yet shipped): its number is only a lower
    // bound. It stands unless a living member completed that operation where that needs every
    // member (a barrier, an allreduce with data, ...) or where no living member's history shows
    // the operation any more (a dead rank that shipped nothing would otherwise give "#0"); then
    // the dead rank's number is set aside and the next lowest taken. A rooted operation completed
    // without it (a broadcast from another root) does not contradict it: it never entered that.
    // Only dead members are set aside, and only while a living one (never set aside) vouches
    // against them, so some member always remains to give q.
    std::set<uint32_t> set_aside;
    uint64_t q = UINT64_MAX;
    for (;;) {
      q = UINT64_MAX;
      for (const auto& [m, open] : first_open) {
        if (set_aside.count(m) == 0) {
          q = std::min(q, open);
        }
      }
      if (!LivingMemberCompletedForAll(k, q, first_open)) {
        break;
      }
      bool more = false;
      for (const auto& [m, open] : first_open) {
        const RankSnapshot* snap = Snap(m);
        if (open == q && snap != nullptr && snap->condition == RankCondition::kDied && set_aside.insert(m).second) {
          more = true;
        }
      }
      if (!more) {
        break;
      }
    }

    CommFinding f;
    f.comm_id = k.comm;
    f.nccl = k.nccl;
    f.comm_name = CommName(k.comm, k.nccl);
    f.seq = q;
    f.size = k.comm == COMMPROF_COMM_WORLD_ID ? static_cast<uint32_t>(members.size()) : comm_size_[k.comm];
    if (f.size > members.size()) {
      f.unknown_members = f.size - static_cast<uint32_t>(members.size());
    }

    // Who entered q (in flight) or completed it, with the event that says so.
    std::vector<std::pair<uint32_t, const commprof_event*>> at_q;
    std::vector<uint32_t> no_answer;
    for (uint32_t m : members) {
      const wire::HangState* st = State(m);
      if (st == nullptr) {
        Absent a{m, AbsentState(m), Doing(m)};
        if (a.state == "no_answer" || a.state == "unknown") {
          no_answer.push_back(m);
        }
        f.not_entered.push_back(std::move(a));
        continue;
      }
      const commprof_event* ev = nullptr;
      const wire::InflightOp* waiting = nullptr;
      for (const wire::InflightOp& op : st->inflight) {
        if (IsCollective(op.event) && KeyOf(op.event) == k && op.event.seq == q) {
          ev = &op.event;
          waiting = &op;
        }
      }
      if (ev == nullptr) {
        for (const commprof_event& e : st->recent) {
          if (IsCollective(e) && KeyOf(e) == k && e.seq == q) {
            ev = &e;
          }
        }
      }
      if (waiting != nullptr) {
        std::string op = OpCallName(*ev);
        if (IsNonblocking(*ev)) {
          op += " (pending)";
        }
        f.waiting.push_back({m, op, AgeS(*st, ev->start_ns), CallSite(*st, waiting->stack)});
        at_q.emplace_back(m, ev);
      } else if (first_open[m] > q) {
        f.completed.push_back(m);
        if (ev != nullptr) {
          at_q.emplace_back(m, ev);
        }
      } else {
        Absent a{m, AbsentState(m), Doing(m)};
        if (a.state == "no_answer" || a.state == "unknown") {
          no_answer.push_back(m);
        }
        f.not_entered.push_back(std::move(a));
      }
    }

    // The mismatches: the type first; the other fields only among ranks that agree on it.
    std::set<uint32_t> culprits;
    std::vector<std::pair<uint32_t, std::string>> types;
    types.reserve(at_q.size());
    for (const auto& [m, e] : at_q) {
      types.emplace_back(m, schema::OpName(e->subtype));
    }
    std::map<uint32_t, const commprof_event*> event_of(at_q.begin(), at_q.end());
    std::optional<Mismatch> type_mismatch = Compare("COLLECTIVE_TYPE", types);
    std::vector<uint32_t> same_type;
    if (type_mismatch) {
      for (MismatchSide& s : type_mismatch->sides) {
        s.value = TypeName(*event_of[s.ranks.front()]);
      }
      same_type = type_mismatch->sides.front().ranks;
      for (size_t i = 1; i < type_mismatch->sides.size(); ++i) {
        culprits.insert(type_mismatch->sides[i].ranks.begin(), type_mismatch->sides[i].ranks.end());
      }
      f.mismatches.push_back(*type_mismatch);
    } else {
      for (const auto& [m, e] : at_q) {
        same_type.push_back(m);
      }
    }
    if (!same_type.empty()) {
      const commprof_event& ref = *event_of[same_type.front()];
      f.op = TypeName(ref);
      const auto ref_fields = Fields(ref);
      for (const auto& [kind, unused] : ref_fields) {
        std::vector<std::pair<uint32_t, std::string>> values;
        for (uint32_t m : same_type) {
          for (const auto& [k2, v] : Fields(*event_of[m])) {
            if (k2 == kind) {
              values.emplace_back(m, v);
            }
          }
        }
        if (auto mm = Compare(kind, values)) {
          for (size_t i = 1; i < mm->sides.size(); ++i) {
            culprits.insert(mm->sides[i].ranks.begin(), mm->sides[i].ranks.end());
          }
          f.mismatches.push_back(std::move(*mm));
        }
      }
    }

    // Never entered: culprits, except ranks that did not answer when another explains the hang.
    std::vector<uint32_t> absent_known;
    for (const Absent& a : f.not_entered) {
      if (a.state != "no_answer" && a.state != "unknown") {
        absent_known.push_back(a.rank);
      }
    }
    culprits.insert(absent_known.begin(), absent_known.end());
    if (culprits.empty()) {
      culprits.insert(no_answer.begin(), no_answer.end());
    }
    f.culprits.assign(culprits.begin(), culprits.end());

    const bool never = !f.not_entered.empty();
    const bool mismatch = !f.mismatches.empty();
    f.kind = never && mismatch ? "never_entered+mismatch" : never ? "never_entered" : mismatch ? "mismatch" : "stuck";
    f.verdict = Verdict(f);
    return f;
  }

  std::string Verdict(const CommFinding& f) const {
    // No member's records show the operation itself (older than every history kept): its number.
    const std::string what =
        (f.op.empty() ? std::string("operation") : f.op) + " #" + std::to_string(f.seq) + " on " + f.comm_name;
    std::vector<std::string> parts;
    if (!f.not_entered.empty()) {
      std::vector<uint32_t> ranks;
      std::string where;
      for (const Absent& a : f.not_entered) {
        ranks.push_back(a.rank);
        where += (where.empty() ? "" : "; ") +
                 (f.not_entered.size() > 1 ? "rank " + std::to_string(a.rank) + ": " : "") +
                 (a.state == "in_other_op" || a.state == "in_finalize" ? "it is " : "") + a.where;
      }
      parts.push_back(RankList(ranks) + " never entered " + what + " (" + where + ")");
    }
    for (const Mismatch& m : f.mismatches) {
      if (m.kind == "COLLECTIVE_TYPE") {
        for (size_t i = 1; i < m.sides.size(); ++i) {
          parts.push_back(RankList(m.sides[i].ranks) + " never entered " + what + " (it is in " + m.sides[i].value +
                          " #" + std::to_string(f.seq) + "): collective type mismatch");
        }
        continue;
      }
      std::string sides;
      for (const MismatchSide& s : m.sides) {
        sides += (sides.empty() ? "" : "; ") + RankList(s.ranks) + ": " + s.value;
      }
      std::string kind = m.kind;
      std::transform(kind.begin(), kind.end(), kind.begin(), [](unsigned char c) { return std::tolower(c); });
      std::replace(kind.begin(), kind.end(), '_', ' ');
      if (kind == "dtype") {
        kind = "datatype";
      }
      std::string line = what;
      line.append(": ").append(kind).append(" mismatch (").append(sides).append(")");
      parts.push_back(std::move(line));
    }
    if (parts.empty()) {
      double longest = 0;
      for (const Waiter& w : f.waiting) {
        longest = std::max(longest, w.waiting_s);
      }
      if (f.completed.empty()) {
        return "all " + std::to_string(f.waiting.size()) + " members are in " + what +
               " and none completed it (waiting up to " + Seconds(longest) + ")";
      }
      // Others completed it (a rooted MPI collective, or an NCCL kernel that never ended on one
      // GPU): say so, the waiters are not "all".
      std::vector<uint32_t> in_it;
      for (const Waiter& w : f.waiting) {
        in_it.push_back(w.rank);
      }
      return RankList(in_it) + (in_it.size() == 1 ? " is" : " are") + " still in " + what + " (up to " +
             Seconds(longest) + "), which " + RankList(f.completed) +
             " completed: no member is missing and nothing differs";
    }
    std::string out;
    for (const std::string& p : parts) {
      out += (out.empty() ? "" : "; ") + p;
    }
    return out;
  }

  void P2p(HangReport& r) const {
    for (const auto& [rank, snap] : snaps_) {
      const wire::HangState* st = State(rank);
      if (st == nullptr) {
        continue;
      }
      const wire::InflightOp* wait = nullptr;
      for (const wire::InflightOp& op : st->inflight) {
        if (op.event.kind == COMMPROF_KIND_MPI_WAIT) {
          wait = &op;
        }
      }
      for (const wire::InflightOp& op : st->inflight) {
        const commprof_event& e = op.event;
        if (!IsP2p(e)) {
          continue;
        }
        // A pending request blocks only a thread that waits on it.
        if (IsNonblocking(e) && wait == nullptr) {
          continue;
        }
        P2pWait w;
        w.rank = rank;
        w.op = IsNonblocking(e) ? OpCallName(wait->event) + " (pending " + OpCallName(e) + ")" : OpCallName(e);
        w.comm_id = e.comm_id;
        w.comm_name = CommName(e.comm_id, e.kind == COMMPROF_KIND_NCCL_COLLECTIVE);
        w.peer = e.peer;
        w.peer_world = WorldRankOf(e.comm_id, e.peer);
        w.tag = e.correlation;
        w.waiting_s = AgeS(*st, IsNonblocking(e) ? wait->event.start_ns : e.start_ns);
        w.peer_doing = w.peer_world >= 0 ? Doing(static_cast<uint32_t>(w.peer_world)) : "unknown (any source)";
        r.p2p.push_back(std::move(w));
      }
    }
  }

  // A rank blamed by one finding may itself be waiting in another stuck operation (a tensor-parallel
  // allreduce that cannot finish because one member waits in its data-parallel allreduce): it is
  // held up, not the cause. Wait-for edges: every rank waiting in a stuck collective waits for that
  // finding's culprits (unless it is one of them); a blocked point-to-point call waits for its peer. The root causes
  // are the ends of the chains from the blamed ranks: the strongly connected components nothing leads out of. A
  // component that holds blamed ranks (a deadlock the blamed rank is part of, like a receive whose sender waits in the
  // barrier the receiver never entered) keeps only those; one that holds none (the chain ends at a rank no finding
  // blamed, e.g. the idle sender of a receive) is blamed whole.
  std::set<uint32_t> FollowWaitChains(const HangReport& r, const std::set<uint32_t>& blamed) const {
    std::map<uint32_t, std::set<uint32_t>> next;
    for (const CommFinding& f : r.comms) {
      for (const Waiter& w : f.waiting) {
        // A culprit of this very finding (the minority side of a mismatch) waits for nobody in it.
        if (std::find(f.culprits.begin(), f.culprits.end(), w.rank) != f.culprits.end()) {
          continue;
        }
        next[w.rank].insert(f.culprits.begin(), f.culprits.end());
      }
    }
    for (const P2pWait& w : r.p2p) {
      if (w.peer_world >= 0 && static_cast<uint32_t>(w.peer_world) != w.rank) {
        next[w.rank].insert(static_cast<uint32_t>(w.peer_world));
      }
    }
    // Tarjan's strongly connected components over the ranks reachable from the blamed ones,
    // iterative (a chain may be as long as the job is wide).
    std::map<uint32_t, uint32_t> index, low, component;
    std::vector<uint32_t> stack;
    std::set<uint32_t> on_stack;
    uint32_t counter = 0, components = 0;
    auto successors = [&](uint32_t v) -> const std::set<uint32_t>& {
      static const std::set<uint32_t> kNone;
      auto it = next.find(v);
      return it == next.end() ? kNone : it->second;
    };
    for (uint32_t start : blamed) {
      if (index.contains(start)) {
        continue;
      }
      std::vector<std::pair<uint32_t, std::set<uint32_t>::const_iterator>> work{{start, successors(start).begin()}};
      index[start] = low[start] = counter++;
      stack.push_back(start);
      on_stack.insert(start);
      while (!work.empty()) {
        auto& [v, it] = work.back();
        if (it != successors(v).end()) {
          const uint32_t w = *it++;
          if (!index.contains(w)) {
            index[w] = low[w] = counter++;
            stack.push_back(w);
            on_stack.insert(w);
            work.emplace_back(w, successors(w).begin());
          } else if (on_stack.contains(w)) {
            low[v] = std::min(low[v], index[w]);
          }
          continue;
        }
        const uint32_t done = v;
        work.pop_back();
        if (!work.empty()) {
          low[work.back().first] = std::min(low[work.back().first], low[done]);
        }
        if (low[done] == index[done]) {
          uint32_t x = 0;
          do {
            x = stack.back();
            stack.pop_back();
            on_stack.erase(x);
            component[x] = components;
          } while (x != done);
          ++components;
        }
      }
    }
    std::vector<bool> terminal(components, true);
    std::vector<std::set<uint32_t>> members(components), members_blamed(components);
    for (const auto& [v, c] : component) {
      members[c].insert(v);
      if (blamed.contains(v)) {
        members_blamed[c].insert(v);
      }
      for (uint32_t w : successors(v)) {
        terminal[c] = terminal[c] && component.at(w) == c;
      }
    }
    std::set<uint32_t> roots;
    for (uint32_t c = 0; c < components; ++c) {
      if (terminal[c]) {
        const auto& pick = members_blamed[c].empty() ? members[c] : members_blamed[c];
        roots.insert(pick.begin(), pick.end());
      }
    }
    return roots;
  }

  // Without a stuck collective: a blocked p2p call blames the peer it waits for; two ranks
  // waiting for each other are both blamed (the wait chains then keep the ends).
  static void P2pBlame(const HangReport& r, std::set<uint32_t>& blamed) {
    for (const P2pWait& w : r.p2p) {
      if (w.peer_world < 0) {
        continue;
      }
      const auto peer = static_cast<uint32_t>(w.peer_world);
      for (const P2pWait& o : r.p2p) {
        if (o.rank == peer && o.peer_world == static_cast<int64_t>(w.rank)) {
          blamed.insert(w.rank);
        }
      }
      blamed.insert(peer);
    }
  }

  // One part per culprit: where it is, and who waits for it directly (deduplicated: a halo
  // exchange has several requests per neighbour). Without a culprit (every wait is on any
  // source), one part per wait.
  std::vector<std::string> P2pVerdict(const HangReport& r, const std::set<uint32_t>& roots) const {
    std::vector<std::string> out;
    for (uint32_t c : roots) {
      std::set<uint32_t> waiters;
      std::set<std::string> ops;
      for (const P2pWait& w : r.p2p) {
        if (w.peer_world == static_cast<int64_t>(c) && w.rank != c) {
          waiters.insert(w.rank);
          ops.insert(w.op);
        }
      }
      std::string v = "rank " + std::to_string(c) + ": " + Doing(c);
      if (!waiters.empty()) {
        std::string how;
        for (const std::string& op : ops) {
          how += (how.empty() ? "" : ", ") + op;
        }
        const std::vector<uint32_t> list(waiters.begin(), waiters.end());
        v += "; " + RankList(list) + (list.size() == 1 ? " waits" : " wait") + " for it in " + how;
      }
      out.push_back(std::move(v));
    }
    if (out.empty()) {
      for (const P2pWait& w : r.p2p) {
        out.push_back("rank " + std::to_string(w.rank) + " waits in " + w.op + " for " + Seconds(w.waiting_s) +
                      (w.peer_world < 0 ? " (peer unknown)" : " on rank " + std::to_string(w.peer_world)));
      }
    }
    return out;
  }

  void Positions(HangReport& r) const {
    std::set<uint32_t> all;
    for (uint32_t i = 0; i < in_.world_size; ++i) {
      all.insert(i);
    }
    for (const auto& [rank, s] : snaps_) {
      all.insert(rank);
    }
    for (uint32_t rank : all) {
      RankPosition p;
      p.rank = rank;
      const RankSnapshot* snap = Snap(rank);
      p.condition = snap != nullptr ? ConditionName(snap->condition) : "no_answer";
      p.end_reason = snap != nullptr ? snap->end_reason : "";
      const wire::HangState* st = State(rank);
      p.answered = st != nullptr;
      if (st != nullptr && st->last_completion_ns != 0) {
        p.idle_s = AgeS(*st, st->last_completion_ns);
      }
      p.doing = Doing(rank);
      r.ranks.push_back(std::move(p));
    }
  }

  const HangInput& in_;
  std::map<uint32_t, const RankSnapshot*> snaps_;
  std::map<uint64_t, std::set<uint32_t>> members_;
  std::map<uint64_t, uint32_t> comm_size_;
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> rank_in_comm_;
  std::set<StreamKey> streams_;
};

}  // namespace

namespace {

// Making a communicator (MPI_Comm_split, _dup, _create, ...) is collective over its parent, and a
// rank that skipped it is as stuck as one that skipped a collective: the members in it are placed
// at the parent's next sequence number as an operation of that type, so a rank calling a barrier
// there instead is a COLLECTIVE_TYPE mismatch rather than "everyone else never entered the barrier".
// (The collector does not number these calls: each rank's next number is one past the last
// collective it completed on the parent.)
void PlaceCommCreationsOnTheirParent(HangInput& in) {
  for (RankSnapshot& s : in.ranks) {
    for (wire::InflightOp& op : s.state.inflight) {
      commprof_event& e = op.event;
      if (e.kind != COMMPROF_KIND_MPI_COMM) {
        continue;
      }
      uint64_t next = 0;
      for (const commprof_event& r : s.state.recent) {
        if (r.kind == COMMPROF_KIND_MPI_COLLECTIVE && r.comm_id == e.comm_id &&
            (r.flags & COMMPROF_FLAG_INCOMPLETE) == 0) {
          next = std::max(next, r.seq + 1);
        }
      }
      e.kind = COMMPROF_KIND_MPI_COLLECTIVE;
      e.seq = next;
      e.bytes = 0;
      e.datatype = COMMPROF_DT_NONE;
      e.peer = COMMPROF_NO_PEER;
    }
  }
}

}  // namespace

HangReport Diagnose(const HangInput& input) {
  HangInput placed = input;
  PlaceCommCreationsOnTheirParent(placed);
  return Diagnoser(placed).Run();
}

}  // namespace commprof::hang

namespace commprof::hang {
namespace {

std::string Ranks(const std::vector<uint32_t>& r) { return RankList(r); }

}  // namespace

std::string RenderText(const HangReport& report) {
  std::ostringstream os;
  if (!report.hang) {
    os << "hang: none (" << report.verdict << ")\n";
    return os.str();
  }
  os << "HANG (" << (report.source.empty() ? "unknown source" : report.source);
  if (report.timeout_s > 0) {
    os << ", no rank completed a communication call for " << Seconds(report.timeout_s);
  }
  os << ", " << report.world_size << " ranks)\n";
  os << "  verdict: " << report.verdict << "\n";
  os << "  culprits: " << (report.culprits.empty() ? "none named" : Ranks(report.culprits)) << "\n";
  if (!report.consequences.empty()) {
    os << "  held up behind them: " << Ranks(report.consequences)
       << " (blamed by a finding, but waiting in another stuck call)\n";
  }
  for (const CommFinding& f : report.comms) {
    os << "  " << f.comm_name << ": " << (f.op.empty() ? "operation" : f.op) << " #" << f.seq;
    if (f.size > 0) {
      os << " (" << f.size << " members";
      if (f.unknown_members > 0) {
        os << ", " << f.unknown_members << " not accounted for";
      }
      os << ")";
    }
    os << " [" << f.kind << "]\n";
    // Waiters grouped by what they called, so 64 ranks stay one line.
    std::map<std::string, std::vector<const Waiter*>> by_op;
    for (const Waiter& w : f.waiting) {
      by_op[w.op].push_back(&w);
    }
    for (const auto& [op, ws] : by_op) {
      std::vector<uint32_t> ranks;
      double lo = ws.front()->waiting_s;
      double hi = lo;
      for (const Waiter* w : ws) {
        ranks.push_back(w->rank);
        lo = std::min(lo, w->waiting_s);
        hi = std::max(hi, w->waiting_s);
      }
      os << "    waiting in " << op << ": " << Ranks(ranks) << " for "
         << (lo == hi ? Seconds(hi) : Seconds(lo) + " to " + Seconds(hi)) << "\n";
    }
    for (const Absent& a : f.not_entered) {
      os << "    never entered: rank " << a.rank << " (" << a.state << "): " << a.where << "\n";
    }
    if (!f.completed.empty()) {
      os << "    already completed it: " << Ranks(f.completed) << "\n";
    }
    for (const Mismatch& m : f.mismatches) {
      os << "    mismatch " << m.kind << ":";
      for (size_t i = 0; i < m.sides.size(); ++i) {
        os << (i == 0 ? " " : "; ") << Ranks(m.sides[i].ranks) << ": " << m.sides[i].value;
      }
      os << "\n";
    }
    for (const Waiter& w : f.waiting) {
      if (!w.call_site.empty()) {
        os << "    call site of rank " << w.rank << ": " << w.call_site << "\n";
      }
    }
  }
  if (!report.p2p.empty()) {
    os << "  point-to-point waits:\n";
    for (const P2pWait& w : report.p2p) {
      os << "    rank " << w.rank << ": " << w.op << " on " << w.comm_name << " peer ";
      os << (w.peer < 0 ? std::string("any") : std::to_string(w.peer));
      if (w.peer_world >= 0 && w.comm_id != COMMPROF_COMM_WORLD_ID) {
        os << " (world rank " << w.peer_world << ")";
      }
      os << " for " << Seconds(w.waiting_s) << "; the peer is " << w.peer_doing << "\n";
    }
  }
  // Every rank while the list is short; past that, those that are not plain waiters.
  constexpr size_t kAllRanksUpTo = 32;
  std::set<uint32_t> interesting(report.culprits.begin(), report.culprits.end());
  for (const P2pWait& w : report.p2p) {
    interesting.insert(w.rank);
  }
  os << "  ranks:\n";
  size_t left_out = 0;
  for (const RankPosition& p : report.ranks) {
    if (report.ranks.size() > kAllRanksUpTo && interesting.count(p.rank) == 0 && p.condition == "running") {
      ++left_out;
      continue;
    }
    os << "    rank " << p.rank << " " << p.condition << ": " << p.doing << "\n";
  }
  if (left_out > 0) {
    os << "    (" << left_out << " more running ranks: see the JSON report)\n";
  }
  return os.str();
}

}  // namespace commprof::hang
