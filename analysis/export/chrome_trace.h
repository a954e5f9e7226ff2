// Chrome / Perfetto JSON trace of a whole job (docs/chrome-trace.md is the user-facing contract).
//
// Purpose: one merged timeline of every rank, opened by ui.perfetto.dev and chrome://tracing.
// Concepts: one trace *process* per rank (pid = rank + 1: pid 0 means "idle" to some viewers);
// one *track* per host thread (the event's thread_id) or GPU stream (device, thread_id); a track
// whose slices overlap partially is split into *lanes* (extra tids, LaneAssigner), so every
// (pid, tid) holds slices that nest or are disjoint; *flows* link each matched blocking
// collective instance from the last arriver's slice to every other participant's slice.
// Time: every event is placed on the job's reference clock with its rank's clock model, then
// made relative to the earliest aligned event of the exported ranks (the *origin*); ts and dur are
// that integer ns count printed as microseconds with exactly three decimals, so no precision is
// lost. The origin's UTC time is in the trace's metadata.
// Operation, bounded memory: the instance table (LoadCollectiveInstances, measured once with
// MeasureInstances, the figures the report uses) is built first; a pass over the events finds the origin; then each
// rank in turn is loaded (its events and string table only), sorted per track, split into lanes and written at once
// through a fixed-size buffer. No JSON document of the trace is ever built.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "core/status.h"

namespace commprof {

struct ChromeExportProgress {
  uint32_t ranks_done = 0;
  uint32_t ranks_total = 0;
  uint64_t events_written = 0;
  uint64_t bytes_written = 0;
};

struct ChromeExportOptions {
  std::vector<uint32_t> ranks;         // ranks to export; empty: all of them. A rank not in the file is an error.
  std::string output_name = "output";  // names the output in error messages
  // Called after each rank and about every million events; may be empty.
  std::function<void(const ChromeExportProgress&)> progress;
};

struct ChromeExportStats {
  uint32_t ranks = 0;
  uint64_t events = 0;  // slices ("X") and instants ("i") written, one per recorded event
  uint64_t slices = 0;
  uint64_t instants = 0;
  uint64_t tracks = 0;              // distinct (rank, device, thread or stream) tracks, lanes not counted
  uint64_t lanes_added = 0;         // extra tids beyond one per track
  uint64_t flows = 0;               // arrows (one "s" and one "f" event each)
  uint64_t counters = 0;            // counter samples ("C"): memory in use
  uint64_t bytes = 0;               // JSON bytes written
  int64_t origin_reference_ns = 0;  // ts 0 on the reference clock
};

// Writes the trace of `reader`'s file to `out`. Errors name the input file, or
// `opts.output_name` when writing fails; `stats` (may be null) is filled as far as it got.
Status WriteChromeTrace(const ProfileReader& reader, std::ostream& out, const ChromeExportOptions& opts,
                        ChromeExportStats* stats);

// Appends `s` to `out` as the inside of a JSON string: '"' and '\' escaped, control characters as
// \n \t \r \b \f or \u00XX, valid UTF-8 copied, and each maximal ill-formed subsequence (the
// WHATWG / Unicode "maximal subpart" rule, as Python's errors="replace") replaced by U+FFFD.
void AppendJsonEscaped(std::string& out, std::string_view s);

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
