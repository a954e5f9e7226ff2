// PMPI interposition: every wrapped MPI call becomes one event with entry and exit times, bytes,
// datatype, root/peer and communicator (id + per-communicator sequence number for collectives);
// MPI_Sendrecv(_replace) becomes two, its send half and its receive half.
//
// The entry points only: how a call becomes an event is in mpi_calls.h (blocking, non-blocking
// issue, communicator creation) and mpi_completion.h (Wait*/Test*); the state they use is the
// MPI source's (mpi_source.h), owned by the runtime. Non-blocking calls are parked in the
// RequestTable at issue and become one event, issue to completion, when Wait/Test sees them
// complete; the Wait/Test call itself is an MPI_WAIT event. With no MPI source to record into
// (not a profiled run, before MPI_Init, after the runtime's shutdown) every wrapper is a plain
// forward to PMPI.
#include <mpi.h>

#include <cstdlib>
#include <memory>

#include "collector/event_builder.h"
#include "collector/inflight.h"
#include "collector/mpi_calls.h"
#include "collector/mpi_codes.h"
#include "collector/mpi_completion.h"
#include "collector/mpi_source.h"
#include "collector/runtime.h"
#include "commprof/event.h"

namespace commprof {
namespace {

int CommSize(MpiSource& src, MPI_Comm comm) { return src.comms().Lookup(comm)->size; }
int CommRank(MPI_Comm comm) {
  int r = 0;
  PMPI_Comm_rank(comm, &r);
  return r;
}

// The collectives whose bytes depend on the rank, the communicator's size or a counts array, for
// the blocking call and its I-form (`name`) alike: docs/file-format.md gives each rule.
MpiCall GatherCall(MpiSource& mpi, const void* s, int sc, MPI_Datatype sdt, int rc, MPI_Datatype rdt, int root,
                   MPI_Comm comm, uint8_t name = 0) {
  uint64_t n = static_cast<uint64_t>(CommSize(mpi, comm));
  bool in_place = s == MPI_IN_PLACE;
  uint64_t bytes = in_place ? TypeBytes(rdt, rc) * n : TypeBytes(sdt, sc) * n;
  return Coll(COMMPROF_OP_GATHER, comm, bytes, in_place ? rdt : sdt, MPI_OP_NULL, root, name);
}

MpiCall GathervCall(MpiSource& mpi, int sc, MPI_Datatype sdt, const int rcs[], MPI_Datatype rdt, int root,
                    MPI_Comm comm, uint8_t name = 0) {
  bool at_root = CommRank(comm) == root;  // recvcounts are significant at the root only
  uint64_t bytes = at_root ? TypeBytes(rdt, SumCounts(rcs, CommSize(mpi, comm))) : TypeBytes(sdt, sc);
  return Coll(COMMPROF_OP_GATHERV, comm, bytes, at_root ? rdt : sdt, MPI_OP_NULL, root, name);
}

MpiCall ScatterCall(MpiSource& mpi, int sc, MPI_Datatype sdt, int rc, MPI_Datatype rdt, int root, MPI_Comm comm,
                    uint8_t name = 0) {
  uint64_t n = static_cast<uint64_t>(CommSize(mpi, comm));
  bool at_root = CommRank(comm) == root;
  uint64_t bytes = at_root ? TypeBytes(sdt, sc) * n : TypeBytes(rdt, rc) * n;
  return Coll(COMMPROF_OP_SCATTER, comm, bytes, at_root ? sdt : rdt, MPI_OP_NULL, root, name);
}

MpiCall ScattervCall(MpiSource& mpi, const int scs[], MPI_Datatype sdt, int rc, MPI_Datatype rdt, int root,
                     MPI_Comm comm, uint8_t name = 0) {
  bool at_root = CommRank(comm) == root;  // sendcounts are significant at the root only
  uint64_t bytes = at_root ? TypeBytes(sdt, SumCounts(scs, CommSize(mpi, comm))) : TypeBytes(rdt, rc);
  return Coll(COMMPROF_OP_SCATTERV, comm, bytes, at_root ? sdt : rdt, MPI_OP_NULL, root, name);
}

MpiCall AllgathervCall(MpiSource& mpi, const int rcs[], MPI_Datatype rdt, MPI_Comm comm, uint8_t name = 0) {
  uint64_t bytes = TypeBytes(rdt, SumCounts(rcs, CommSize(mpi, comm)));
  return Coll(COMMPROF_OP_ALLGATHERV, comm, bytes, rdt, MPI_OP_NULL, COMMPROF_NO_PEER, name);
}

MpiCall AlltoallvCall(MpiSource& mpi, const void* s, const int scs[], MPI_Datatype sdt, const int rcs[],
                      MPI_Datatype rdt, MPI_Comm comm, uint8_t name = 0) {
  bool in_place = s == MPI_IN_PLACE;
  int n = CommSize(mpi, comm);
  uint64_t bytes = in_place ? TypeBytes(rdt, SumCounts(rcs, n)) : TypeBytes(sdt, SumCounts(scs, n));
  return Coll(COMMPROF_OP_ALLTOALLV, comm, bytes, in_place ? rdt : sdt, MPI_OP_NULL, COMMPROF_NO_PEER, name);
}

MpiCall ReduceScatterCall(MpiSource& mpi, const int rcs[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                          uint8_t name = 0) {
  uint64_t bytes = TypeBytes(dt, SumCounts(rcs, CommSize(mpi, comm)));
  return Coll(COMMPROF_OP_REDUCE_SCATTER, comm, bytes, dt, op, COMMPROF_NO_PEER, name);
}

MpiCall ReduceScatterBlockCall(MpiSource& mpi, int rc, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, uint8_t name = 0) {
  uint64_t bytes = TypeBytes(dt, rc) * static_cast<uint64_t>(CommSize(mpi, comm));
  return Coll(COMMPROF_OP_REDUCE_SCATTER_BLOCK, comm, bytes, dt, op, COMMPROF_NO_PEER, name);
}

// After a successful PMPI_Init(_thread) whose entry was read at `t0_steady` (before the runtime
// may exist): makes the runtime if the environment asks for profiling, hands it the MPI source,
// records MPI_Init and runs the first clock alignment epoch.
void OnInit(uint64_t t0_steady) {
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  if (std::getenv("COMMPROF_AGGREGATOR") == nullptr && std::getenv("COMMPROF_SPOOL_DIR") == nullptr) {
    return;
  }
  Runtime* rt = EnsureRuntime(rank, size);
  if (rt == nullptr) {
    return;
  }
  MpiSource* src = rt->AdoptMpiSource(std::make_unique<MpiSource>(*rt, rank));
  commprof_event e = BlankEvent(COMMPROF_KIND_MPI_INIT, rt->ToLocal(t0_steady), rt->Now());
  e.name_id = src->NameId(kNameInit);
  e.comm_id = COMMPROF_COMM_WORLD_ID;
  e.bytes = static_cast<uint64_t>(size);  // world size
  rt->RecordStructural(e);
  src->StartClockSync();
}

}  // namespace
}  // namespace commprof

using namespace commprof;  // NOLINT: the C entry points below are the module's edge

extern "C" {

// ---- lifetime ----
int MPI_Init(int* argc, char*** argv) {
  uint64_t t0 = SteadyNowNs();
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) {
    OnInit(t0);
  }
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  uint64_t t0 = SteadyNowNs();
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) {
    OnInit(t0);
  }
  return rc;
}

