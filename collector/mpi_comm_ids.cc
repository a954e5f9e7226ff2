#include "collector/mpi_comm_ids.h"

#include "commprof/event.h"

namespace commprof {
namespace {

int DeleteCommInfo(MPI_Comm, int, void* value, void*) {
  delete static_cast<CommInfo*>(value);
  return MPI_SUCCESS;
}

}  // namespace

CommIds::CommIds(int world_rank) : world_rank_(static_cast<uint64_t>(world_rank)) {
  // Null copy function: a dup'ed communicator must get its own id, not inherit its parent's.
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, DeleteCommInfo, &keyval_, nullptr);
  Attach(MPI_COMM_WORLD, COMMPROF_COMM_WORLD_ID, false);
}

CommInfo* CommIds::Attach(MPI_Comm comm, uint64_t id, bool untracked) {
  auto* info = new CommInfo;  // once per communicator, freed by MPI through DeleteCommInfo
  info->id = id;
  info->untracked = untracked;
  PMPI_Comm_size(comm, &info->size);
  PMPI_Comm_set_attr(comm, keyval_, info);
  return info;
}

uint64_t CommIds::Assign(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || keyval_ == MPI_KEYVAL_INVALID) {
    return 0;
  }
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) {
    return Lookup(comm)->id;  // a broadcast means something else on intercomms
  }
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  uint64_t id = 0;
  if (rank == 0) {
    id = ((world_rank_ + 1) << 32) | (created_.fetch_add(1) + 1);
  }
  PMPI_Bcast(&id, 1, MPI_UINT64_T, 0, comm);
  Attach(comm, id, false);
  return id;
}

CommInfo* CommIds::Lookup(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  if (keyval_ != MPI_KEYVAL_INVALID) {
    PMPI_Comm_get_attr(comm, keyval_, &value, &found);
  }
  if (found) {
    return static_cast<CommInfo*>(value);
  }
  // High bit marks rank-local ids so they can never collide with agreed ones.
  uint64_t id = (1ull << 63) | ((world_rank_ + 1) << 32) | (untracked_.fetch_add(1) + 1);
  return Attach(comm, id, true);
}

}  // namespace commprof
