#include "analysis/metrics/wait_metrics.h"

#include <algorithm>
#include <map>

namespace commprof {

const char* OpTypeName(uint8_t op) {
  switch (op) {
    case COMMPROF_OP_BARRIER: return "barrier";
    case COMMPROF_OP_BCAST: return "bcast";
    case COMMPROF_OP_REDUCE: return "reduce";
    case COMMPROF_OP_ALLREDUCE: return "allreduce";
    case COMMPROF_OP_GATHER: return "gather";
    case COMMPROF_OP_GATHERV: return "gatherv";
    case COMMPROF_OP_SCATTER: return "scatter";
    case COMMPROF_OP_SCATTERV: return "scatterv";
    case COMMPROF_OP_ALLGATHER: return "allgather";
    case COMMPROF_OP_ALLGATHERV: return "allgatherv";
    case COMMPROF_OP_ALLTOALL: return "alltoall";
    case COMMPROF_OP_ALLTOALLV: return "alltoallv";
    case COMMPROF_OP_REDUCE_SCATTER: return "reduce_scatter";
    case COMMPROF_OP_REDUCE_SCATTER_BLOCK: return "reduce_scatter_block";
    case COMMPROF_OP_SCAN: return "scan";
    default: return "other";
  }
}

namespace {

bool RootedBroadcastLike(uint8_t op) {
  return op == COMMPROF_OP_BCAST || op == COMMPROF_OP_SCATTER || op == COMMPROF_OP_SCATTERV;
}
bool RootedReduceLike(uint8_t op) {
  return op == COMMPROF_OP_REDUCE || op == COMMPROF_OP_GATHER || op == COMMPROF_OP_GATHERV;
}

int64_t Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(idx, v.size() - 1)];
}

}  // namespace

