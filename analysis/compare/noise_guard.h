// The noise guard of `commprof diff` (docs/metrics.md §13.2 is the authoritative text).
//
// A metric's *repetitions* are the values it takes once per call (or per step) in one run: the
// spread of the base run's own repetitions says how much the metric moves when nothing changed.
// A change is *within noise* when the new run's median repetition lies inside [p10, p90] of the
// base's repetitions and (for a collective type) the mean of its middle half (p25 to p75) moved by
// no more than that spread's width, each widened by the floor. Fewer than
// kMinRepetitions base repetitions give no guard (too few to speak of a spread). Only these
// numbers of each sample are kept, so a compared row holds a fixed amount of memory however many
// calls the runs made.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace commprof {

inline constexpr uint64_t kMinRepetitions = 5;

// What the guard keeps of one run's repetitions of one metric (nearest-rank quantiles, §4).
struct Repetitions {
  uint64_t n = 0;
  double p10 = 0, p50 = 0, p90 = 0;
  double min = 0, max = 0;
  // The mean of the middle repetitions (from the p25-th to the p75-th, both included); NaN where
  // not known or not used (a name row's spread comes from the stats' quantiles; a rank row's
  // guard is its median alone: run_diff.cc says why).
  double mid_mean = std::numeric_limits<double>::quiet_NaN();
};

// The quantiles of `values` (consumed: sorted in place).
Repetitions SummarizeRepetitions(std::vector<double>& values);

// The noise floor's default: on a shared machine a process waits for a time slice (milliseconds
// when the cores are oversubscribed) at any call, so two runs' per-call times differ by tens of
// microseconds even when one run's own calls are as regular as a clock. A median that moved by
// less than the floor beyond the base's spread is noise (§13.2); `--noise-floor` sets it.
inline constexpr double kDefaultNoiseFloorNs = 100'000;

// True when the base has a spread to judge by (n >= kMinRepetitions), the new run's median lies
// inside it widened by `floor` on both sides, and the new mid-mean (where both are known) is
// within p90 - p10 + `floor` of the base's, both ends included. The median alone misses a shift
// of half the calls (nearest-rank p50 is then the last fast one).
bool WithinNoise(const Repetitions& base, const Repetitions& next, double floor = 0);

// One new value (a single step's time) against the base's repetitions: there is no median to
// take of one value, and a run's own steps fall outside its [p10, p90] a fifth of the time, so
// the spread of one value is the base's whole range [min, max] (needs kMinRepetitions too).
bool SingleWithinNoise(const Repetitions& base, double next, double floor = 0);

// (next - base) / |base|: nullopt when base is 0 (a change from nothing has no ratio); 0 when
// both are 0.
std::optional<double> RelativeChange(double base, double next);

}  // namespace commprof
