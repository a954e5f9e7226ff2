// Run-to-run comparison (`commprof diff`, `commprof check --baseline`; docs/metrics.md §13 is
// the authoritative text): every figure both runs have, base against new, with its absolute and
// relative change, the noise guard's judgement and, under a regression gate, whether it regressed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/compare/run_summary.h"
#include "core/status.h"

namespace commprof {

// The gate: `--max-regression P%` (every metric) and `--max-regression METRIC=P%` (one metric;
// it overrides the former). Limits are fractions (10% -> 0.10).
struct RegressionGate {
  std::optional<double> all;
  std::map<std::string, double> per_metric;
  bool empty() const { return !all && per_metric.empty(); }
  // The limit for `metric`, if any. The limit for every metric applies only to rows the noise
  // guard can judge (`guarded`): a blanket CI gate must not fail on a change it cannot tell from
  // noise (a name called once, a tail). A limit named for the metric applies to all its rows.
  std::optional<double> LimitFor(const std::string& metric, bool guarded) const;
};

// The metrics a gate may name (those that can regress), in the order docs/metrics.md §13.1 lists them.
const std::vector<std::string>& GateMetrics();

// Parses the --max-regression values into `gate`. An error names the bad value (InvalidArgument):
// not P% or METRIC=P% with P a finite number >= 0, or an unknown metric (the message lists them).
Status ParseRegressionGate(const std::vector<std::string>& specs, RegressionGate& gate);

enum class DiffStatus : uint8_t {
  kUnchanged,  // the same value
  kNoise,      // changed, within the base's own spread (§13.2)
  kBetter,     // changed the good way
  kWorse,      // changed the bad way, not past a gate limit (or no limit for it)
  kRegressed,  // changed the bad way past its gate limit
  kChanged,    // a figure with no better or worse (a count)
  kAdded,      // only in the new run
  kRemoved,    // only in the base run
};
const char* DiffStatusName(DiffStatus s);  // "unchanged", "noise", ...

// Which repetitions the noise guard used: per step, per call, or none (fewer than
// kMinRepetitions in the base, a tail figure, or a row in one run only).
enum class GuardBasis : uint8_t { kNone, kCalls, kSteps };
const char* GuardBasisName(GuardBasis b);  // "none", "calls", "steps"

struct DiffRow {
  std::string group, row, metric, unit;
  Worse worse = Worse::kHigher;
  std::optional<double> base, next;  // absent: the row is in the other run only
  double change = 0;                 // next - base (both present)
  std::optional<double> relative;    // change / |base|; absent with base 0 or a missing side
  GuardBasis basis = GuardBasis::kNone;
  Repetitions base_reps, next_reps;  // what the guard compared (basis != kNone)
  std::optional<double> limit;       // the gate's limit for the metric
  DiffStatus status = DiffStatus::kUnchanged;
};

struct RunDiff {
  std::string base_path, next_path;
  double noise_floor_ns = 0;    // the floor the guard used (§13.2)
  bool steps_compared = false;  // both runs have steps: the guard uses per-step repetitions
  std::vector<DiffRow> rows;    // largest relative change first (§13.3)
  size_t regressions = 0;
};

// Compares two summaries under `gate` (an empty gate: nothing is a regression) with the noise
// guard's floor `noise_floor_ns` (applied to the repetitions measured in ns).
RunDiff DiffRuns(const RunSummary& base, const RunSummary& next, const RegressionGate& gate,
                 double noise_floor_ns = kDefaultNoiseFloorNs);

// A duration with an optional unit ("100us", "1.5ms", "2s", "500" = ns) -> ns; nullopt when
// malformed or negative.
std::optional<double> ParseDurationNs(const std::string& s);
// The ns in one unit of a duration's suffix: "" and "ns" 1, "us" 1e3, "ms" 1e6, "s" 1e9; 0 for
// anything else. Also what `check --max METRIC=VALUE` takes after a duration metric's number.
double DurationUnitNs(std::string_view suffix);

}  // namespace commprof
