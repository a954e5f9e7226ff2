#include "analysis/match/comm_membership.h"

namespace commprof {

bool CommMembership::Add(const commprof_event& e, uint32_t world_rank) {
  if (e.kind != COMMPROF_KIND_MPI_COMM) {
    return false;
  }
  if ((e.flags & COMMPROF_FLAG_UNTRACKED_COMM) != 0 || e.comm_id == COMMPROF_NO_COMM_ID ||
      e.comm_id == COMMPROF_COMM_WORLD_ID) {
    return false;
  }
  // A size of 0 or beyond 32 bits, or a local rank outside [0, size), is not a claim we can hold.
  if (e.bytes == 0 || e.bytes > UINT32_MAX || e.peer < 0 || static_cast<uint64_t>(e.peer) >= e.bytes) {
    ++conflicts_;
    return true;
  }
  auto size = static_cast<uint32_t>(e.bytes);
  auto [it, fresh] = size_.emplace(e.comm_id, size);
  if (!fresh && it->second != size) {
    ++conflicts_;
    return true;
  }
  const std::pair<uint64_t, uint64_t> by_local{e.comm_id, static_cast<uint64_t>(e.peer)};
  const std::pair<uint64_t, uint64_t> by_world{e.comm_id, world_rank};
  auto w = world_of_.find(by_local);
  auto l = local_of_.find(by_world);
  if (w != world_of_.end() || l != local_of_.end()) {
    // The same claim twice (a duplicated record) is harmless; anything else contradicts.
    if (w == world_of_.end() || l == local_of_.end() || w->second != world_rank || l->second != e.peer) {
      ++conflicts_;
    }
    return true;
  }
  world_of_.emplace(by_local, world_rank);
  local_of_.emplace(by_world, e.peer);
  return true;
}

std::optional<uint32_t> CommMembership::WorldRank(uint64_t comm_id, int32_t local_rank) const {
  if (local_rank < 0) {
    return std::nullopt;
  }
  if (comm_id == COMMPROF_COMM_WORLD_ID) {
    if (world_size_ != 0 && static_cast<uint64_t>(local_rank) >= world_size_) {
      return std::nullopt;
    }
    return static_cast<uint32_t>(local_rank);
  }
  auto it = world_of_.find({comm_id, static_cast<uint64_t>(local_rank)});
  if (it == world_of_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<int32_t> CommMembership::LocalRank(uint64_t comm_id, uint32_t world_rank) const {
  if (comm_id == COMMPROF_COMM_WORLD_ID) {
    if (world_size_ != 0 && world_rank >= world_size_) {
      return std::nullopt;
    }
    return static_cast<int32_t>(world_rank);
  }
  auto it = local_of_.find({comm_id, world_rank});
  if (it == local_of_.end()) {
    return std::nullopt;
  }
  return it->second;
}

uint32_t CommMembership::Size(uint64_t comm_id) const {
  if (comm_id == COMMPROF_COMM_WORLD_ID) {
    return static_cast<uint32_t>(world_size_);
  }
  auto it = size_.find(comm_id);
  return it == size_.end() ? 0 : it->second;
}

bool CommMembership::Known(uint64_t comm_id) const {
  return comm_id == COMMPROF_COMM_WORLD_ID || size_.count(comm_id) != 0;
}

}  // namespace commprof
