// `commprof stats` output (docs/cli.md, docs/stats-json.md): sorting the rows of ComputeOpStats
// by a named column, and writing them as an aligned text table of at most 100 columns, as CSV
// (raw ns, a header row) or as the versioned JSON document.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/metrics/op_stats.h"

namespace commprof {

inline constexpr int kStatsJsonVersion = 1;
inline constexpr size_t kStatsTextWidth = 100;

// The keys --sort accepts: the text table's column headers and the CSV's longer names.
const std::vector<std::string>& StatsSortKeys();
// Sorts in place: numbers largest first, names alphabetically, ties by total then name. False
// (rows untouched) for a key StatsSortKeys() does not hold.
bool SortStatsRows(std::vector<OpStatsRow>& rows, const std::string& key);

// What the document says about how it was made.
struct StatsContext {
  std::string path;
  std::optional<uint64_t> window;
  StatsOptions options;
  std::string sort = "total";
  size_t top = 0;                   // 0: every row
  size_t rows_total = 0;            // before --top
  std::vector<std::string> faults;  // the parts of the file left out, one line each
};

// "12.3us" style: 3 significant digits, at most 6 characters below 100000 s.
std::string FormatStatsTime(double ns);
// Cuts `s` to `width` characters with "..." in the middle (kernel names keep both ends).
std::string ElideMiddle(const std::string& s, size_t width);
// ElideMiddle of each name, except where two different names would print the same: those show
// their start, "...", and the part around where they first differ from the others (a kernel's
// template arguments, say), and "#k" last if that is still not enough. Equal names stay equal;
// every result fits `width` (at least 16) characters.
std::vector<std::string> ElideDistinct(const std::vector<std::string>& names, size_t width);

void WriteStatsText(const OpStats& stats, const std::vector<OpStatsRow>& shown, const StatsContext& ctx,
                    std::ostream& os);
void WriteStatsCsv(const std::vector<OpStatsRow>& shown, std::ostream& os);
nlohmann::ordered_json StatsToJson(const OpStats& stats, const std::vector<OpStatsRow>& shown, const StatsContext& ctx);

}  // namespace commprof
