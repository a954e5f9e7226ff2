// The /hang group of a commprof file (docs/file-format.md): a live hang diagnosis, stored by the
// aggregator while the job still runs.
#pragma once

#include <hdf5.h>

#include "analysis/hang/hang_diagnosis.h"
#include "core/status.h"

namespace commprof::hang {

// Writes (or replaces) /hang in the open `file`: the input the diagnosis saw and its report.
Status WriteHangGroup(hid_t file, const HangInput& input, const HangReport& report);

}  // namespace commprof::hang
