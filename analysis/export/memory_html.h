// `commprof export --format memory-html`: the memory timeline as one self-contained page (inline
// CSS, JavaScript and data; nothing from the network). The page holds the timeline's JSON
// (memory_json.h, downsampled to MemoryExportOptions::max_points per chart) in a data script that
// report/assets/memory.js draws as one stacked-area chart per rank and device on a shared time
// axis, with the peak marked and a hover read-out; the peak table is plain HTML and needs no
// script. Every string from the file is HTML-escaped (or JSON with '<' escaped, in the data).
#pragma once

#include <ostream>

#include "analysis/export/memory_json.h"
#include "analysis/metrics/memory_timeline.h"

namespace commprof {

// What `export --format memory-html` downsamples to unless told: about 4 points per 3.6 px bucket
// of the 900 px plot, so that 256 charts stay a page of megabytes, not of hundreds.
inline constexpr size_t kMemoryHtmlDefaultMaxPoints = 1000;

void WriteMemoryTimelineHtml(const MemoryTimeline& t, const MemoryExportOptions& o, std::ostream& out);

}  // namespace commprof
