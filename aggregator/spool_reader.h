// Feeds one spool file (the frames a collector wrote when it could not reach the aggregator)
// through a RankStream into an Ingest: the same checks as a live connection, minus the network.
#pragma once

#include <string>

#include "aggregator/ingest.h"
#include "aggregator/rank_stream.h"

namespace commprof {

struct SpoolResult {
  bool accepted = false;  // the hello was valid and its rank was free
  uint32_t rank = 0;
  std::string job_id;
  Status status;  // ok, or what was wrong and where (file and byte offset)
};

SpoolResult IngestSpoolFile(Ingest& ingest, const std::string& path, const StreamPolicy& policy);

// Reads only the hello of a spool file (to learn its job id before creating the output).
Result<wire::Hello> ReadSpoolHello(const std::string& path);

}  // namespace commprof
