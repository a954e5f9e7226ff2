// The views of a RunDiff: the terminal table (100 columns), the regression lines a gate prints,
// and the versioned JSON document (schema "commprof-diff", docs/diff-json.md).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "analysis/compare/run_diff.h"

namespace commprof {

inline constexpr const char* kDiffSchemaName = "commprof-diff";
inline constexpr int kDiffSchemaVersion = 1;

// A value with its unit for people: "12.3 ms", "4.56 GB/s", "100 calls".
std::string FormatDiffValue(double v, const std::string& unit);

// "type MPI_Bcast total_time: 1.20 ms -> 25.1 ms (+24.0 ms, +1990.0%; max +10.0%)": one
// regressed row, as `diff` and `check --baseline` print it.
std::string FormatRegression(const DiffRow& row);

// The header, the regressions (one line each) and the `top` rows of largest relative change
// (0: all), every line at most 100 columns.
void WriteDiffText(const RunDiff& diff, size_t top, std::ostream& os);

nlohmann::ordered_json DiffToJson(const RunDiff& diff, const RegressionGate& gate);

}  // namespace commprof
