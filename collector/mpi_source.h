// The MPI source's state: what the PMPI wrappers need beyond the runtime itself, in one object
// the runtime owns (Runtime::AdoptMpiSource) from MPI_Init on.
//
// It holds the name ids of the wrapped calls, the communicator numbering (mpi_comm_ids.h) and the
// clock alignment over MPI (mpi_clock_sync.h). Lifetime: made after PMPI_Init succeeds in a
// profiled run, then as long as the runtime. The process's runtime is never freed (see
// ShutdownRuntime), so neither is this: a wrapper that loaded it just before the runtime was shut
// down, or one called from a static destructor, still finds it intact. Before MPI_Init, after the
// shutdown, and in an unprofiled process ActiveMpiSource() is null and every wrapper is a plain
// forward to PMPI, as it always was.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "collector/mpi_clock_sync.h"
#include "collector/mpi_codes.h"
#include "collector/mpi_comm_ids.h"
#include "collector/runtime.h"

namespace commprof {

// Per-thread scratch of the request-array calls: requests are copied before PMPI nulls them,
// statuses are supplied when the caller passed MPI_STATUSES_IGNORE. Grows once, then reused.
struct MpiThreadScratch {
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
};

class MpiSource {
 public:
  // After PMPI_Init, on the thread that called it: interns the call names and numbers
  // MPI_COMM_WORLD. Clock alignment starts separately (StartClockSync), once the runtime owns this.
  MpiSource(Runtime& rt, int world_rank);
  ~MpiSource();
  MpiSource(const MpiSource&) = delete;
  MpiSource& operator=(const MpiSource&) = delete;

  Runtime& runtime() const { return rt_; }
  // The string id of the call named `name` (an op type or an MpiName, mpi_codes.h).
  uint32_t NameId(uint8_t name) const { return names_[name]; }
  CommIds& comms() { return comms_; }

  // Collective over MPI_COMM_WORLD, inside MPI_Init: the first alignment epoch, when the runtime's
  // config asks for alignment.
  void StartClockSync();
  // Periodic epochs ride on blocking world collectives (mpi_clock_sync.h).
  void AfterWorldCollective(uint64_t seq) {
    if (clock_sync_ != nullptr) {
      clock_sync_->AfterWorldCollective(seq);
    }
  }
  // Inside MPI_Finalize, before PMPI_Finalize: the last epoch needs MPI.
  void FinishClockSync() {
    if (clock_sync_ != nullptr) {
      clock_sync_->Finish();
    }
  }

  // MPI_Comm_set_name(comm, name) succeeded: under --step-every N:NAME, the communicator named
  // NAME begins a step at every N-th of its collectives.
  void NoteCommName(MPI_Comm comm, const char* name);

  // The calling thread's scratch, owned by its ThreadState in the runtime.
  MpiThreadScratch& Scratch();

 private:
  Runtime& rt_;
  uint32_t names_[256] = {};
  CommIds comms_;
  std::unique_ptr<MpiClockSync> clock_sync_;
};

// The process runtime's MPI source when the runtime records MPI calls (`--activities` includes
// mpi); null otherwise, and then the wrappers only forward. Inline: every wrapper asks first.
inline MpiSource* ActiveMpiSource() {
  Runtime* rt = ActiveRuntime();
  return rt != nullptr && rt->Records(kActivityMpi) ? rt->mpi() : nullptr;
}

}  // namespace commprof
