#include "analysis/metrics/wait_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace commprof {

namespace {

bool RootedBroadcastLike(uint8_t op) {
  return op == COMMPROF_OP_BCAST || op == COMMPROF_OP_SCATTER || op == COMMPROF_OP_SCATTERV;
}
bool RootedReduceLike(uint8_t op) {
  return op == COMMPROF_OP_REDUCE || op == COMMPROF_OP_GATHER || op == COMMPROF_OP_GATHERV;
}

// Nearest-rank percentile (docs/metrics.md §4): the ceil(p n)-th smallest value.
int64_t Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

}  // namespace

double BusBandwidthFactor(uint8_t op, uint32_t n) {
  if (n == 0) {
    return 0;
  }
  const double nd = static_cast<double>(n);
  switch (op) {
    case COMMPROF_OP_ALLREDUCE:
      return 2.0 * (nd - 1) / nd;
    case COMMPROF_OP_ALLGATHER:
    case COMMPROF_OP_ALLGATHERV:
    case COMMPROF_OP_REDUCE_SCATTER:
    case COMMPROF_OP_REDUCE_SCATTER_BLOCK:
    case COMMPROF_OP_ALLTOALL:
    case COMMPROF_OP_ALLTOALLV:
    case COMMPROF_OP_GATHER:
    case COMMPROF_OP_GATHERV:
    case COMMPROF_OP_SCATTER:
    case COMMPROF_OP_SCATTERV:
      return (nd - 1) / nd;
    default:
      return 1.0;  // Bcast, Reduce (nccl-tests: 1), Scan, Barrier (no bytes)
  }
}

int64_t SkewThresholdNs(const ProfileInfo& info) {
  int64_t max_bound = 0;
  for (const RankInfo& r : info.ranks) {
    max_bound = std::max(max_bound, r.clock_error_bound_ns);
  }
  return std::max<int64_t>(1000, 2 * max_bound);
}

InstanceMetrics MeasureInstance(const CollectiveInstance& in, int64_t skew_threshold_ns) {
  InstanceMetrics m;
  const auto& a = in.arrivals;
  const size_t n = a.size();
  m.waits.assign(n, 0);
  m.transfers.assign(n, 0);
  m.deps.assign(n, WaitDeps::kNone);
  if (n == 0) {
    return m;
  }
  int64_t first = INT64_MAX, last = INT64_MIN, second = INT64_MIN, last_end = INT64_MIN;
  int32_t root = -1;
  for (size_t i = 0; i < n; ++i) {
    const Arrival& x = a[i];
    first = std::min(first, x.start);
    last_end = std::max(last_end, x.end);
    if (x.start > last) {
      second = last;
      last = x.start;
      m.last_index = static_cast<int32_t>(i);
    } else if (x.start > second) {
      second = x.start;
    }
    if (x.local_rank == in.root) {
      root = static_cast<int32_t>(i);
    }
  }
  if (second == INT64_MIN) {
    second = last;
  }
  m.first_arrival = first;
  m.last_arrival = last;
  m.second_arrival = second;
  m.skew_ns = last - first;
  m.last_end = last_end;
  if (in.zero_byte()) {
    // §2: a call that moves no data returns at once on every rank; its arrivals are not a
    // synchronisation point, so nobody waited and nobody was late to it.
    m.skew_ns = 0;
    for (size_t i = 0; i < n; ++i) {
      m.transfers[i] = std::max<int64_t>(0, a[i].end - BlockStart(in, a[i]));
    }
    return m;
  }
  const bool exclusive_scan = in.op == COMMPROF_OP_EXSCAN;
  // §2 wait_r: from the rank's blocked start b until the last arrival D of the ranks it depends
  // on (never past its exit); the rest of its blocked time is transfer.
  for (size_t i = 0; i < n; ++i) {
    const Arrival& x = a[i];
    const int64_t b = BlockStart(in, x);
    const bool is_root = root >= 0 && static_cast<int32_t>(i) == root;
    WaitDeps deps = WaitDeps::kAll;
    int64_t d = last;
    if (RootedBroadcastLike(in.op)) {
      // Late Broadcast: a non-root needs the root's data. The root is held only by a rendezvous
      // with late receivers, which shows as still being in the call when the last one arrived.
      if (!is_root) {
        deps = root >= 0 ? WaitDeps::kRoot : WaitDeps::kNone;
        d = root >= 0 ? a[root].start : b;
      } else if (x.end < last) {
        deps = WaitDeps::kNone;
      }
    } else if (RootedReduceLike(in.op)) {
      // Early Reduce: the root needs everyone. A non-root is held only while it is still in the
      // call: by everyone when it left after the last arrival (a tree's inner node, or a
      // rendezvous), by the root when it left after the root's arrival, else not at all (eager).
      if (!is_root) {
        if (x.end >= last) {
          deps = WaitDeps::kAll;
        } else if (root >= 0 && x.end >= a[root].start) {
          deps = WaitDeps::kRoot;
          d = a[root].start;
        } else {
          deps = WaitDeps::kNone;
        }
      }
    } else if ((in.op == COMMPROF_OP_SCAN || exclusive_scan) && x.local_rank >= 0) {
      // rank i of the communicator needs ranks 0..i (Exscan: 0..i-1) only
      deps = exclusive_scan ? WaitDeps::kPrefixExclusive : WaitDeps::kPrefix;
      d = exclusive_scan ? INT64_MIN : x.start;
      for (const Arrival& y : a) {
        if (y.local_rank >= 0 && (y.local_rank < x.local_rank || (!exclusive_scan && y.local_rank == x.local_rank))) {
          d = std::max(d, y.start);
        }
      }
    }
    if (d == INT64_MIN) {
      deps = WaitDeps::kNone;  // Exscan's rank 0 depends on nobody
    }
    const int64_t w = deps == WaitDeps::kNone ? 0 : std::max<int64_t>(0, std::min(x.end, d) - b);
    m.deps[i] = deps;
    m.waits[i] = w;
    m.total_wait_ns += w;
    m.transfers[i] = std::max<int64_t>(0, x.end - b - w);
  }
  m.transfer_ns = std::max<int64_t>(0, last_end - last);
  if (m.transfer_ns > 0) {
    m.algbw_gbps = static_cast<double>(in.bytes) / static_cast<double>(m.transfer_ns);
    m.busbw_gbps = m.algbw_gbps * BusBandwidthFactor(in.op, static_cast<uint32_t>(n));
  }
  if (n >= 2 && m.skew_ns > skew_threshold_ns) {
    m.straggler_index = m.last_index;
    m.delay_caused_ns = last - second;
  }
  return m;
}

