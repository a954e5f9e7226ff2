// `commprof export --format chrome|perfetto` as an MPI job (docs/scale.md#distributed-analysis):
// every process writes the trace of one contiguous block of the exported ranks, and the blocks go
// into the output one after the other (written there by their own processes where they see the
// first's output file, else through the first), which is the one-process trace byte for byte.
#pragma once

#include <string>

#include "analysis/export/timeline_walk.h"
#include "analysis/load/profile_reader.h"
#include "cli/analysis_world.h"

namespace commprof::cli {

enum class TraceFormat { kChrome, kPerfetto };

// The trace of `reader` in `format`, written by this process alone (WriteChromeTrace,
// WritePerfettoTrace); `stats` may be null.
Status WriteTrace(TraceFormat format, const ProfileReader& reader, std::ostream& out, const TraceExportOptions& opts,
                  TraceExportStats* stats);

// Writes the trace of `reader` (every process read the same file, screened alike) to `output`
// ('-': stdout) together with the other processes of `world`. On the first process returns what
// the export came to (the write's error, or the first failing block's, in rank order) with `stats`
// the whole trace's; on the others, the status of their own block. Each process after the first
// holds its block in a file in its temporary directory ($TMPDIR, else /tmp) until its place in the
// output is known.
Status WriteTraceTogether(AnalysisWorld& world, const ProfileReader& reader, const TraceExportOptions& opts,
                          TraceFormat format, const std::string& output, TraceExportStats& stats);

}  // namespace commprof::cli
