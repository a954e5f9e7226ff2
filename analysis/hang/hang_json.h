// The hang report as JSON: the report's `hang` object (docs/report-json.md) and the /hang group's
// `report_json` dataset (docs/file-format.md), one schema for both. Reading validates every key and
// names the one at fault, so a report read back renders exactly as the diagnosis did.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/hang/hang_diagnosis.h"
#include "core/status.h"

namespace commprof::hang {

nlohmann::ordered_json HangReportToJson(const HangReport& report);
// `where` names the document in errors ("report key hang", "FILE:/hang/report_json").
Result<HangReport> HangReportFromJson(const nlohmann::ordered_json& json, const std::string& where);

}  // namespace commprof::hang
