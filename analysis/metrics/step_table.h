// Training steps across ranks (docs/metrics.md §10 is the authoritative text).
//
// Purpose: per step N of the job, how long it took on each rank, how much of it was collective
// communication and waiting, and which rank's lateness cost it the most.
// Concepts. A rank's *step marks* are its kind STEP events (step N begins at start_ns; seq = N)
// and its kind WINDOW events (capture windows). A rank's *step interval* of step N runs from its
// mark to end_ns when the mark has one (an imported ProfilerStep#N range), else to the first of:
// the rank's next mark, the end of the capture window it began in; else (its last step) to the
// end of its last event before MPI_Finalize. Steps are matched across ranks by number: step N of rank 0 with
// step N of rank 3. A collective instance belongs, on each rank, to the step interval containing
// that rank's arrival; a delay-cost charge (§9.1-§9.2) to the step interval, on the rank that
// waited first, containing the moment its wait began.
// Data: per rank its intervals sorted by start (aligned), one slot per distinct step number; the
// table holds one row per step and, in it, one entry per rank that marked it.
// Operation: the marks are gathered during the collective-matching read (AddStepMarks), the model
// is built before the delay costs (which then sum their charges per step slot), and the table
// once every per-instance figure is known.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/match/collective_instances.h"
#include "analysis/metrics/delay_costs.h"
#include "analysis/metrics/wait_metrics.h"

namespace commprof {

// What one rank's events say about its steps: gathered chunk by chunk, in any row order.
struct RankStepMarks {
  std::vector<commprof_event> steps;    // kind STEP
  std::vector<commprof_event> windows;  // kind WINDOW
  int64_t last_end = -1;                // latest end of any other event but MPI_Finalize (-1: none)
  int64_t finalize_start = -1;          // entry of MPI_Finalize (-1: none)
};

// Adds the chunk's step marks, windows and times to `marks`.
void AddStepMarks(std::span<const commprof_event> chunk, RankStepMarks& marks);

// One step interval of one rank, on the aligned time base.
struct RankStep {
  uint64_t step = 0;
  int64_t start_ns = 0;     // aligned
  int64_t end_ns = 0;       // aligned
  int64_t duration_ns = 0;  // on the rank's own clock
  int64_t window = -1;      // index of the capture window it began in (-1: none)
  uint8_t source = 0;       // enum commprof_step_source
  uint32_t slot = 0;        // index into StepModel::numbers
};

struct StepModel {
  std::vector<uint64_t> numbers;             // slot -> step number, ascending
  std::vector<std::vector<RankStep>> ranks;  // per index of ProfileInfo::ranks, by start
  bool empty() const { return numbers.empty(); }
  // The slot of the step interval of rank index `rank` that contains aligned time `t`
  // (UINT32_MAX: none).
  uint32_t SlotAt(uint32_t rank, int64_t t) const;
};

// `marks` runs parallel to info.ranks.
StepModel BuildStepModel(const ProfileInfo& info, const std::vector<RankStepMarks>& marks);

// One rank's figures in one step.
struct StepRankFigures {
  uint32_t rank = 0;         // world rank
  int64_t duration_ns = 0;   // its step interval(s) of that number, summed
  int64_t comm_ns = 0;       // its blocked time in complete collectives it arrived at in the step (§2)
  int64_t wait_ns = 0;       // of which waiting (§2 wait_r)
  double delay_cost_ns = 0;  // delay cost (§9.2) charged to it as root cause in the step
};

struct StepRow {
  uint64_t step = 0;
  int64_t window = -1;                 // the capture window of its first rank's interval (-1: none)
  int64_t start_ns = 0;                // earliest aligned start over the ranks
  std::vector<StepRankFigures> ranks;  // by world rank, the ranks that marked it
  int64_t min_ns = 0, max_ns = 0;      // over the ranks' durations; max is the step's time
  double mean_ns = 0;
  double imbalance = 0;              // (max - mean) / max, 0 with one rank or max 0
  int64_t comm_ns = 0, wait_ns = 0;  // summed over its ranks
  double attributed_ns = 0;          // the delay costs charged in it, summed over the root causes
  int64_t straggler = -1;            // world rank (§10.3), -1: none
  double straggler_cost_ns = 0;      // the delay cost charged to the largest root cause
  int64_t top_rank = -1;             // that root cause, named or not (-1: no waiting charged)
};

struct StepSummary {
  uint64_t steps = 0;
  int64_t p50_ns = 0, p99_ns = 0, max_ns = 0;  // of the steps' times (nearest rank)
  double mean_ns = 0;
  uint64_t slowest_step = 0;
  uint64_t with_straggler = 0;
};

struct StepTable {
  std::vector<StepRow> steps;  // by step number
  StepSummary summary;
};

// The rule's constants (§10.3).
inline constexpr double kStepDominantShare = 0.5;   // of the step's attributed waiting
inline constexpr double kStepMaterialShare = 0.10;  // of the step's rank-time (sum of durations)
inline constexpr double kStepStandOut = 3.0;        // x the median over steps of the other ranks' largest cost

// The table of §10. `instances`/`measured` parallel (AnalyzeJob's); `delay` with step costs
// computed against `model` (DelayAnalysis::step_costs).
StepTable BuildStepTable(const ProfileInfo& info, const StepModel& model,
                         const std::vector<CollectiveInstance>& instances, const std::vector<InstanceMetrics>& measured,
                         const DelayAnalysis& delay);

}  // namespace commprof