WaitReport ComputeWaitMetrics(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances) {
  WaitReport rep;
  std::map<uint32_t, size_t> index;
  int64_t max_bound = 0;
  for (const RankInfo& r : info.ranks) {
    index[r.rank] = rep.ranks.size();
    RankWaitMetrics m;
    m.rank = r.rank;
    m.host = r.host;
    rep.ranks.push_back(m);
    max_bound = std::max(max_bound, r.clock_error_bound_ns);
  }
  // §3 threshold: a skew is only attributed when it is well above what the clocks can be trusted
  // to: twice the largest error bound, and at least 1 us.
  rep.skew_threshold_ns = std::max<int64_t>(1000, 2 * max_bound);

  struct TypeAcc {
    uint64_t count = 0, bytes = 0, arrivals = 0;
    double duration = 0, wait = 0;
    std::vector<int64_t> skews;
  };
  std::map<uint8_t, TypeAcc> types;
  std::map<uint32_t, int64_t> last_end;  // per rank: end of its previous matched collective
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> last_halves;  // times last in 1st / 2nd half
  uint64_t complete_total = 0;
  for (const auto& in : instances) {
    if (!in.complete()) continue;
    ++complete_total;
  }
  uint64_t seen_complete = 0;
  for (const auto& in : instances) {
    if (!in.complete()) {
      ++rep.incomplete;
      continue;
    }
    ++rep.matched;
    ++seen_complete;
    const auto& a = in.arrivals;
    int64_t first = INT64_MAX, last = INT64_MIN, second = INT64_MIN;
    const Arrival* last_arriver = nullptr;
    const Arrival* root = nullptr;
    for (const auto& x : a) {
      first = std::min(first, x.start);
      if (x.start > last) {
        second = last;
        last = x.start;
        last_arriver = &x;
      } else if (x.start > second) {
        second = x.start;
      }
      if (x.local_rank == in.root) root = &x;
    }
    int64_t skew = last - first;
    TypeAcc& t = types[in.op];
    ++t.count;
    t.bytes += in.bytes;
    t.skews.push_back(skew);
    int64_t instance_wait = 0;
    std::map<uint32_t, int64_t> waits;
    for (const auto& x : a) {
      int64_t w = 0;
      if (RootedBroadcastLike(in.op)) {
        w = (root != nullptr && &x != root) ? std::max<int64_t>(0, root->start - x.start) : 0;
      } else if (RootedReduceLike(in.op)) {
        w = (&x == root) ? last - x.start : 0;
      } else {
        w = last - x.start;
      }
      waits[x.world_rank] = w;
      instance_wait += w;
      RankWaitMetrics& m = rep.ranks[index[x.world_rank]];
      ++m.instances;
      m.comm_time_ns += x.end - x.start;
      m.wait_time_ns += w;
      auto le = last_end.find(x.world_rank);
      int64_t gap = le != last_end.end() ? std::max<int64_t>(0, x.start - le->second) : 0;
      m.compute_before_ns += gap;
      last_end[x.world_rank] = x.end;
      t.duration += static_cast<double>(x.end - x.start);
      ++t.arrivals;
    }
    t.wait += static_cast<double>(instance_wait) / static_cast<double>(a.size());
    if (skew > rep.skew_threshold_ns && last_arriver != nullptr && a.size() >= 2) {
      RankWaitMetrics& s = rep.ranks[index[last_arriver->world_rank]];
      ++s.times_last;
      s.delay_caused_ns += last - second;
      s.wait_imposed_ns += instance_wait - waits[last_arriver->world_rank];
      auto& halves = last_halves[last_arriver->world_rank];
      (seen_complete * 2 <= complete_total ? halves.first : halves.second)++;
    }
  }
  for (auto& m : rep.ranks) m.wait_share = m.comm_time_ns > 0 ? static_cast<double>(m.wait_time_ns) / static_cast<double>(m.comm_time_ns) : 0;
  for (auto& [op, t] : types) {
    TypeWaitMetrics tm;
    tm.op = op;
    tm.count = t.count;
    tm.bytes = t.count ? t.bytes / t.count : 0;
    // Over the arrivals actually seen: a sub-communicator's instance has fewer than the world.
    tm.mean_duration_ns = t.arrivals ? t.duration / static_cast<double>(t.arrivals) : 0;
    tm.mean_wait_ns = t.count ? t.wait / static_cast<double>(t.count) : 0;
    tm.skew_p50_ns = Percentile(t.skews, 0.50);
    tm.skew_p99_ns = Percentile(t.skews, 0.99);
    rep.types.push_back(tm);
  }
  // §4 verdict: the rank most often last, when it is last in a clear majority of the instances.
  const RankWaitMetrics* best = nullptr;
  for (const auto& m : rep.ranks) {
    if (best == nullptr || m.times_last > best->times_last) best = &m;
  }
  if (best != nullptr && rep.matched > 0) {
    double share = static_cast<double>(best->times_last) / static_cast<double>(rep.matched);
    // §4 significance: the delay it caused must be at least a tenth of the others' mean time in
    // these collectives; a rank that is merely often last by a hair (the scheduler's doing on
    // shared cores) is not a straggler.
    double others_comm = 0;
    size_t n_others = 0;
    for (const auto& m : rep.ranks) {
      if (m.rank != best->rank) {
        others_comm += static_cast<double>(m.comm_time_ns);
        ++n_others;
      }
    }
    double mean_others_comm = n_others > 0 ? others_comm / static_cast<double>(n_others) : 0;
    bool significant = static_cast<double>(best->delay_caused_ns) >= 0.1 * mean_others_comm;
    if (share >= 0.5 && significant) {
      StragglerVerdict& v = rep.verdict;
      v.found = true;
      v.rank = best->rank;
      v.host = best->host;
      v.share_last = share;
      v.delay_caused_ns = best->delay_caused_ns;
      auto halves = last_halves[best->rank];
      uint64_t half = std::max<uint64_t>(1, rep.matched / 2);
      v.persistent = halves.first * 2 >= half && halves.second * 2 >= half;
      // Longer compute before its calls than the mean of the others: compute; otherwise transfer.
      double others = 0;
      size_t n = 0;
      for (const auto& m : rep.ranks) {
        if (m.rank == best->rank || m.instances == 0) continue;
        others += static_cast<double>(m.compute_before_ns) / static_cast<double>(m.instances);
        ++n;
      }
      double mine = best->instances ? static_cast<double>(best->compute_before_ns) / static_cast<double>(best->instances) : 0;
      v.cause = (n > 0 && mine > others / static_cast<double>(n)) ? "compute" : "transfer";
    }
  }
  return rep;
}

}  // namespace commprof
