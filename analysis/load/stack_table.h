// The call-site stacks of a file (`commprof run --stacks`): the ranks' kind 32 STACK_FRAME events,
// symbolized once when the file is finalized into the root `/stacks` table (docs/file-format.md
// "The stacks table"), and read back by the analyses.
//
// Symbolization runs `addr2line -f -C -e MODULE ADDR...` once per module (batched), so a job's
// thousands of frames cost a few processes. Without addr2line, without debug information, or when
// a module file is not readable here (a library of another node), a frame keeps the function name
// the collector's dladdr found (or `??`) with its module and address; that is said once per cause,
// never an error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "core/schema/analysis_tables.h"
#include "core/status.h"

namespace commprof {

struct StackFrameInfo {
  std::string function;  // "??" when unknown
  std::string file;      // empty when unknown
  uint32_t line = 0;     // 0 when unknown
  std::string module;
  uint64_t address = 0;
  // "function (file:line)", or "function (module+0xADDR)" without a source location.
  std::string Label() const;
};

// (rank, stack id) -> frames from depth 0 (the call site) outward.
using StackMap = std::map<std::pair<uint32_t, uint32_t>, std::vector<StackFrameInfo>>;

struct SymbolizeOptions {
  std::string addr2line = "addr2line";  // the program run (a path, or a name looked up in PATH)
  bool run_addr2line = true;            // false: keep the collector's dladdr names only
};

struct SymbolizeResult {
  std::vector<schema::StackRow> rows;  // by rank, stack, depth
  std::vector<std::string> notes;      // one line per reason frames kept module + offset
};

// Whether any readable rank recorded stacks (its bye counts stacks_unique > 0).
bool HasStacks(const ProfileInfo& info);

// Reads every rank's STACK_FRAME events and symbolizes each unique (module, address).
Result<SymbolizeResult> SymbolizeStacks(const ProfileReader& reader, const SymbolizeOptions& options = {});

// Writes (replacing) the root `/stacks` table.
Status WriteStacksTable(const std::string& path, const std::vector<schema::StackRow>& rows);
// Reads `/stacks`; NotFound when the file has none.
Result<std::vector<schema::StackRow>> ReadStacksTable(const std::string& path);

// The stacks for the analyses: the `/stacks` table when the file has one, else the STACK_FRAME
// events with the collector's dladdr names (no addr2line). Empty when nothing was recorded.
Result<StackMap> LoadStacks(const ProfileReader& reader);

}  // namespace commprof
