// The straggler verdict (docs/metrics.md §9.3): every rank whose delay cost is a material share of
// the job's waiting, ranked by delay cost, each with where its lateness entered, its pattern
// (persistent, periodic, transient), a cause hint and the job time it costs (§9.4).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/match/collective_instances.h"
#include "analysis/metrics/delay_costs.h"

namespace commprof {

struct StragglerCommunicator {
  uint64_t comm_id = 0;
  std::string name;  // "MPI_COMM_WORLD", "MPI communicator <id>", "NCCL communicator <hash>"
  uint32_t size = 0;
  std::vector<uint32_t> members;  // world ranks
  double delay_cost_ns = 0;       // the waiting it directly caused there
};

struct Straggler {
  uint32_t rank = 0;  // world rank
  std::string host;
  int32_t device = -1;  // GPU ordinal where known
  double delay_cost_ns = 0;
  double direct_ns = 0;
  double propagated_ns = 0;
  double share = 0;  // of the job's attributed waiting
  int64_t saving_ns = 0;
  std::string pattern;              // "persistent" | "periodic" | "transient"
  uint64_t period_every = 0;        // periodic: late every K-th call on its main communicator
  int64_t typical_lateness_ns = 0;  // median lateness of its late calls
  int64_t window_start_ns = 0;      // transient: first and last late call
  int64_t window_end_ns = 0;
  std::vector<StragglerCommunicator> communicators;  // largest cost first
  std::string cause;                                 // "compute" | "transfer"
  uint64_t late_instances = 0;                       // calls where it was materially late
};

// The rule's constants (§9.3).
inline constexpr double kMaterialShare = 0.10;   // of the job's attributed waiting
inline constexpr double kStandsOutFactor = 3.0;  // over the ranks' lower-quartile delay cost
inline constexpr double kJobShare = 0.10;        // of the other ranks' mean blocked time
inline constexpr size_t kMaxReplays = 8;         // savings are estimated for at most this many ranks

// Judges the ranks of `delay` (computed over `instances`), estimating each named rank's saving
// with the replay (at most kMaxReplays of them).
std::vector<Straggler> JudgeStragglers(const ProfileInfo& info, const std::vector<CollectiveInstance>& instances,
                                       const DelayAnalysis& delay);

}  // namespace commprof
