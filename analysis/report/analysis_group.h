// The HDF5 file's `/analysis` group (docs/file-format.md §Analysis group): the JobReport's
// per-rank, per-collective-type and per-instance figures as tables h5py reads directly, and the
// whole JSON report beside them. `commprof run` and `commprof merge` write it when the file is
// finalized; `commprof report --save` rewrites it (an older group is replaced).
#pragma once

#include <string>

#include "analysis/report/job_report.h"
#include "core/status.h"

namespace commprof {

inline constexpr uint64_t kAnalysisGroupVersion = 1;

Status WriteAnalysisGroup(const std::string& path, const JobReport& report);

}  // namespace commprof