int MPI_Finalize(void) {
  // Recorded, and clock alignment finished, whether or not the runtime records MPI calls: they
  // bound the rank's run.
  Runtime* rt = ActiveRuntime();
  if (rt == nullptr) {
    return PMPI_Finalize();
  }
  MpiSource* mpi = rt->mpi();
  // In flight from the entry: the last clock alignment below exchanges messages with rank 0 and
  // PMPI_Finalize waits for the other ranks, so a hang diagnosis must see this rank finalizing
  // (not idle) while either blocks.
  const uint64_t entry = rt->Now();
  commprof_event e = BlankEvent(COMMPROF_KIND_MPI_FINALIZE, entry, entry);
  e.name_id = mpi != nullptr ? mpi->NameId(kNameFinalize) : 0;
  InflightSlot& inflight = rt->Thread()->inflight;
  const bool published = inflight.Publish(e, 0);
  if (mpi != nullptr) {
    mpi->FinishClockSync();  // needs MPI: before PMPI_Finalize
  }
  // The stored event spans the whole call from its entry: a rank that waits in the last clock
  // alignment for the others to arrive is finalizing, not computing (its time would otherwise fall
  // between events and count as compute).
  int rc = PMPI_Finalize();
  e.end_ns = rt->Now();
  if (published) {
    inflight.Clear(e.end_ns);
  }
  rt->RecordStructural(e);
  ShutdownRuntime();
  return rc;
}

