#include "collector/mpi_calls.h"

namespace commprof {

commprof_event BeginEvent(MpiSource& src, const MpiCall& c) {
  commprof_event e{};
  e.kind = c.kind;
  e.subtype = c.op;
  e.name_id = src.NameId(c.name != 0 ? c.name : c.op);
  e.bytes = c.bytes;
  e.datatype = DatatypeCode(c.dt);
  e.reduce_op = ReduceOpCode(c.red);
  e.peer = c.peer;
  e.device = COMMPROF_HOST_DEVICE;
  e.correlation = c.tag;
  if (c.kind == COMMPROF_KIND_MPI_COLLECTIVE && c.bytes == 0 && c.dt != MPI_DATATYPE_NULL) {
    // bytes = count x the type's size: with a type of size 0 a count above 0 moves no byte either,
    // yet the call runs its algorithm and waits like any other (only count 0 returns at once), so
    // the analysis must not take this 0 for a count of 0 (docs/file-format.md, flags).
    int size = 0;
    PMPI_Type_size(c.dt, &size);
    if (size <= 0) {
      e.flags |= COMMPROF_FLAG_SIZELESS_TYPE;
    }
  }
  uint64_t step_every = 0;
  if (c.comm != MPI_COMM_NULL) {
    CommInfo* info = src.comms().Lookup(c.comm);
    e.comm_id = info->id;
    if (info->untracked) {
      e.flags |= COMMPROF_FLAG_UNTRACKED_COMM;
    }
    if (c.kind == COMMPROF_KIND_MPI_COLLECTIVE) {
      e.seq = info->next_seq.fetch_add(1, std::memory_order_relaxed);
      step_every = info->step_every.load(std::memory_order_relaxed);
    }
  }
  e.start_ns = src.runtime().Now();
  if (step_every != 0 && e.seq % step_every == 0) {
    // Numbered by the communicator's own sequence, which every member agrees on.
    src.runtime().BeginStep(e.seq / step_every, COMMPROF_STEP_COLLECTIVE, e.start_ns);
  }
  return e;
}

commprof_event ReceiveHalf(const commprof_event& send, const MpiCall& posted, int rc, const MPI_Status& status) {
  commprof_event e = send;
  e.flags |= COMMPROF_FLAG_RECV_HALF;
  e.bytes = posted.bytes;
  e.datatype = DatatypeCode(posted.dt);
  e.peer = posted.peer;
  e.correlation = posted.tag;
  int n = 0;
  if (rc == MPI_SUCCESS && PMPI_Get_count(&status, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED) {
    e.bytes = static_cast<uint64_t>(n);
    e.peer = status.MPI_SOURCE;
    e.correlation = static_cast<uint32_t>(status.MPI_TAG);
  }
  return e;
}

commprof_event CommCreatedEvent(MpiSource& src, uint8_t op, MPI_Comm parent, MPI_Comm newcomm, uint64_t t0) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_COMM;
  e.subtype = op;
  e.name_id = src.NameId(op);
  e.comm_id = src.comms().Assign(newcomm);
  e.seq = src.comms().Lookup(parent)->id;
  e.bytes = static_cast<uint64_t>(src.comms().Lookup(newcomm)->size);
  int rank = 0;
  PMPI_Comm_rank(newcomm, &rank);
  e.peer = rank;
  e.device = COMMPROF_HOST_DEVICE;
  e.start_ns = t0;
  e.end_ns = src.runtime().Now();
  return e;
}

}  // namespace commprof
