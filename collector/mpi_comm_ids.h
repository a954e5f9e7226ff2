// Job-unique communicator ids and per-communicator collective sequence numbers.
//
// MPI_COMM_WORLD is id 1 (0 means "no communicator"). A communicator made by a wrapped call (dup,
// split, split_type, create, create_group, cart_create) gets ((world rank of its rank 0 + 1) << 32)
// | that rank's creation counter, broadcast from its rank 0 over the new communicator inside the
// creating call, so all members agree on it. Ids are unique without any job-wide coordination
// because each world rank numbers only the communicators it leads. The id and the sequence
// counter live in an MPI attribute on the communicator, so lookup is one PMPI_Comm_get_attr call
// and MPI frees them with the comm.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>

namespace commprof {

struct CommInfo {
  uint64_t id = 0;
  int size = 0;
  bool untracked = false;  // created by a call we do not wrap: id is only unique on this rank
  std::atomic<uint64_t> next_seq{0};
  std::atomic<uint64_t> step_every{0};  // --step-every N on this communicator (0: off)
};

// One rank's numbering of communicators; part of the MPI source (mpi_source.h).
class CommIds {
 public:
  // After PMPI_Init: registers the attribute keyval and tags MPI_COMM_WORLD. The keyval is never
  // freed: the attributes of live communicators need it, and MPI_Finalize releases it.
  explicit CommIds(int world_rank);
  CommIds(const CommIds&) = delete;
  CommIds& operator=(const CommIds&) = delete;

  // Collective over `comm` (all members are inside the creating call): agrees on and attaches the
  // id. Returns the id, or 0 when `comm` is MPI_COMM_NULL or an intercommunicator.
  uint64_t Assign(MPI_Comm comm);
  // The communicator's info; a communicator we did not see created gets a rank-local id.
  CommInfo* Lookup(MPI_Comm comm);

 private:
  CommInfo* Attach(MPI_Comm comm, uint64_t id, bool untracked);

  int keyval_ = MPI_KEYVAL_INVALID;
  const uint64_t world_rank_;
  std::atomic<uint64_t> created_{0};    // communicators this rank has led
  std::atomic<uint64_t> untracked_{0};  // communicators seen without their creation
};

}  // namespace commprof
