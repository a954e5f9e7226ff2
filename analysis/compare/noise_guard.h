// The noise guard of `commprof diff` (docs/metrics.md §13.2 is the authoritative text).
//
// A metric's *repetitions* are the values it takes once per call (or per step) in one run: the
// spread of the base run's own repetitions says how much the metric moves when nothing changed.
// A change is *within noise* when the new run's median repetition lies inside [p10, p90] of the
// base's repetitions. Fewer than kMinRepetitions base repetitions give no guard (too few to
// speak of a spread). Only these four numbers of each sample are kept, so a compared row holds
// a fixed amount of memory however many calls the runs made.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace commprof {

inline constexpr uint64_t kMinRepetitions = 5;

// What the guard keeps of one run's repetitions of one metric (nearest-rank quantiles, §4).
struct Repetitions {
  uint64_t n = 0;
  double p10 = 0, p50 = 0, p90 = 0;
  double min = 0, max = 0;
};

// The quantiles of `values` (consumed: sorted in place).
Repetitions SummarizeRepetitions(std::vector<double>& values);

// The noise floor's default: on a shared machine a process waits for a time slice (milliseconds
// when the cores are oversubscribed) at any call, so two runs' per-call times differ by tens of
// microseconds even when one run's own calls are as regular as a clock. A median that moved by
// less than the floor beyond the base's spread is noise (§13.2); `--noise-floor` sets it.
inline constexpr double kDefaultNoiseFloorNs = 100'000;

// True when the base has a spread to judge by (n >= kMinRepetitions) and the new run's median
// lies inside it widened by `floor` on both sides, both ends included.
bool WithinNoise(const Repetitions& base, const Repetitions& next, double floor = 0);

// One new value (a single step's time) against the base's repetitions: there is no median to
// take of one value, and a run's own steps fall outside its [p10, p90] a fifth of the time, so
// the spread of one value is the base's whole range [min, max] (needs kMinRepetitions too).
bool SingleWithinNoise(const Repetitions& base, double next, double floor = 0);

// (next - base) / |base|: nullopt when base is 0 (a change from nothing has no ratio); 0 when
// both are 0.
std::optional<double> RelativeChange(double base, double next);

}  // namespace commprof