std::vector<InstanceMetrics> MeasureInstances(const std::vector<CollectiveInstance>& instances,
                                              int64_t skew_threshold_ns) {
  std::vector<InstanceMetrics> out;
  out.reserve(instances.size());
  for (const CollectiveInstance& in : instances) {
    out.push_back(MeasureInstance(in, skew_threshold_ns));
  }
  return out;
}

double BinomialTail(uint64_t n, uint64_t k, double p) {
  if (k == 0) {
    return 1.0;
  }
  if (k > n || p <= 0) {
    return 0.0;
  }
  if (p >= 1) {
    return 1.0;
  }
  // Sum of the pmf in log space from k up; terms shrink fast past the mean, so stop when they
  // no longer change the sum.
  const double ln_p = std::log(p), ln_q = std::log1p(-p), nd = static_cast<double>(n);
  double sum = 0;
  for (uint64_t i = k; i <= n; ++i) {
    const double id = static_cast<double>(i);
    const double term =
        std::exp(std::lgamma(nd + 1) - std::lgamma(id + 1) - std::lgamma(nd - id + 1) + id * ln_p + (nd - id) * ln_q);
    sum += term;
    if (id > nd * p && term < sum * 1e-17) {
      break;
    }
  }
  return std::min(1.0, sum);
}

WaitReport ComputeWaitMetrics(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances) {
  return ComputeWaitMetrics(info, instances, MeasureInstances(instances, SkewThresholdNs(info)));
}

