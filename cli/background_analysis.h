// `--analysis background` of `commprof run` and `commprof aggregate` (docs/cli.md#run): the job's
// exit code comes back as soon as its file is complete, and a detached process adds the file's
// /analysis group afterwards. That process works on a copy beside the file and renames the copy
// over it: a reader that opened the file meanwhile keeps reading what it opened (HDF5 refuses a
// reader a file that a writer holds open), and a background process that is killed, or fails,
// leaves the file exactly as the job wrote it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace CLI {
class App;
}

namespace commprof::cli {

struct CollectionSummary;

// When the cross-rank analysis is stored: at the end of the command (now), after it (background),
// or not at all (off; `commprof report --save` stores it later).
enum class AnalysisMode { kNow, kBackground, kOff };

// "now", "background" or "off"; false for anything else.
bool ParseAnalysisMode(const std::string& text, AnalysisMode& mode);

// The options of a collecting command: --analysis MODE (default now) and --no-analysis (= off).
struct AnalysisOptions {
  std::string mode = "now";
  bool analyze = true;  // false after --no-analysis
};
void AddAnalysisOptions(CLI::App* sub, AnalysisOptions& o);
// The mode the options ask for; false (with `error`) for an unknown mode or --no-analysis beside
// another mode than off.
bool ResolveAnalysisMode(const AnalysisOptions& o, AnalysisMode& mode, std::string& error);

// After a collecting command with --analysis background finished: when it wrote `output` whole
// (some rank recorded, no write failed, an older file was not kept), starts the background
// analysis of it and of its restart files and says so on stderr, or, if that cannot start, stores
// the analysis now; otherwise does nothing.
void StoreAnalysisLater(const std::string& output, const CollectionSummary& sum, const char* command);

// The log a background analysis writes its messages to: PATH.analysis.log. Removed when the
// analysis succeeded without a message; kept (and named on stderr at the start) otherwise.
std::string BackgroundAnalysisLog(const std::string& path);

// Forks the detached process that stores the analysis of `files` in turn (the job's output first,
// then any restart files). Returns its pid; an error when it could not be started (the caller then
// stores the analysis itself).
Result<pid_t> StartBackgroundAnalysis(const std::vector<std::string>& files, const char* command);

// What the detached process does for one file: copy it beside itself, symbolize its call stacks
// and store its analysis in the copy, and rename the copy over the file if the file is still the
// one that was copied. On failure the copy is removed and the file is untouched.
Status StoreAnalysisInCopy(const std::string& path, const char* command);

}  // namespace commprof::cli
