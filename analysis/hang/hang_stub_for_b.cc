// TEMPORARY (issue 19, aggregator branch only): trivial stand-ins for the diagnosis and the /hang
// writer, which the analysis branch implements, so that this branch links. Deleted at the merge;
// nothing here is the real behaviour.
#include <string>

#include "analysis/hang/hang_diagnosis.h"
#include "analysis/hang/hang_store.h"

namespace commprof::hang {

HangReport Diagnose(const HangInput& input) {
  HangReport r;
  r.hang = true;
  r.verdict = "hang detected across " + std::to_string(input.ranks.size()) + " rank(s) (diagnosis not built here)";
  return r;
}

std::string RenderText(const HangReport& report) { return "hang: " + report.verdict + "\n"; }

Status WriteHangGroup(hid_t /*file*/, const HangInput& /*input*/, const HangReport& /*report*/) { return Status::Ok(); }

}  // namespace commprof::hang
