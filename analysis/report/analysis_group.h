// The HDF5 file's `/analysis` group (docs/file-format.md §Analysis group): the JobReport's
// per-rank, per-collective-type and per-instance figures as tables h5py reads directly, and the
// whole JSON report beside them. `commprof run` and `commprof merge` write it when the file is
// finalized; `commprof report --save` rewrites it (an older group is replaced).
#pragma once

#include <string>
#include <vector>

#include "analysis/report/job_report.h"
#include "core/schema/analysis_tables.h"
#include "core/status.h"

namespace commprof {

// The group's layout (tables, columns, attributes) is core/schema/analysis_tables.h.
inline constexpr uint64_t kAnalysisGroupVersion = schema::kAnalysisVersion;

Status WriteAnalysisGroup(const std::string& path, const JobReport& report);

// Reads one `/analysis` table (Row: schema::RankRow, CollectiveRow, InstanceRow, ArrivalRow or
// MemoryRow) through the compound type the schema gives it (HDF5 matches the columns by name).
// NotFound when the file has no such table.
template <typename Row>
Result<std::vector<Row>> ReadAnalysisTable(const std::string& path);

}  // namespace commprof