// ---- profiler control (docs/mpi-bindings.md "MPI_Pcontrol") ----
// 0 pauses recording, 1 resumes it, 2 begins the process's next step (0, 1, 2, ...); other levels
// are ignored. The optional arguments mean nothing to Open MPI's PMPI_Pcontrol, nor to us.
int MPI_Pcontrol(const int level, ...) {
  int rc = PMPI_Pcontrol(level);
  Runtime* rt = ActiveRuntime();
  if (rt == nullptr) {
    return rc;
  }
  switch (level) {
    case 0:
    case 1:
      rt->SetUserEnabled(level == 1);
      break;
    case 2:
      rt->BeginStep(rt->NextPcontrolStep(), COMMPROF_STEP_PCONTROL, rt->Now());
      break;
    default:
      break;
  }
  return rc;
}

// A communicator's name: --step-every N:NAME counts the collectives of the one named NAME.
int MPI_Comm_set_name(MPI_Comm comm, const char* name) {
  int rc = PMPI_Comm_set_name(comm, name);
  if (MpiSource* mpi = ActiveMpiSource(); mpi != nullptr && rc == MPI_SUCCESS) {
    mpi->NoteCommName(comm, name);
  }
  return rc;
}

// ---- blocking collectives ----
int MPI_Barrier(MPI_Comm comm) {
  return Traced(Coll(COMMPROF_OP_BARRIER, comm, 0), [&] { return PMPI_Barrier(comm); });
}

int MPI_Bcast(void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Bcast(buf, count, dt, root, comm);
  }
  return Traced(Coll(COMMPROF_OP_BCAST, comm, TypeBytes(dt, count), dt, MPI_OP_NULL, root),
                [&] { return PMPI_Bcast(buf, count, dt, root, comm); });
}

int MPI_Reduce(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Reduce(s, r, count, dt, op, root, comm);
  }
  return Traced(Coll(COMMPROF_OP_REDUCE, comm, TypeBytes(dt, count), dt, op, root),
                [&] { return PMPI_Reduce(s, r, count, dt, op, root, comm); });
}

int MPI_Allreduce(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Allreduce(s, r, count, dt, op, comm);
  }
  return Traced(Coll(COMMPROF_OP_ALLREDUCE, comm, TypeBytes(dt, count), dt, op),
                [&] { return PMPI_Allreduce(s, r, count, dt, op, comm); });
}

int MPI_Gather(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, int root, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Gather(s, sc, sdt, r, rc, rdt, root, comm);
  }
  return Traced(GatherCall(*mpi, s, sc, sdt, rc, rdt, root, comm),
                [&] { return PMPI_Gather(s, sc, sdt, r, rc, rdt, root, comm); });
}

int MPI_Gatherv(const void* s, int sc, MPI_Datatype sdt, void* r, const int rcs[], const int displs[], MPI_Datatype rdt,
                int root, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Gatherv(s, sc, sdt, r, rcs, displs, rdt, root, comm);
  }
  return Traced(GathervCall(*mpi, sc, sdt, rcs, rdt, root, comm),
                [&] { return PMPI_Gatherv(s, sc, sdt, r, rcs, displs, rdt, root, comm); });
}

int MPI_Scatter(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, int root, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Scatter(s, sc, sdt, r, rc, rdt, root, comm);
  }
  return Traced(ScatterCall(*mpi, sc, sdt, rc, rdt, root, comm),
                [&] { return PMPI_Scatter(s, sc, sdt, r, rc, rdt, root, comm); });
}

