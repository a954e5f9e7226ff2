// Chrome / Perfetto JSON trace of a whole job (docs/chrome-trace.md is the user-facing contract).
//
// Purpose: one merged timeline of every rank, opened by ui.perfetto.dev and chrome://tracing.
// What the timeline holds (processes, tracks, lanes, flows, counters, the origin, a cut) is
// decided by the walk (timeline_walk.h); this is its JSON spelling: pid = rank + 1 (pid 0 means
// "idle" to some viewers), one tid per lane, flows as "s"/"f" pairs, counters as "C" events.
// Time: ts and dur are the walk's integer ns since the origin printed as microseconds with exactly
// three decimals, so no precision is lost. The origin's UTC time is in the trace's metadata.
// Operation: written as the walk goes, through a fixed-size buffer; no JSON document is built.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/export/timeline_walk.h"
#include "analysis/export/utf8_text.h"
#include "analysis/load/profile_reader.h"
#include "core/status.h"

namespace commprof {

// Writes the trace of `reader`'s file to `out`. Errors name the input file, or
// `opts.output_name` when writing fails; `stats` (may be null) is filled as far as it got.
Status WriteChromeTrace(const ProfileReader& reader, std::ostream& out, const TraceExportOptions& opts,
                        TraceExportStats* stats);

// `ns` as decimal microseconds with exactly three decimals ("-1.005", "0.000", "12.345"),
// computed on integers.
void AppendMicros(std::string& out, int64_t ns);

// How a trace reader turns the printed microseconds of `ns` back into ns. Perfetto's JSON importer
// multiplies the parsed double by 1000 and truncates, so it sees about 1% of values 1 ns early;
// the lane split keeps slices nested in these views too (docs/chrome-trace.md, "Precision").
enum class MicrosReader {
  kExact,           // integer arithmetic on the text (Python with parse_float=str, ours)
  kStrtodTruncate,  // correctly rounded strtod, x 1000, truncate (Perfetto with jsoncpp)
  kDigitsTruncate,  // integer part + fraction / 1000 in doubles, x 1000, truncate (Perfetto's own parser)
};
int64_t ReadBackNs(int64_t ns, MicrosReader reader);

}  // namespace commprof
