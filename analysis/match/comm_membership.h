// Communicator membership (docs/metrics.md §1, docs/file-format.md "Communicator ids"): which
// world rank holds which rank of each communicator, and how many members it has.
//
// The file does not store the mapping; it follows from the MPI_COMM creation events, which every
// member writes with comm_id = the new communicator, peer = its own rank in it and bytes = its
// size. MPI_COMM_WORLD (id 1) is implicit: local rank = world rank, size = the world size.
// Feed it every rank's events in any order (Add ignores everything but MPI_COMM events), then
// look up in either direction. Peers and roots in events are local ranks, so matching
// point-to-point messages or rooted collectives across ranks needs the local -> world direction;
// reporting a rank's place in a communicator needs world -> local.
//
// A claim that contradicts an earlier one (two world ranks holding the same local rank, one world
// rank with two local ranks, two sizes for one communicator, a local rank outside the size) is
// counted in conflicts() and ignored: the first claim wins, so one bad record cannot reshuffle a
// whole communicator.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

#include "commprof/event.h"

namespace commprof {

class CommMembership {
 public:
  explicit CommMembership(uint64_t world_size = 0) : world_size_(world_size) {}

  // The world size, for MPI_COMM_WORLD lookups (the file's root attribute; 0 = unknown).
  void set_world_size(uint64_t n) { world_size_ = n; }
  uint64_t world_size() const { return world_size_; }

  // Records `e` when it is an MPI_COMM creation event seen on `world_rank`; other events are
  // ignored (returns false for them). Events on untracked communicators carry rank-local ids and
  // are ignored too.
  bool Add(const commprof_event& e, uint32_t world_rank);

  // World rank of `local_rank` in `comm_id`; nullopt when that member's creation event was not seen
  // (or, for MPI_COMM_WORLD, when the rank is outside the world size).
  std::optional<uint32_t> WorldRank(uint64_t comm_id, int32_t local_rank) const;
  // Rank of `world_rank` in `comm_id`; nullopt when it is not a known member.
  std::optional<int32_t> LocalRank(uint64_t comm_id, uint32_t world_rank) const;
  // Number of members (0: unknown communicator).
  uint32_t Size(uint64_t comm_id) const;
  // Whether the communicator's creation was seen on at least one rank (MPI_COMM_WORLD: always).
  bool Known(uint64_t comm_id) const;

  uint64_t conflicts() const { return conflicts_; }
  size_t communicators() const { return size_.size(); }  // created ones, MPI_COMM_WORLD not counted

 private:
  struct PairHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& k) const {
      return static_cast<size_t>(k.first * 0x9E3779B97F4A7C15ull ^ (k.second + 0x632BE59BD9B4E019ull));
    }
  };

  uint64_t world_size_ = 0;
  uint64_t conflicts_ = 0;
  std::unordered_map<uint64_t, uint32_t> size_;
  // (comm, local rank) -> world rank, and (comm, world rank) -> local rank.
  std::unordered_map<std::pair<uint64_t, uint64_t>, uint32_t, PairHash> world_of_;
  std::unordered_map<std::pair<uint64_t, uint64_t>, int32_t, PairHash> local_of_;
};

}  // namespace commprof