int MPI_Scatterv(const void* s, const int scs[], const int displs[], MPI_Datatype sdt, void* r, int rc,
                 MPI_Datatype rdt, int root, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Scatterv(s, scs, displs, sdt, r, rc, rdt, root, comm);
  }
  return Traced(ScattervCall(*mpi, scs, sdt, rc, rdt, root, comm),
                [&] { return PMPI_Scatterv(s, scs, displs, sdt, r, rc, rdt, root, comm); });
}

int MPI_Allgather(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Allgather(s, sc, sdt, r, rc, rdt, comm);
  }
  uint64_t bytes = TypeBytes(rdt, rc) * static_cast<uint64_t>(CommSize(*mpi, comm));
  return Traced(Coll(COMMPROF_OP_ALLGATHER, comm, bytes, rdt),
                [&] { return PMPI_Allgather(s, sc, sdt, r, rc, rdt, comm); });
}

int MPI_Allgatherv(const void* s, int sc, MPI_Datatype sdt, void* r, const int rcs[], const int displs[],
                   MPI_Datatype rdt, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Allgatherv(s, sc, sdt, r, rcs, displs, rdt, comm);
  }
  return Traced(AllgathervCall(*mpi, rcs, rdt, comm),
                [&] { return PMPI_Allgatherv(s, sc, sdt, r, rcs, displs, rdt, comm); });
}

int MPI_Alltoall(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Alltoall(s, sc, sdt, r, rc, rdt, comm);
  }
  uint64_t bytes = TypeBytes(rdt, rc) * static_cast<uint64_t>(CommSize(*mpi, comm));
  return Traced(Coll(COMMPROF_OP_ALLTOALL, comm, bytes, rdt),
                [&] { return PMPI_Alltoall(s, sc, sdt, r, rc, rdt, comm); });
}

int MPI_Alltoallv(const void* s, const int scs[], const int sd[], MPI_Datatype sdt, void* r, const int rcs[],
                  const int rd[], MPI_Datatype rdt, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Alltoallv(s, scs, sd, sdt, r, rcs, rd, rdt, comm);
  }
  return Traced(AlltoallvCall(*mpi, s, scs, sdt, rcs, rdt, comm),
                [&] { return PMPI_Alltoallv(s, scs, sd, sdt, r, rcs, rd, rdt, comm); });
}

int MPI_Reduce_scatter(const void* s, void* r, const int rcs[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Reduce_scatter(s, r, rcs, dt, op, comm);
  }
  return Traced(ReduceScatterCall(*mpi, rcs, dt, op, comm),
                [&] { return PMPI_Reduce_scatter(s, r, rcs, dt, op, comm); });
}

int MPI_Reduce_scatter_block(const void* s, void* r, int rc, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Reduce_scatter_block(s, r, rc, dt, op, comm);
  }
  return Traced(ReduceScatterBlockCall(*mpi, rc, dt, op, comm),
                [&] { return PMPI_Reduce_scatter_block(s, r, rc, dt, op, comm); });
}

int MPI_Scan(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Scan(s, r, count, dt, op, comm);
  }
  return Traced(Coll(COMMPROF_OP_SCAN, comm, TypeBytes(dt, count), dt, op),
                [&] { return PMPI_Scan(s, r, count, dt, op, comm); });
}

int MPI_Exscan(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Exscan(s, r, count, dt, op, comm);
  }
  return Traced(Coll(COMMPROF_OP_EXSCAN, comm, TypeBytes(dt, count), dt, op),
                [&] { return PMPI_Exscan(s, r, count, dt, op, comm); });
}

// ---- non-blocking collectives ----
int MPI_Iallreduce(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Iallreduce(s, r, count, dt, op, comm, req);
  }
  return TracedStart(Coll(COMMPROF_OP_ALLREDUCE, comm, TypeBytes(dt, count), dt, op, COMMPROF_NO_PEER, kNameIallreduce),
                     req, [&] { return PMPI_Iallreduce(s, r, count, dt, op, comm, req); });
}

