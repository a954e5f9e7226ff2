#include "analysis/match/collective_instances.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace commprof {
namespace {
struct KeyHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& k) const { return k.first * 0x9E3779B97F4A7C15ull ^ k.second; }
};
}  // namespace

Result<std::vector<CollectiveInstance>> LoadCollectiveInstances(const ProfileReader& reader, bool aligned) {
  std::unordered_map<std::pair<uint64_t, uint64_t>, CollectiveInstance, KeyHash> by_key;
  // Communicator membership from the MPI_COMM creation events: peer = rank in the new
  // communicator, bytes = its size. MPI_COMM_WORLD ranks are the world ranks.
  std::map<std::pair<uint64_t, uint32_t>, int32_t> local_rank;
  std::map<uint64_t, uint32_t> comm_size;
  for (const RankInfo& r : reader.info().ranks) {
    ClockModel model = r.clock_model();
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const auto& e : chunk) {
        if (e.kind == COMMPROF_KIND_MPI_COMM) {
          local_rank[{e.comm_id, r.rank}] = e.peer;
          comm_size[e.comm_id] = static_cast<uint32_t>(e.bytes);
        }
        if (e.kind != COMMPROF_KIND_MPI_COLLECTIVE) continue;
        if (e.flags & (COMMPROF_FLAG_NONBLOCKING | COMMPROF_FLAG_INCOMPLETE | COMMPROF_FLAG_UNTRACKED_COMM)) continue;
        auto start = static_cast<int64_t>(e.start_ns), end = static_cast<int64_t>(e.end_ns);
        if (aligned) {
          start = model.ToReference(start);
          end = model.ToReference(end);
        }
        CollectiveInstance& in = by_key[{e.comm_id, e.seq}];
        if (in.arrivals.empty()) {
          in.comm_id = e.comm_id;
          in.seq = e.seq;
          in.op = e.subtype;
          in.root = e.peer;
          in.bytes = e.bytes;
        }
        in.arrivals.push_back({r.rank, -1, start, end});
      }
    });
    COMMPROF_RETURN_IF_ERROR(st);
  }
  std::vector<CollectiveInstance> out;
  out.reserve(by_key.size());
  for (auto& [key, in] : by_key) {
    if (in.comm_id == COMMPROF_COMM_WORLD_ID) {
      in.comm_size = static_cast<uint32_t>(reader.info().world_size);
    } else if (auto it = comm_size.find(in.comm_id); it != comm_size.end()) {
      in.comm_size = it->second;
    }
    for (auto& a : in.arrivals) {
      if (in.comm_id == COMMPROF_COMM_WORLD_ID) {
        a.local_rank = static_cast<int32_t>(a.world_rank);
      } else if (auto it = local_rank.find({in.comm_id, a.world_rank}); it != local_rank.end()) {
        a.local_rank = it->second;
      }
    }
    std::sort(in.arrivals.begin(), in.arrivals.end(),
              [](const Arrival& a, const Arrival& b) { return a.world_rank < b.world_rank; });
    out.push_back(std::move(in));
  }
  auto first_start = [](const CollectiveInstance& in) {
    int64_t m = INT64_MAX;
    for (const auto& a : in.arrivals) m = std::min(m, a.start);
    return m;
  };
  std::sort(out.begin(), out.end(), [&](const CollectiveInstance& a, const CollectiveInstance& b) {
    int64_t fa = first_start(a), fb = first_start(b);
    return fa != fb ? fa < fb : std::tie(a.comm_id, a.seq) < std::tie(b.comm_id, b.seq);
  });
  return out;
}

}  // namespace commprof
