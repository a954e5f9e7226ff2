// The report model as JSON (schema "commprof-report", docs/report-json.md): written and read by
// walking the model's Fields() lists, so the keys exist in one place only.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/report/report_model.h"
#include "core/status.h"

namespace commprof {

// Every present member, in Fields() order; an absent one is left out, an absent entry of a
// per-bin array is null.
nlohmann::ordered_json ReportModelToJson(const ReportModel& model);

// Reads a report JSON (ours, an older one, or a hand-made one) into the model. Required: "schema"
// == "commprof-report", an integer "world_size" >= 0, and a "ranks" array whose entries each have
// an integer "rank" (and the few other kReportRequired keys). Null counts as absent. A key of the
// wrong type or shape is rejected with its path, e.g. "report key ranks[2].rank: missing"; a
// number that is not finite (possible in a JSON built in memory) reads as absent.
Result<ReportModel> ReportModelFromJson(const nlohmann::ordered_json& json);

}  // namespace commprof