int MPI_Ibcast(void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Ibcast(buf, count, dt, root, comm, req);
  }
  return TracedStart(Coll(COMMPROF_OP_BCAST, comm, TypeBytes(dt, count), dt, MPI_OP_NULL, root, kNameIbcast), req,
                     [&] { return PMPI_Ibcast(buf, count, dt, root, comm, req); });
}

int MPI_Iallgather(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, MPI_Comm comm,
                   MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Iallgather(s, sc, sdt, r, rc, rdt, comm, req);
  }
  uint64_t bytes = TypeBytes(rdt, rc) * static_cast<uint64_t>(CommSize(*mpi, comm));
  return TracedStart(Coll(COMMPROF_OP_ALLGATHER, comm, bytes, rdt, MPI_OP_NULL, COMMPROF_NO_PEER, kNameIallgather), req,
                     [&] { return PMPI_Iallgather(s, sc, sdt, r, rc, rdt, comm, req); });
}

int MPI_Ialltoall(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, MPI_Comm comm,
                  MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Ialltoall(s, sc, sdt, r, rc, rdt, comm, req);
  }
  uint64_t bytes = TypeBytes(rdt, rc) * static_cast<uint64_t>(CommSize(*mpi, comm));
  return TracedStart(Coll(COMMPROF_OP_ALLTOALL, comm, bytes, rdt, MPI_OP_NULL, COMMPROF_NO_PEER, kNameIalltoall), req,
                     [&] { return PMPI_Ialltoall(s, sc, sdt, r, rc, rdt, comm, req); });
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* req) {
  return TracedStart(
      Coll(COMMPROF_OP_BARRIER, comm, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, COMMPROF_NO_PEER, kNameIbarrier), req,
      [&] { return PMPI_Ibarrier(comm, req); });
}

int MPI_Ireduce(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Ireduce(s, r, count, dt, op, root, comm, req);
  }
  return TracedStart(Coll(COMMPROF_OP_REDUCE, comm, TypeBytes(dt, count), dt, op, root, kNameIreduce), req,
                     [&] { return PMPI_Ireduce(s, r, count, dt, op, root, comm, req); });
}

int MPI_Igather(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, int root, MPI_Comm comm,
                MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Igather(s, sc, sdt, r, rc, rdt, root, comm, req);
  }
  return TracedStart(GatherCall(*mpi, s, sc, sdt, rc, rdt, root, comm, kNameIgather), req,
                     [&] { return PMPI_Igather(s, sc, sdt, r, rc, rdt, root, comm, req); });
}

int MPI_Igatherv(const void* s, int sc, MPI_Datatype sdt, void* r, const int rcs[], const int displs[],
                 MPI_Datatype rdt, int root, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Igatherv(s, sc, sdt, r, rcs, displs, rdt, root, comm, req);
  }
  return TracedStart(GathervCall(*mpi, sc, sdt, rcs, rdt, root, comm, kNameIgatherv), req,
                     [&] { return PMPI_Igatherv(s, sc, sdt, r, rcs, displs, rdt, root, comm, req); });
}

int MPI_Iscatter(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, int root, MPI_Comm comm,
                 MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Iscatter(s, sc, sdt, r, rc, rdt, root, comm, req);
  }
  return TracedStart(ScatterCall(*mpi, sc, sdt, rc, rdt, root, comm, kNameIscatter), req,
                     [&] { return PMPI_Iscatter(s, sc, sdt, r, rc, rdt, root, comm, req); });
}

int MPI_Iscatterv(const void* s, const int scs[], const int displs[], MPI_Datatype sdt, void* r, int rc,
                  MPI_Datatype rdt, int root, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Iscatterv(s, scs, displs, sdt, r, rc, rdt, root, comm, req);
  }
  return TracedStart(ScattervCall(*mpi, scs, sdt, rc, rdt, root, comm, kNameIscatterv), req,
                     [&] { return PMPI_Iscatterv(s, scs, displs, sdt, r, rc, rdt, root, comm, req); });
}

