#include "analysis/match/clock_violations.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

namespace commprof {
namespace {

struct Arrival {
  int32_t local_rank;  // rank within the communicator
  int64_t start;
  int64_t end;
};

struct Instance {
  uint8_t op = 0;
  int32_t root = COMMPROF_NO_PEER;
  std::vector<Arrival> arrivals;
};

bool Violates(const Instance& in) {
  const auto& a = in.arrivals;
  auto max_start_where = [&](auto pred) {
    int64_t m = INT64_MIN;
    for (const auto& x : a) {
      if (pred(x)) m = std::max(m, x.start);
    }
    return m;
  };
  switch (in.op) {
    case COMMPROF_OP_BCAST:
    case COMMPROF_OP_SCATTER:
    case COMMPROF_OP_SCATTERV: {
      int64_t root_start = max_start_where([&](const Arrival& x) { return x.local_rank == in.root; });
      if (root_start == INT64_MIN) return false;  // the root's record is missing
      for (const auto& x : a) {
        if (x.local_rank != in.root && x.end < root_start) return true;
      }
      return false;
    }
    case COMMPROF_OP_REDUCE:
    case COMMPROF_OP_GATHER:
    case COMMPROF_OP_GATHERV: {
      int64_t last = max_start_where([](const Arrival&) { return true; });
      for (const auto& x : a) {
        if (x.local_rank == in.root && x.end < last) return true;
      }
      return false;
    }
    case COMMPROF_OP_SCAN:
      for (const auto& x : a) {
        if (x.end < max_start_where([&](const Arrival& y) { return y.local_rank <= x.local_rank; })) return true;
      }
      return false;
    default: {
      int64_t last = max_start_where([](const Arrival&) { return true; });
      for (const auto& x : a) {
        if (x.end < last) return true;
      }
      return false;
    }
  }
}

struct KeyHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& k) const { return k.first * 0x9E3779B97F4A7C15ull ^ k.second; }
};

}  // namespace

Result<ClockViolations> CountClockViolations(const ProfileReader& reader, bool aligned) {
  // Ranks within each communicator, from the MPI_COMM creation events (peer = rank in the new
  // communicator); MPI_COMM_WORLD ranks are the world ranks.
  std::unordered_map<std::pair<uint64_t, uint64_t>, Instance, KeyHash> instances;
  std::map<std::pair<uint64_t, uint32_t>, int32_t> local_rank;  // (comm, world rank) -> rank in comm
  struct Pending {
    uint64_t comm, seq;
    uint32_t world_rank;
    uint8_t op;
    int32_t root;
    int64_t start, end;
  };
  std::vector<Pending> pending;
  for (const RankInfo& r : reader.info().ranks) {
    ClockModel model = r.clock_model();
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const auto& e : chunk) {
        if (e.kind == COMMPROF_KIND_MPI_COMM) local_rank[{e.comm_id, r.rank}] = e.peer;
        if (e.kind != COMMPROF_KIND_MPI_COLLECTIVE) continue;
        if (e.flags & (COMMPROF_FLAG_NONBLOCKING | COMMPROF_FLAG_INCOMPLETE | COMMPROF_FLAG_UNTRACKED_COMM)) continue;
        auto start = static_cast<int64_t>(e.start_ns), end = static_cast<int64_t>(e.end_ns);
        if (aligned) {
          start = model.ToReference(start);
          end = model.ToReference(end);
        }
        pending.push_back({e.comm_id, e.seq, r.rank, e.subtype, e.peer, start, end});
      }
    });
    COMMPROF_RETURN_IF_ERROR(st);
  }
  for (const auto& p : pending) {
    Instance& in = instances[{p.comm, p.seq}];
    in.op = p.op;
    in.root = p.root;
    int32_t lr = static_cast<int32_t>(p.world_rank);
    if (p.comm != COMMPROF_COMM_WORLD_ID) {
      auto it = local_rank.find({p.comm, p.world_rank});
      lr = it != local_rank.end() ? it->second : -1;
    }
    in.arrivals.push_back({lr, p.start, p.end});
  }
  ClockViolations out;
  for (const auto& [key, in] : instances) {
    if (in.arrivals.size() < 2) continue;
    ++out.instances_checked;
    if (Violates(in)) ++out.violations;
  }
  return out;
}

}  // namespace commprof
