// The parts of a report that the processes of a distributed `commprof report` compute for its
// first process (docs/scale.md#distributed-analysis), as bytes: the point-to-point matching and
// the per-rank passes, each with the status it ended in, so an error crosses as itself. Both ends
// are the same build of commprof (one MPI job), so records travel in their in-memory layout; a
// header of sizes still refuses bytes from another build rather than misreading them.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/report/job_report.h"
#include "core/status.h"

namespace commprof {

std::string EncodeP2PPart(const Result<P2PMatchResult>& part);
Result<P2PMatchResult> DecodeP2PPart(std::string_view bytes);

// Rank passes by rank index (into ProfileInfo::ranks), as computed by one process.
using IndexedRankPasses = std::vector<std::pair<uint32_t, RankPass>>;
std::string EncodeRankPassPart(const Result<IndexedRankPasses>& part);
Result<IndexedRankPasses> DecodeRankPassPart(std::string_view bytes);

// What ScreenEventRows left out on one process (the faults it added, in order: each has its rank),
// for the first process to mark the same ranks (ProfileReader::MarkUnreadable).
std::string EncodeScreeningPart(const std::vector<RankFault>& left_out);
Result<std::vector<RankFault>> DecodeScreeningPart(std::string_view bytes);

}  // namespace commprof
