#include "analysis/hang/hang_from_file.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

#include "analysis/hang/hang_store.h"

namespace commprof::hang {
namespace {

bool IsCommCall(uint8_t kind) {
  return kind == COMMPROF_KIND_MPI_COLLECTIVE || kind == COMMPROF_KIND_MPI_P2P || kind == COMMPROF_KIND_MPI_WAIT ||
         kind == COMMPROF_KIND_NCCL_COLLECTIVE;
}

// Signals sent from outside to end a job (Slurm's time limit, scancel, Ctrl-C): the rank was
// running when it was ended. Any other fatal signal is a crash: the rank died.
bool EndedFromOutside(const std::string& end_reason) {
  for (const char* s : {"(SIGTERM)", "(SIGINT)", "(SIGHUP)", "(SIGUSR1)", "(SIGUSR2)", "(SIGXCPU)", "(SIGKILL)"}) {
    if (end_reason.find(s) != std::string::npos) {
      return true;
    }
  }
  return false;
}

RankCondition ConditionOf(const RankInfo& r, bool blocked) {
  if (blocked) {
    return RankCondition::kRunning;  // ended inside a communication call: it never got past it
  }
  if (r.status == "complete") {
    if (r.end_reason.rfind("killed by signal", 0) == 0) {
      return EndedFromOutside(r.end_reason) ? RankCondition::kRunning : RankCondition::kDied;
    }
    return RankCondition::kFinished;
  }
  if (r.status == "connected") {
    return RankCondition::kRunning;  // the file was not finalized: it was still running
  }
  return RankCondition::kDied;  // disconnected, corrupt, missing: it ended without a bye
}

}  // namespace

Result<std::optional<HangInput>> HangInputFromEvents(const ProfileReader& reader) {
  const ProfileInfo& info = reader.info();
  HangInput in;
  in.world_size = static_cast<uint32_t>(info.world_size);
  in.source = "file";
  bool evidence = false;
  for (const RankInfo& ri : info.ranks) {
    RankSnapshot s;
    s.rank = ri.rank;
    s.end_reason = ri.end_reason;
    s.has_state = true;
    wire::HangState& st = s.state;
    st.comms.push_back({COMMPROF_COMM_WORLD_ID, in.world_size, ri.rank});
    using StreamKey = std::tuple<uint64_t, uint8_t, uint8_t>;  // comm, kind, NCCL op
    std::map<StreamKey, std::deque<commprof_event>> recent;
    uint64_t last_end = 0;
    uint64_t flush = 0;
    bool blocked = false;
    Status st_read = reader.ForEachEventChunk(ri.rank, [&](std::span<const commprof_event> chunk) {
      for (const commprof_event& e : chunk) {
        last_end = std::max(last_end, e.end_ns);
        if (e.kind == COMMPROF_KIND_MPI_COMM) {
          st.comms.push_back(
              {e.comm_id, static_cast<uint32_t>(e.bytes), static_cast<uint32_t>(std::max<int32_t>(e.peer, 0))});
          continue;
        }
        const bool incomplete = (e.flags & COMMPROF_FLAG_INCOMPLETE) != 0;
        if (incomplete && (IsCommCall(e.kind) || e.kind == COMMPROF_KIND_MPI_FINALIZE)) {
          st.inflight.push_back({e, 0});
          flush = std::max(flush, e.end_ns);
          // A pending request alone is no evidence (a job may leak one); a call given up is.
          if ((e.flags & COMMPROF_FLAG_NONBLOCKING) == 0 || e.kind == COMMPROF_KIND_NCCL_COLLECTIVE) {
            blocked = true;
          }
          continue;
        }
        if (incomplete || !IsCommCall(e.kind)) {
          continue;
        }
        st.last_completion_ns = std::max(st.last_completion_ns, e.end_ns);
        if (e.kind == COMMPROF_KIND_MPI_COLLECTIVE ||
            (e.kind == COMMPROF_KIND_NCCL_COLLECTIVE && e.subtype != COMMPROF_OP_SEND &&
             e.subtype != COMMPROF_OP_RECV)) {
          auto& q = recent[{e.comm_id, e.kind, e.kind == COMMPROF_KIND_NCCL_COLLECTIVE ? e.subtype : uint8_t{0}}];
          q.push_back(e);
          if (q.size() > kRecentPerStream) {
            q.pop_front();
          }
        }
      }
    });
    if (!st_read.ok()) {
      return st_read;
    }
    // Ages are taken against the flush of the given-up calls (their end), else the last event.
    st.local_now_ns = flush != 0 ? flush : last_end;
    for (auto& [key, q] : recent) {
      std::sort(q.begin(), q.end(), [](const commprof_event& a, const commprof_event& b) { return a.seq < b.seq; });
      st.recent.insert(st.recent.end(), q.begin(), q.end());
    }
    s.condition = ConditionOf(ri, blocked);
    evidence = evidence || blocked;
    in.ranks.push_back(std::move(s));
  }
  // Ranks that never connected, or whose group could not be read, take part without a state (a
  // rank read without its damaged last chunk has its state above).
  for (const RankFault& f : info.faults) {
    if (f.rank && !f.partial) {
      RankSnapshot s;
      s.rank = *f.rank;
      s.condition = RankCondition::kDied;
      s.end_reason = "unreadable in the file";
      in.ranks.push_back(std::move(s));
    }
  }
  for (const auto& [first, last] : info.NeverConnected()) {
    for (uint32_t r = first; r <= last; ++r) {
      RankSnapshot s;
      s.rank = r;
      s.condition = RankCondition::kDied;
      s.end_reason = "never connected";
      in.ranks.push_back(std::move(s));
    }
  }
  if (!evidence) {
    return std::optional<HangInput>();
  }
  return std::optional<HangInput>(std::move(in));
}

Result<std::optional<FileHang>> DiagnoseFile(const ProfileReader& reader) {
  auto stored = ReadHangGroup(reader.info().path);
  if (!stored.ok()) {
    return stored.status();
  }
  if (stored.value()) {
    FileHang h;
    h.input = std::move(stored.value()->input);
    h.report = std::move(stored.value()->report);
    h.stored = true;
    return std::optional<FileHang>(std::move(h));
  }
  auto in = HangInputFromEvents(reader);
  if (!in.ok()) {
    return in.status();
  }
  if (!in.value()) {
    return std::optional<FileHang>();
  }
  FileHang h;
  h.input = std::move(*in.value());
  h.report = Diagnose(h.input);
  return std::optional<FileHang>(std::move(h));
}

}  // namespace commprof::hang