int MPI_Iallgatherv(const void* s, int sc, MPI_Datatype sdt, void* r, const int rcs[], const int displs[],
                    MPI_Datatype rdt, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Iallgatherv(s, sc, sdt, r, rcs, displs, rdt, comm, req);
  }
  return TracedStart(AllgathervCall(*mpi, rcs, rdt, comm, kNameIallgatherv), req,
                     [&] { return PMPI_Iallgatherv(s, sc, sdt, r, rcs, displs, rdt, comm, req); });
}

int MPI_Ialltoallv(const void* s, const int scs[], const int sd[], MPI_Datatype sdt, void* r, const int rcs[],
                   const int rd[], MPI_Datatype rdt, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Ialltoallv(s, scs, sd, sdt, r, rcs, rd, rdt, comm, req);
  }
  return TracedStart(AlltoallvCall(*mpi, s, scs, sdt, rcs, rdt, comm, kNameIalltoallv), req,
                     [&] { return PMPI_Ialltoallv(s, scs, sd, sdt, r, rcs, rd, rdt, comm, req); });
}

int MPI_Ireduce_scatter(const void* s, void* r, const int rcs[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                        MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Ireduce_scatter(s, r, rcs, dt, op, comm, req);
  }
  return TracedStart(ReduceScatterCall(*mpi, rcs, dt, op, comm, kNameIreduceScatter), req,
                     [&] { return PMPI_Ireduce_scatter(s, r, rcs, dt, op, comm, req); });
}

int MPI_Ireduce_scatter_block(const void* s, void* r, int rc, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                              MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Ireduce_scatter_block(s, r, rc, dt, op, comm, req);
  }
  return TracedStart(ReduceScatterBlockCall(*mpi, rc, dt, op, comm, kNameIreduceScatterBlock), req,
                     [&] { return PMPI_Ireduce_scatter_block(s, r, rc, dt, op, comm, req); });
}

int MPI_Iscan(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Iscan(s, r, count, dt, op, comm, req);
  }
  return TracedStart(Coll(COMMPROF_OP_SCAN, comm, TypeBytes(dt, count), dt, op, COMMPROF_NO_PEER, kNameIscan), req,
                     [&] { return PMPI_Iscan(s, r, count, dt, op, comm, req); });
}

int MPI_Iexscan(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Iexscan(s, r, count, dt, op, comm, req);
  }
  return TracedStart(Coll(COMMPROF_OP_EXSCAN, comm, TypeBytes(dt, count), dt, op, COMMPROF_NO_PEER, kNameIexscan), req,
                     [&] { return PMPI_Iexscan(s, r, count, dt, op, comm, req); });
}

// ---- point to point ----
int MPI_Send(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Send(buf, count, dt, dest, tag, comm);
  }
  return Traced(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag),
                [&] { return PMPI_Send(buf, count, dt, dest, tag, comm); });
}

int MPI_Recv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status* status) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Recv(buf, count, dt, src, tag, comm, status);
  }
  Runtime& rt = mpi->runtime();
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const uint32_t stack = rt.CaptureStack();
  commprof_event e = BeginEvent(*mpi, P2p(COMMPROF_OP_RECV, comm, TypeBytes(dt, count), dt, src, tag));
  InflightSlot& inflight = rt.Thread()->inflight;  // as in Traced (mpi_calls.h)
  const bool published = inflight.Publish(e, stack);
  int rc = PMPI_Recv(buf, count, dt, src, tag, comm, st);
  e.end_ns = rt.Now();
  if (published) {
    inflight.Clear(e.end_ns);
  }
  int n = 0;
  if (rc == MPI_SUCCESS && PMPI_Get_count(st, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED) {
    e.bytes = static_cast<uint64_t>(n);
    e.peer = st->MPI_SOURCE;
    e.correlation = static_cast<uint32_t>(st->MPI_TAG);
  }
  rt.Record(e);
  rt.RecordCallSite(stack, e);
  return rc;
}

// Ssend, Bsend and Rsend are sends like MPI_Send, told apart by their names.
int MPI_Ssend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Ssend(buf, count, dt, dest, tag, comm);
  }
  return Traced(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag, kNameSsend),
                [&] { return PMPI_Ssend(buf, count, dt, dest, tag, comm); });
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Bsend(buf, count, dt, dest, tag, comm);
  }
  return Traced(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag, kNameBsend),
                [&] { return PMPI_Bsend(buf, count, dt, dest, tag, comm); });
}

