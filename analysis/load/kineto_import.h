// `commprof import kineto`: several per-rank Kineto traces -> one job in memory, ready for the
// HDF5 writer (docs/kineto-import.md).
//
// Purpose: put each file's records on one job time base, give each its rank, check that the
// ranks' collectives line up, and optionally estimate per-rank clock offsets.
// Concepts:
//   - rank: distributedInfo.rank; the file name ("rank-3", "rank3", "worker3") only as a fallback.
//     Two files claiming one rank: the later one (in name order) is refused, with both names.
//   - job time base: the earliest absolute event time (epoch ns) over all files; every record's
//     time becomes ns since it (files keep their own dialect: epoch µs, or µs on
//     baseTimeNanoseconds). The ranks' clocks are what the files say (CLOCK_REALTIME per host).
//   - collective instance: the same (process group, collective type, Seq or per-type order)
//     on every member rank (analysis/match/collective_instances.h matches the kind-17 records).
//   - --align collective-ends: blocking collectives end nearly together on every member (the
//     reference measured 1-7 µs on one host), so rank r's offset to the reference rank (the
//     lowest imported) is the median over shared instances of (end_ref - end_r); the spread is
//     the largest distance of one instance's difference from that median, stored as the error
//     bound. --align none (default) trusts the times as written (offset 0, bound unknown).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/load/kineto_trace.h"
#include "core/status.h"

namespace commprof::kineto {

enum class Align { kNone, kCollectiveEnds };
Result<Align> ParseAlign(const std::string& text);  // "none" | "collective-ends"
const char* AlignName(Align align);

struct ImportedRank {
  uint32_t rank = 0;
  RankTrace trace;         // events now on the job time base (ns since ImportedJob::start_epoch_ns)
  int64_t offset_ns = 0;   // reference - local, from the alignment (0 with --align none)
  int64_t spread_ns = -1;  // the estimate's spread (-1: not estimated)
  uint64_t anchors = 0;    // collective ends the estimate rests on
};

struct MatchSummary {
  uint64_t instances = 0;         // distinct (process group, type, seq) over all ranks, point-to-point left out
  uint64_t complete = 0;          // seen on every member of its group
  uint64_t count_mismatches = 0;  // (group, type) pairs whose members recorded different counts
};

struct ImportedJob {
  std::vector<ImportedRank> ranks;  // sorted by rank
  uint32_t world_size = 0;
  uint64_t start_epoch_ns = 0;
  Align align = Align::kNone;
  MatchSummary matching;
  std::vector<std::string> errors;     // refused files and events (the import's exit status is 1)
  std::vector<std::string> warnings;   // gaps, count mismatches, truncated files, unknown categories
  std::vector<std::string> alignment;  // --align collective-ends: the estimate and spread per rank
  std::vector<std::string> notes;      // per-rank records and dialects, the single-rank note
};

struct ImportOptions {
  std::vector<std::string> inputs;  // files and directories (*.json, *.json.gz, *.gz inside)
  Align align = Align::kNone;
  // Compressed bytes read so far over all files, and their total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// Fails only on unusable arguments (a path that does not exist, no trace file at all, no file
// that could be read); per-file and per-event problems land in `errors`/`warnings`.
Result<ImportedJob> ImportKineto(const ImportOptions& options);

// "sampled_rank-1.json.gz" -> 1, "rank3.json" -> 3, "worker5_step_2.json" -> 5.
std::optional<uint32_t> RankFromFileName(const std::string& file_name);

// The clock method the HDF5 file states for an imported rank: "imported (--align none)", ...
std::string ImportedClockMethod(Align align);

}  // namespace commprof::kineto
