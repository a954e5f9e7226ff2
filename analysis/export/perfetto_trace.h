// Perfetto's native protobuf trace of a whole job (docs/perfetto-trace.md is the user-facing
// contract).
//
// Purpose: the merged timeline (timeline_walk.h) in the format Perfetto reads best: a fraction of
// the JSON's bytes, written faster, and loaded by the UI without the JSON importer's limits.
// Concepts: the file is a Trace: a stream of TracePackets. A process track per rank (pid =
// rank + 1), a named child track per lane and per memory counter series; one packet sequence per
// track, whose first packet clears the sequence's incremental state and sets its defaults (the
// track, and a sequence-scoped incremental clock so that each timestamp is the ns since the
// previous packet's); names, categories, argument names and argument strings interned per
// sequence. A slice is a BEGIN/END pair, an instant an INSTANT, a counter sample a COUNTER event.
// A flow links the last arriver's slice (the id on its BEGIN) to each other participant's (the id
// on its END: the walk keeps a flow only when the last arrival falls inside that slice, so the
// arrow runs forward in time). Timestamps are the aligned ns since the origin on
// the trace's default clock; the origin and the job's facts are the arguments of a "commprof
// trace" instant at the start.
// Operation: written as the walk goes through a fixed-size buffer; per track only the stack of
// open slices is held (their ENDs wait until time reaches them).
#pragma once

#include <ostream>

#include "analysis/export/timeline_walk.h"
#include "analysis/load/profile_reader.h"
#include "core/status.h"

namespace commprof {

// Writes the protobuf trace of `reader`'s file to `out`. Errors as WriteChromeTrace's.
Status WritePerfettoTrace(const ProfileReader& reader, std::ostream& out, const TraceExportOptions& opts,
                          TraceExportStats* stats);

}  // namespace commprof
