// The terminal form of the report model: header, per-collective table, per-rank table, worst
// instances, incomplete instances, overlap, memory, point-to-point and the verdict; every line but
// the first (the path) fits 100 columns.
#pragma once

#include <ostream>

#include "analysis/report/report_model.h"

namespace commprof {

void WriteTextReport(const ReportModel& model, std::ostream& os);

}  // namespace commprof
