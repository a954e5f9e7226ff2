// The start the reading commands that run as an MPI job share (`report`, `stats`, `export`:
// docs/scale.md#distributed-analysis): join the processes a launcher started, check the output
// once, open the file and its window on every process, and make sure every process reads the
// same file, so that work split by position is never done on two different views. Alone (no
// launcher, or COMMPROF_ANALYSIS_MPI=off) it is just the open, with the same messages.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "analysis/load/profile_reader.h"
#include "cli/analysis_world.h"
#include "cli/output_file.h"

namespace commprof::cli {

// The processes of `commprof COMMAND` when a launcher started several (nullptr: this one alone).
// When the command must end (MPI could not start; srun tasks without MPI support), `exit_code` is
// set and the reason told once.
std::unique_ptr<AnalysisWorld> JoinAnalysis(const char* command, std::optional<int>& exit_code);

// A command that may run as an MPI job, on this process: joins the processes a launcher started
// (JoinAnalysis), runs `body(world, tell)` (world nullptr: alone; `tell`: this process speaks for
// all, the first) and returns its exit code, the first process's on every process.
int RunAnalysisCommand(const char* command, const std::function<int(AnalysisWorld* world, bool tell)>& body);

// `output` (unless empty) checked by the first process before any work (naming the input file, or
// a link to it, is bad usage: exit 2; one that cannot be written: exit 1), then `path` opened and its
// window `window` (>= 0) selected on every process, which must then all read the same. On failure
// returns nullptr with `exit_code` set, every process with the same code, each fault told once
// (a fault only some processes meet by each of them, naming itself).
std::unique_ptr<ProfileReader> OpenEverywhere(const char* command, AnalysisWorld* world, const std::string& path,
                                              int64_t window, const std::string& output, OutputKind output_kind,
                                              int& exit_code);

}  // namespace commprof::cli
