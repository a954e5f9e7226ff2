// Feeds one spool file (the frames a collector wrote when it could not reach the aggregator)
// through a RankStream into an Ingest: the same checks as a live connection, minus the network.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "aggregator/ingest.h"
#include "aggregator/rank_stream.h"

namespace commprof {

struct SpoolResult {
  bool accepted = false;  // the hello was valid and its rank was free
  uint32_t rank = 0;
  uint32_t incarnation = 0;  // the hello's: above 0 for an elastic restart's worker
  std::string job_id;
  Status status;  // ok, or what was wrong and where (file and byte offset)
};

// `router`: where a spool of an incarnation above 0 (an elastic restart's worker) goes; unset: to
// `ingest`.
SpoolResult IngestSpoolFile(Ingest& ingest, const std::string& path, const StreamPolicy& policy,
                            const IncarnationRouter& router = {});

// Reads only the hello of a spool file (to learn its job id before creating the output).
Result<wire::Hello> ReadSpoolHello(const std::string& path);

// The ranks of job `job_id` whose spool file in `dir` is whole up to its bye: those ranks are done
// even though they never said bye over TCP. Files that did not change since the last call are not
// read again (`cache` keeps their size and verdict between calls).
struct SpoolScanCache {
  std::map<std::string, std::pair<uintmax_t, std::optional<uint32_t>>> files;  // path -> (size, rank)
};
std::set<uint32_t> SpooledRanksDone(const std::string& dir, const std::string& job_id, SpoolScanCache& cache);

}  // namespace commprof
