// Wait and straggler metrics over matched blocking collectives (docs/metrics.md is the
// authoritative text; the formulas here cite its sections).
//
// Per instance (§2): arrival a_r = entry, last arrival L = max a_r, skew = L - min a_r;
// wait_r = L - a_r for all-to-all collectives; rooted ones charge only the side that waits
// (Bcast/Scatter: non-roots wait max(0, a_root - a_r); Reduce/Gather: the root waits L - a_root);
// the last arriver is the straggler of the instance when skew exceeds the threshold, and the delay
// it alone caused is L minus the second-latest arrival.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/match/collective_instances.h"

namespace commprof {

// Whom a participant waits for in a collective (docs/metrics.md §2): every other participant, the
// root only, the lower ranks of the communicator (Scan: 0..i, Exscan: 0..i-1), or nobody.
enum class WaitDeps : uint8_t { kNone = 0, kAll, kRoot, kPrefix, kPrefixExclusive };

// One matched instance, measured (docs/metrics.md §2). Vectors run parallel to the instance's
// arrivals (sorted by world rank).
struct InstanceMetrics {
  int64_t first_arrival = 0;
  int64_t last_arrival = 0;        // L
  int64_t second_arrival = 0;      // second-latest arrival (== L with one participant)
  int64_t skew_ns = 0;             // L - first arrival
  int64_t last_end = 0;            // latest exit
  int32_t last_index = -1;         // index of the last arriver in `arrivals`
  int32_t straggler_index = -1;    // last_index when skew exceeds the threshold (§3), else -1
  int64_t delay_caused_ns = 0;     // L - second-latest arrival, when there is a straggler
  int64_t total_wait_ns = 0;       // sum of waits
  int64_t transfer_ns = 0;         // latest exit - L (§2: the data movement once all had arrived)
  double algbw_gbps = 0;           // bytes / transfer_ns (GB/s = 1e9 bytes/s); 0 when transfer is 0
  double busbw_gbps = 0;           // algbw x the nccl-tests factor for the type and size
  std::vector<int64_t> waits;      // wait_r: from the rank's blocked start, the time it waited (§2)
  std::vector<int64_t> transfers;  // transfer_r: the rest of its blocked time in the call (§2)
  std::vector<WaitDeps> deps;      // whom the rank depends on in the call (it waited when wait_r > 0)
};

// The time a participant was blocked in the call for this instance: from `block_start` (a
// blocking call's entry, the completing Wait*'s entry of a non-blocking one) to its exit.
inline int64_t BlockStart(const CollectiveInstance& in, const Arrival& a) {
  return in.nonblocking ? a.block_start : a.start;
}

// Measures one instance. `skew_threshold_ns`: §3 (WaitReport::skew_threshold_ns).
InstanceMetrics MeasureInstance(const CollectiveInstance& in, int64_t skew_threshold_ns);

// Every instance measured once, in order (incomplete ones too: the /analysis tables list them).
// The wait metrics, the /analysis tables and the Chrome export all read these, so an analysis run
// measures each instance exactly once.
std::vector<InstanceMetrics> MeasureInstances(const std::vector<CollectiveInstance>& instances,
                                              int64_t skew_threshold_ns);

// The nccl-tests bus-bandwidth factor (docs/metrics.md §2): AllReduce 2(n-1)/n; AllGather,
// ReduceScatter, AlltoAll (n-1)/n; Broadcast, Reduce, Gather, Scatter 1; others 1.
double BusBandwidthFactor(uint8_t op, uint32_t n);

// §3: max(1 us, twice the largest clock error bound of the job).
int64_t SkewThresholdNs(const ProfileInfo& info);

struct RankWaitMetrics {
  uint32_t rank = 0;
  std::string host;
  uint64_t instances = 0;
  int64_t comm_time_ns = 0;       // sum of the rank's blocked time in matched collectives (§4)
  int64_t wait_time_ns = 0;       // sum of wait_r
  double wait_share = 0.0;        // wait_time / comm_time
  uint64_t times_last = 0;        // instances where it was the straggler
  int64_t delay_caused_ns = 0;    // sum of the delay it alone caused
  int64_t wait_imposed_ns = 0;    // sum of the others' waits in the instances where it was last
  int64_t compute_before_ns = 0;  // sum of the gaps before its entries (time outside these calls)
  int64_t transfer_time_ns = 0;   // sum of transfer_r
  double expected_last = 0;       // times it would be last by chance: sum of 1 / participants
};

struct TypeWaitMetrics {
  uint8_t op = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;  // mean bytes per instance
  double mean_duration_ns = 0;
  double mean_wait_ns = 0;
  int64_t skew_p50_ns = 0;
  int64_t skew_p99_ns = 0;
  double mean_transfer_ns = 0;  // mean over instances of InstanceMetrics::transfer_ns
  double algbw_gbps = 0;        // sum of bytes / sum of transfer (GB/s)
  double busbw_gbps = 0;        // sum of bytes x factor / sum of transfer (GB/s)
};

// An instance of the worst list: the largest total wait.
struct WorstInstance {
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  uint8_t op = 0;
  uint64_t bytes = 0;
  int64_t start_ns = 0;  // first arrival
  int64_t skew_ns = 0;
  int64_t last_rank = -1;  // world rank of the straggler, -1 when the skew is under the threshold
  int64_t delay_caused_ns = 0;
  int64_t total_wait_ns = 0;
};

// An instance missing ranks (listed, never dropped silently).
struct IncompleteInstance {
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  uint8_t op = 0;
  uint32_t comm_size = 0;  // 0: the communicator's creation was not seen
  std::vector<uint32_t> ranks_present;
};

// Lateness over time (the report's heat map): the run split into equal bins by first arrival;
// per rank and bin, the mean of a_r - min a over its instances there (NaN: none) and the number of
// instances where it was the straggler.
struct LatenessMap {
  int64_t start_ns = 0;
  int64_t bin_ns = 0;
  uint32_t bins = 0;
  std::vector<std::vector<double>> mean_lateness_ns;  // [rank index][bin]
  std::vector<std::vector<uint64_t>> times_last;      // [rank index][bin]
};

struct WaitReport {
  uint64_t matched = 0;                             // complete instances
  uint64_t incomplete = 0;                          // instances missing a rank
  std::vector<IncompleteInstance> incomplete_list;  // the first kMaxListed of them
  std::vector<WorstInstance> worst;                 // up to kWorstInstances, largest total wait first
  LatenessMap lateness;
  int64_t skew_threshold_ns = 0;
  std::vector<RankWaitMetrics> ranks;
  std::vector<TypeWaitMetrics> types;
};

inline constexpr size_t kMaxListed = 100;
inline constexpr size_t kWorstInstances = 10;
inline constexpr uint32_t kLatenessBins = 40;

// Upper tail of the binomial distribution: P(X >= k) for X ~ B(n, p).
double BinomialTail(uint64_t n, uint64_t k, double p);

// `measured` runs parallel to `instances`, measured with SkewThresholdNs(info) (MeasureInstances).
WaitReport ComputeWaitMetrics(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances,
                              const std::vector<InstanceMetrics>& measured);
// The same, measuring the instances itself (for callers that need no per-instance figures).
WaitReport ComputeWaitMetrics(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances);

}  // namespace commprof
