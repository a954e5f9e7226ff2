// Collective instances matched across ranks (docs/metrics.md §Matching): one instance per
// (communicator id, sequence number), holding each participating rank's entry and exit on the
// aligned time base. Blocking MPI collectives only (non-blocking ones span issue to completion,
// which is not an arrival); incomplete and untracked-communicator events are left out.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/load/profile_reader.h"

namespace commprof {

struct Arrival {
  uint32_t world_rank = 0;
  int32_t local_rank = -1;  // rank within the communicator (-1: its creation was not seen)
  int64_t start = 0;        // entry, reference time base
  int64_t end = 0;          // exit
  uint64_t bytes = 0;       // as this rank recorded it (docs/file-format.md byte rules)
};

struct CollectiveInstance {
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  uint8_t op = 0;       // enum commprof_op_type
  int32_t root = -1;    // rank within the communicator, rooted collectives only
  uint64_t bytes = 0;   // S of docs/metrics.md §2.1: the root's record for a rooted collective
                        // (a non-root of Gatherv/Scatterv records only its own part), else the first rank's
  uint32_t comm_size = 0;  // members of the communicator (0: unknown)
  std::vector<Arrival> arrivals;  // sorted by world rank
  bool complete() const { return comm_size != 0 && arrivals.size() == comm_size; }
};

// Every blocking collective instance of the file, ordered by earliest entry. `aligned`: apply each
// rank's clock model (false: raw local times). A malformed input is rejected (kCorrupt, naming
// the file, rank and events row): an event that ends before it starts, a rank recording the same
// (communicator, sequence) twice, or ranks disagreeing on the operation of one call.
Result<std::vector<CollectiveInstance>> LoadCollectiveInstances(const ProfileReader& reader, bool aligned);

}  // namespace commprof
