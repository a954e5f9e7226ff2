// Collective instances matched across ranks (docs/metrics.md §1): one instance per (communicator
// id, sequence number) for MPI, and per (commHash, collective type, seqNumber) for NCCL, whose
// sequence numbers count per type; each holds every participating rank's arrival and exit on the
// aligned time base. Blocking MPI collectives (non-blocking ones span issue to completion, which is
// not an arrival) and NCCL collectives (arrival = first kernel-channel start, exit = last stop);
// incomplete and untracked-communicator events are left out. NCCL calls decoded from NCCL's NVTX
// ranges count only where the rank has no plugin records of their communicator (host API spans).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "analysis/load/profile_reader.h"

namespace commprof {

// The identity of one collective call across ranks. `type` is 0 for MPI (its sequence numbers count
// every collective of the communicator, so the type is checked, not keyed) and 0x100 + the
// operation for NCCL (seqNumber counts per type).
struct CollectiveKey {
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  uint32_t type = 0;
  bool operator==(const CollectiveKey&) const = default;
};
struct CollectiveKeyHash {
  size_t operator()(const CollectiveKey& k) const {
    return static_cast<size_t>((k.comm_id * 0x9E3779B97F4A7C15ull) ^ (k.seq * 0xC2B2AE3D27D4EB4Full) ^ k.type);
  }
};

// Whether `e` takes part in matching: a blocking MPI collective, or an NCCL collective (kind
// NCCL_COLLECTIVE that is not a point-to-point operation); never incomplete or untracked ones.
bool IsMatchableCollective(const commprof_event& e);
// Whether `e` is a completed MPI non-blocking collective (NONBLOCKING, not incomplete or untracked):
// matched like a blocking one when LoadCollectiveInstances is asked to (docs/metrics.md §1).
bool IsMatchableNonblockingCollective(const commprof_event& e);
// Whether `e` is an NCCL collective call decoded from NCCL's NVTX ranges (kind NCCL_API with
// COMMPROF_FLAG_FROM_NVTX, not Send/Recv): matched only on ranks without plugin records for its
// communicator (docs/metrics.md §1), with sequence numbers the analysis assigns.
bool IsNvtxNcclCollective(const commprof_event& e);
CollectiveKey KeyOf(const commprof_event& e);

struct Arrival {
  uint32_t world_rank = 0;
  int32_t local_rank = -1;  // rank within the communicator (-1: its creation was not seen)
  int64_t start = 0;        // arrival: entry of a blocking call, issue of a non-blocking one
  int64_t end = 0;          // exit (non-blocking: the return of the call that completed it)
  uint64_t bytes = 0;       // as this rank recorded it (docs/file-format.md byte rules)
  // Entry of the call in which the rank blocked for this collective (docs/metrics.md §2): `start`
  // for a blocking call; for a non-blocking one the entry of the Wait* call that completed it,
  // or `end` when nothing blocked for it (completed by Test*, or the completing call not found).
  int64_t block_start = 0;
  // Non-blocking: the completing call was passed several requests (Waitall, Waitany, Waitsome), so
  // it may have completed other operations too (docs/metrics.md §9.1).
  bool shared_completion = false;
  // The rank's datatype had size 0 (COMMPROF_FLAG_SIZELESS_TYPE): its bytes 0 says nothing of its count.
  bool sizeless_type = false;
};

struct CollectiveInstance {
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  uint8_t op = 0;                 // enum commprof_op_type
  int32_t root = -1;              // rank within the communicator, rooted collectives only
  uint64_t bytes = 0;             // S of docs/metrics.md §2.1: the root's record for a rooted collective
                                  // (a non-root of Gatherv/Scatterv records only its own part), else the first rank's
  uint32_t comm_size = 0;         // members of the communicator (0: unknown)
  std::vector<Arrival> arrivals;  // sorted by world rank
  bool nccl = false;              // an NCCL collective (kind NCCL_COLLECTIVE)
  bool nonblocking = false;       // an MPI non-blocking collective (MPI_Iallreduce, ...)
  bool complete() const { return comm_size != 0 && arrivals.size() == comm_size; }
  // A call that moves no data (count 0 on every rank; not a barrier, which never moves data and
  // does synchronise): MPI libraries return from it at once, without waiting for the other ranks,
  // so it has no dependencies, no wait and no clock condition (docs/metrics.md §2).
  bool zero_byte() const;
  CollectiveKey key() const { return {comm_id, seq, nccl ? 0x100u + op : 0u}; }
};

// Every blocking collective instance of the file (with `nonblocking`, the MPI non-blocking ones
// too: arrival = issue, blocked from the entry of the Wait* call that completed them), ordered by
// earliest arrival. `aligned`: apply each rank's clock model (false: raw local times). A malformed input is rejected
// (kCorrupt, naming the file, rank and events row): an event that ends before it starts, a rank recording the same
// (communicator, sequence) twice, or ranks disagreeing on the operation of one call.
// `observe`, when given, also sees every chunk of events read, with the index of its rank in
// ProfileInfo::ranks: another analysis riding on this read of the file (the step marks, §10).
// `check_nonblocking` (without `nonblocking`): the non-blocking collectives are not matched, but
// refused as if they were (a rank recording one's identity twice, or ranks disagreeing on its
// operation, also against the blocking ones), keeping only each identity's operation and last rank:
// a load that succeeds then has no row the screening would leave out (ScreenEventRows).
using ChunkObserver = std::function<void(uint32_t rank_index, std::span<const commprof_event> chunk)>;
Result<std::vector<CollectiveInstance>> LoadCollectiveInstances(const ProfileReader& reader, bool aligned,
                                                                bool nonblocking = false,
                                                                const ChunkObserver& observe = {},
                                                                bool check_nonblocking = false);

}  // namespace commprof
