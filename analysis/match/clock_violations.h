// Clock-condition violations (docs/clock-alignment.md): after alignment, a blocking collective
// must not end on a rank before the ranks it depends on have entered it. Counting them is a
// quality figure for the alignment; they are never hidden or silently repaired.
//
// Dependencies by operation: Barrier, Allreduce, Allgather(v), Alltoall(v), Reduce_scatter(_block):
// every rank waits for every rank. Bcast, Scatter(v): the non-roots wait for the root.
// Reduce, Gather(v): the root waits for everyone. Scan: rank i waits for ranks 0..i.
// Zero-byte calls (every rank passed count 0; not barriers or alltoallvs) wait for nobody and are not checked.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/match/collective_instances.h"

namespace commprof {

struct ClockViolations {
  uint64_t instances_checked = 0;  // blocking collective instances seen on two or more ranks, not zero-byte
  uint64_t violations = 0;         // instances with at least one violating rank
};

// One pass over every rank's events. `aligned`: apply each rank's clock model (false: raw times).
Result<ClockViolations> CountClockViolations(const ProfileReader& reader, bool aligned);
// The same over instances already loaded (LoadCollectiveInstances), without reading the file again.
ClockViolations CountClockViolations(const std::vector<CollectiveInstance>& instances);

}  // namespace commprof