int MPI_Rsend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Rsend(buf, count, dt, dest, tag, comm);
  }
  return Traced(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag, kNameRsend),
                [&] { return PMPI_Rsend(buf, count, dt, dest, tag, comm); });
}

int MPI_Sendrecv(const void* sbuf, int sc, MPI_Datatype sdt, int dest, int stag, void* rbuf, int rc, MPI_Datatype rdt,
                 int src, int rtag, MPI_Comm comm, MPI_Status* status) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Sendrecv(sbuf, sc, sdt, dest, stag, rbuf, rc, rdt, src, rtag, comm, status);
  }
  return TracedSendrecv(
      P2p(COMMPROF_OP_SENDRECV, comm, TypeBytes(sdt, sc), sdt, dest, stag),
      P2p(COMMPROF_OP_SENDRECV, comm, TypeBytes(rdt, rc), rdt, src, rtag), status,
      [&](MPI_Status* st) { return PMPI_Sendrecv(sbuf, sc, sdt, dest, stag, rbuf, rc, rdt, src, rtag, comm, st); });
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype dt, int dest, int stag, int src, int rtag, MPI_Comm comm,
                         MPI_Status* status) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, status);
  }
  uint64_t bytes = TypeBytes(dt, count);
  return TracedSendrecv(
      P2p(COMMPROF_OP_SENDRECV, comm, bytes, dt, dest, stag, kNameSendrecvReplace),
      P2p(COMMPROF_OP_SENDRECV, comm, bytes, dt, src, rtag, kNameSendrecvReplace), status,
      [&](MPI_Status* st) { return PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag, comm, st); });
}

int MPI_Isend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Isend(buf, count, dt, dest, tag, comm, req);
  }
  return TracedStart(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag, kNameIsend), req,
                     [&] { return PMPI_Isend(buf, count, dt, dest, tag, comm, req); });
}

int MPI_Issend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Issend(buf, count, dt, dest, tag, comm, req);
  }
  return TracedStart(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag, kNameIssend), req,
                     [&] { return PMPI_Issend(buf, count, dt, dest, tag, comm, req); });
}

int MPI_Ibsend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Ibsend(buf, count, dt, dest, tag, comm, req);
  }
  return TracedStart(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag, kNameIbsend), req,
                     [&] { return PMPI_Ibsend(buf, count, dt, dest, tag, comm, req); });
}

int MPI_Irsend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Irsend(buf, count, dt, dest, tag, comm, req);
  }
  return TracedStart(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag, kNameIrsend), req,
                     [&] { return PMPI_Irsend(buf, count, dt, dest, tag, comm, req); });
}

int MPI_Irecv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Irecv(buf, count, dt, src, tag, comm, req);
  }
  return TracedStart(P2p(COMMPROF_OP_RECV, comm, TypeBytes(dt, count), dt, src, tag, kNameIrecv), req,
                     [&] { return PMPI_Irecv(buf, count, dt, src, tag, comm, req); });
}

// ---- completion (mpi_completion.h) ----
int MPI_Wait(MPI_Request* req, MPI_Status* status) {
  CompletionCall c{.op = COMMPROF_OP_WAIT, .requests = req, .statuses = status};
  return TracedCompletion(c, [&](MPI_Status* st) { return PMPI_Wait(req, st); });
}

int MPI_Test(MPI_Request* req, int* flag, MPI_Status* status) {
  CompletionCall c{.op = COMMPROF_OP_TEST, .requests = req, .statuses = status, .flag = flag};
  return TracedCompletion(c, [&](MPI_Status* st) { return PMPI_Test(req, flag, st); });
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
  CompletionCall c{.op = COMMPROF_OP_WAITALL,
                   .shape = CompletionShape::kAll,
                   .count = count,
                   .requests = reqs,
                   .statuses = statuses};
  return TracedCompletion(c, [&](MPI_Status* st) { return PMPI_Waitall(count, reqs, st); });
}