WaitReport ComputeWaitMetrics(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances,
                              const std::vector<InstanceMetrics>& measured) {
  WaitReport rep;
  std::map<uint32_t, size_t> index;
  for (const RankInfo& r : info.ranks) {
    index[r.rank] = rep.ranks.size();
    RankWaitMetrics m;
    m.rank = r.rank;
    m.host = r.host;
    rep.ranks.push_back(m);
  }
  rep.skew_threshold_ns = SkewThresholdNs(info);

  struct TypeAcc {
    uint64_t count = 0, bytes = 0, arrivals = 0;
    double duration = 0, wait = 0, transfer = 0, bus_bytes = 0;
    std::vector<int64_t> skews;
  };
  std::map<uint8_t, TypeAcc> types;
  std::map<uint32_t, int64_t> last_end;  // per rank: end of its previous matched collective
  uint64_t complete_total = 0;
  int64_t run_start = INT64_MAX, run_end = INT64_MIN;
  for (const auto& in : instances) {
    if (!in.complete()) {
      continue;
    }
    ++complete_total;
    int64_t first = INT64_MAX;  // instances are binned by their first arrival
    for (const auto& x : in.arrivals) {
      first = std::min(first, x.start);
    }
    run_start = std::min(run_start, first);
    run_end = std::max(run_end, first);
  }
  // Lateness bins over the span of first arrivals (§4 lateness map).
  LatenessMap& lm = rep.lateness;
  if (complete_total > 0) {
    lm.bins = kLatenessBins;
    lm.start_ns = run_start;
    lm.bin_ns = std::max<int64_t>(1, (run_end - run_start) / kLatenessBins + 1);
  }
  std::vector<std::vector<double>> lateness_sum(rep.ranks.size(), std::vector<double>(lm.bins, 0.0));
  std::vector<std::vector<uint64_t>> lateness_n(rep.ranks.size(), std::vector<uint64_t>(lm.bins, 0));
  lm.times_last.assign(rep.ranks.size(), std::vector<uint64_t>(lm.bins, 0));

  for (size_t k = 0; k < instances.size(); ++k) {
    const CollectiveInstance& in = instances[k];
    if (!in.complete()) {
      ++rep.incomplete;
      if (rep.incomplete_list.size() < kMaxListed) {
        IncompleteInstance ii{in.comm_id, in.seq, in.op, in.comm_size, {}};
        for (const auto& x : in.arrivals) {
          ii.ranks_present.push_back(x.world_rank);
        }
        rep.incomplete_list.push_back(std::move(ii));
      }
      continue;
    }
    ++rep.matched;
    const auto& a = in.arrivals;
    const InstanceMetrics& im = measured[k];
    TypeAcc& t = types[in.op];
    ++t.count;
    t.bytes += in.bytes;
    t.skews.push_back(im.skew_ns);
    t.transfer += static_cast<double>(im.transfer_ns);
    t.bus_bytes += static_cast<double>(in.bytes) * BusBandwidthFactor(in.op, static_cast<uint32_t>(a.size()));
    uint32_t bin =
        lm.bins ? static_cast<uint32_t>(std::min<int64_t>(lm.bins - 1, (im.first_arrival - lm.start_ns) / lm.bin_ns))
                : 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const Arrival& x = a[i];
      size_t ri = index[x.world_rank];
      RankWaitMetrics& m = rep.ranks[ri];
      ++m.instances;
      m.expected_last += 1.0 / static_cast<double>(a.size());
      m.comm_time_ns += x.end - BlockStart(in, x);
      m.wait_time_ns += im.waits[i];
      m.transfer_time_ns += im.transfers[i];
      auto le = last_end.find(x.world_rank);
      int64_t gap = le != last_end.end() ? std::max<int64_t>(0, x.start - le->second) : 0;
      m.compute_before_ns += gap;
      last_end[x.world_rank] = x.end;
      t.duration += static_cast<double>(x.end - BlockStart(in, x));
      ++t.arrivals;
      if (lm.bins && !in.zero_byte()) {  // §2: no one is late to a call that waits for no one
        lateness_sum[ri][bin] += static_cast<double>(x.start - im.first_arrival);
        ++lateness_n[ri][bin];
      }
    }
    t.wait += static_cast<double>(im.total_wait_ns) / static_cast<double>(a.size());
    const Arrival* straggler = im.straggler_index >= 0 ? &a[im.straggler_index] : nullptr;
    if (straggler != nullptr) {
      size_t si = index[straggler->world_rank];
      RankWaitMetrics& s = rep.ranks[si];
      ++s.times_last;
      s.delay_caused_ns += im.delay_caused_ns;
      s.wait_imposed_ns += im.total_wait_ns - im.waits[im.straggler_index];
      if (lm.bins) {
        ++lm.times_last[si][bin];
      }
    }
    // Keep the kWorstInstances largest total waits (a small sorted list; ties keep the earlier).
    WorstInstance w{in.comm_id,
                    in.seq,
                    in.op,
                    in.bytes,
                    im.first_arrival,
                    im.skew_ns,
                    straggler ? static_cast<int64_t>(straggler->world_rank) : -1,
                    im.delay_caused_ns,
                    im.total_wait_ns};
    if (rep.worst.size() < kWorstInstances || w.total_wait_ns > rep.worst.back().total_wait_ns) {
      auto pos = std::upper_bound(
          rep.worst.begin(), rep.worst.end(), w,
          [](const WorstInstance& x, const WorstInstance& y) { return x.total_wait_ns > y.total_wait_ns; });
      rep.worst.insert(pos, w);
      if (rep.worst.size() > kWorstInstances) {
        rep.worst.pop_back();
      }
    }
  }
  lm.mean_lateness_ns.assign(rep.ranks.size(), std::vector<double>(lm.bins, std::numeric_limits<double>::quiet_NaN()));
  for (size_t r = 0; r < rep.ranks.size(); ++r) {
    for (uint32_t b = 0; b < lm.bins; ++b) {
      if (lateness_n[r][b] > 0) {
        lm.mean_lateness_ns[r][b] = lateness_sum[r][b] / static_cast<double>(lateness_n[r][b]);
      }
    }
  }
  for (auto& m : rep.ranks) {
    m.wait_share = m.comm_time_ns > 0 ? static_cast<double>(m.wait_time_ns) / static_cast<double>(m.comm_time_ns) : 0;
  }
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
    tm.mean_transfer_ns = t.count ? t.transfer / static_cast<double>(t.count) : 0;
    // §2 bandwidth over the type: total bytes over total transfer time (nccl-tests' avg-time rule).
    tm.algbw_gbps = t.transfer > 0 ? static_cast<double>(t.bytes) / t.transfer : 0;
    tm.busbw_gbps = t.transfer > 0 ? t.bus_bytes / t.transfer : 0;
    rep.types.push_back(tm);
  }
  return rep;
}

}  // namespace commprof
