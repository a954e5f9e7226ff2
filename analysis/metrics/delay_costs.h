// Root causes of waiting: delay costs with propagation, and the replay that estimates what a rank
// costs the job (docs/metrics.md §9 is the authoritative text; the formulas cite it).
//
// Concepts. A *blocked call* is one interval in which a rank waited for others: its part of a
// collective instance (blocking call, or the Wait* that completed a non-blocking one), or the
// point-to-point call (blocking Send/Recv/Sendrecv, or a Wait*) that completed messages. Each has
// *dependencies*: (rank, time) pairs, the moments the others arrived (collective), posted the
// send (Late Sender) or the receive (Late Receiver). From its blocked start b until the latest
// dependency (never past its exit) the rank waits; at each instant t of that wait it waits for
// the dependencies still *missing* (time > t), each charged an equal share (§9.1).
// Propagation: a missing rank that was itself blocked at that instant passes its share on to the
// ranks *it* was waiting for, and so on, until a rank that was running (computing, or moving data)
// is reached: that rank is the *root cause* and the share is its delay cost, *direct* when it was
// the immediate cause, *propagated* otherwise (§9.2).
// The replay (§9.4) re-times every blocked call from its recorded dependencies, with one rank's
// excess compute removed, to estimate the job time that rank costs.
//
// Data: one 48-byte record per blocked call of the job and one 16-byte dependency per participant
// of each instance (shared by its participants) or per message side; per rank an index of its
// calls. Waits are charged per instance (aggregated over its waiters), not per pair of ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/match/collective_instances.h"
#include "analysis/match/p2p_messages.h"
#include "analysis/metrics/wait_metrics.h"

namespace commprof {

// A dependency of a blocked call: the rank at index `rank` of ProfileInfo::ranks arrived (or
// posted) at `time`.
struct SyncDep {
  int64_t time = 0;
  uint32_t rank = 0;
};

// One blocked call of one rank (see the top of this file). Times on the aligned base.
struct SyncCall {
  int64_t arrival = 0;      // the rank's own arrival: blocking entry, or a non-blocking issue
  int64_t block_start = 0;  // b: entry of the call it blocked in
  int64_t exit = 0;         // e
  int64_t excess = 0;       // its compute before `arrival` beyond its partners' median (§9.4)
  uint32_t rank = 0;        // index into ProfileInfo::ranks
  uint32_t dep_begin = 0;   // deps [dep_begin, dep_begin + dep_count) of SyncGraph::deps, by time
  uint32_t dep_count = 0;
  bool collective = false;  // a collective's participant (its tail after the wait is the algorithm's)
};

// Every blocked call of the job with its dependencies, and per rank its calls by blocked start.
struct SyncGraph {
  std::vector<SyncCall> calls;
  std::vector<SyncDep> deps;                     // each call's dependencies, sorted by time
  std::vector<std::vector<uint32_t>> by_rank;    // per rank index: its calls by block_start
  std::vector<std::vector<int64_t>> reach;       // parallel to by_rank: prefix max of the exits
  std::vector<std::vector<int64_t>> excess_sum;  // parallel to by_rank, one longer: prefix sums of excess
  std::vector<int64_t> rank_end;                 // per rank index: end of its last event seen (job end)

  // The end of call c's wait: its latest dependency, within [block_start, exit].
  int64_t WaitEnd(const SyncCall& c) const;
};

// A material lateness of one rank, where it was the immediate cause of waiting (§9.3: the events
// the pattern is read from).
struct CulpritEvent {
  uint32_t rank = 0;        // world rank
  uint64_t comm_id = 0;     // the communicator of the call it was late to
  uint8_t op = 0;           // the call's operation (enum commprof_op_type)
  uint64_t ordinal = 0;     // its place among the rank's calls of that operation on that communicator
  int64_t time_ns = 0;      // its late arrival
  int64_t lateness_ns = 0;  // how long the earliest waiter waited for it
  double cost_ns = 0;       // the waiting it was directly charged there (§9.2)
};

struct RankDelay {
  uint32_t rank = 0;  // world rank
  double direct_ns = 0;
  double propagated_ns = 0;
  double waited_ns = 0;             // its own waiting charged to a root cause
  double unattributed_wait_ns = 0;  // its own waiting charged to nobody (under the clock threshold, §9.1)
  double blocked_ns = 0;            // its time in blocked calls (waiting + transfer)
  double host_wait_ns = 0;          // of waited_ns, in host (MPI) calls: the `wait` time category
  double host_transfer_ns = 0;      // the rest of its analysed host calls: the `transfer` category
  std::vector<std::pair<uint32_t, double>> wait_by_culprit;  // root cause world rank, ns; largest first
  double cost() const { return direct_ns + propagated_ns; }
};

// Per (rank, communicator, operation): how many calls the rank made there (instances; messages it
// posted), for the share of them it was late in (§9.3).
struct RankCommCalls {
  uint32_t rank = 0;  // world rank
  uint64_t comm_id = 0;
  uint8_t op = 0;
  uint64_t calls = 0;
  uint64_t first_ordinal = 0;
  uint64_t last_ordinal = 0;
};

// The delay cost charged in one step to one root cause (docs/metrics.md §10.2): `slot` as
// StepOf gave it, `rank` an index into ProfileInfo::ranks.
struct StepCost {
  uint32_t slot = 0;
  uint32_t rank = 0;
  double ns = 0;
};

// Optional: the step slot in which a wait that began at aligned time `time_ns` on the rank at
// index `rank` falls (UINT32_MAX: none). Given to ComputeDelayCosts, the charges are also summed
// per step slot and root cause (DelayAnalysis::step_costs).
using StepOf = std::function<uint32_t(uint32_t rank, int64_t time_ns)>;

struct DelayAnalysis {
  double total_wait_ns = 0;                  // every wait of every blocked call
  double attributed_ns = 0;                  // of it, charged to a root cause
  double unattributed_ns = 0;                // under the clock threshold, or lost to the depth bound
  std::vector<RankDelay> ranks;              // parallel to ProfileInfo::ranks
  std::vector<CulpritEvent> culprit_events;  // by time
  std::vector<RankCommCalls> comm_calls;     // by (rank, comm, op)
  std::vector<std::pair<uint64_t, std::vector<uint32_t>>> members;  // comm id -> world ranks seen
  std::vector<StepCost> step_costs;                                 // with a StepOf: by (slot, rank), nonzero only
  SyncGraph graph;
};

// §9.1-§9.3 over the instances (measured with `measured`, parallel) and the matched messages
// (P2PMessage::send_call_start / recv_call_start say where each side blocked). With `step_of`,
// each group of waiters' charges go to the step of its earliest waiter's blocked start (§10.2).
DelayAnalysis ComputeDelayCosts(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances,
                                const std::vector<InstanceMetrics>& measured, std::span<const P2PMessage> messages,
                                int64_t skew_threshold_ns, const StepOf& step_of = {});

// §9.4: the replayed end of the job (latest exit of any rank) with the excess of the rank at
// index `corrected` removed (-1: none, the baseline).
int64_t ReplayJobEnd(const SyncGraph& graph, int64_t corrected);

// §9.4: estimated saving in job time had rank index `rank_index` been on time (>= 0): the recorded
// end minus the replayed end with its excess removed.
int64_t EstimateSaving(const SyncGraph& graph, uint32_t rank_index);

}  // namespace commprof