int MPI_Testall(int count, MPI_Request reqs[], int* flag, MPI_Status statuses[]) {
  CompletionCall c{.op = COMMPROF_OP_TEST,
                   .name = kNameTestall,
                   .shape = CompletionShape::kAll,
                   .count = count,
                   .requests = reqs,
                   .statuses = statuses,
                   .flag = flag};
  return TracedCompletion(c, [&](MPI_Status* st) { return PMPI_Testall(count, reqs, flag, st); });
}

int MPI_Waitany(int count, MPI_Request reqs[], int* index, MPI_Status* status) {
  CompletionCall c{.op = COMMPROF_OP_WAITANY,
                   .shape = CompletionShape::kAny,
                   .count = count,
                   .requests = reqs,
                   .statuses = status,
                   .index = index};
  return TracedCompletion(c, [&](MPI_Status* st) { return PMPI_Waitany(count, reqs, index, st); });
}

int MPI_Testany(int count, MPI_Request reqs[], int* index, int* flag, MPI_Status* status) {
  CompletionCall c{.op = COMMPROF_OP_TEST,
                   .name = kNameTestany,
                   .shape = CompletionShape::kAny,
                   .count = count,
                   .requests = reqs,
                   .statuses = status,
                   .flag = flag,
                   .index = index};
  return TracedCompletion(c, [&](MPI_Status* st) { return PMPI_Testany(count, reqs, index, flag, st); });
}

int MPI_Waitsome(int count, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[]) {
  CompletionCall c{.op = COMMPROF_OP_WAITALL,
                   .name = kNameWaitsome,
                   .shape = CompletionShape::kSome,
                   .count = count,
                   .requests = reqs,
                   .statuses = statuses,
                   .outcount = outcount,
                   .indices = indices};
  return TracedCompletion(c, [&](MPI_Status* st) { return PMPI_Waitsome(count, reqs, outcount, indices, st); });
}

int MPI_Testsome(int count, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[]) {
  CompletionCall c{.op = COMMPROF_OP_TEST,
                   .name = kNameTestsome,
                   .shape = CompletionShape::kSome,
                   .count = count,
                   .requests = reqs,
                   .statuses = statuses,
                   .outcount = outcount,
                   .indices = indices};
  return TracedCompletion(c, [&](MPI_Status* st) { return PMPI_Testsome(count, reqs, outcount, indices, st); });
}

int MPI_Request_free(MPI_Request* req) {
  MpiSource* mpi = ActiveMpiSource();
  if (mpi == nullptr) {
    return PMPI_Request_free(req);
  }
  Runtime& rt = mpi->runtime();
  MPI_Request saved = *req;
  int rc = PMPI_Request_free(req);
  commprof_event e;
  if (rc == MPI_SUCCESS && saved != MPI_REQUEST_NULL && rt.requests().Take(RequestKey(saved), e)) {
    // The operation goes on without us ever seeing it complete: keep it, flagged, ending here.
    e.end_ns = rt.Now();
    e.flags |= COMMPROF_FLAG_INCOMPLETE;
    rt.Record(e);
  }
  return rc;
}

// ---- communicator creation ----
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  return TracedCommCreate(COMMPROF_OP_COMM_DUP, comm, newcomm, [&] { return PMPI_Comm_dup(comm, newcomm); });
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  return TracedCommCreate(COMMPROF_OP_COMM_SPLIT, comm, newcomm,
                          [&] { return PMPI_Comm_split(comm, color, key, newcomm); });
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* newcomm) {
  return TracedCommCreate(COMMPROF_OP_COMM_SPLIT, comm, newcomm,
                          [&] { return PMPI_Comm_split_type(comm, type, key, info, newcomm); });
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  return TracedCommCreate(COMMPROF_OP_COMM_CREATE, comm, newcomm,
                          [&] { return PMPI_Comm_create(comm, group, newcomm); });
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  return TracedCommCreate(COMMPROF_OP_COMM_CREATE, comm, newcomm,
                          [&] { return PMPI_Comm_create_group(comm, group, tag, newcomm); });
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* newcomm) {
  return TracedCommCreate(COMMPROF_OP_COMM_CREATE, comm, newcomm,
                          [&] { return PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm); });
}

}  // extern "C"
