// PMPI interposition: every wrapped MPI call becomes one event with entry and exit times, bytes,
// datatype, root/peer and communicator (id + per-communicator sequence number for collectives).
//
// Byte counts follow nccl-tests' "size" (the largest buffer of the operation), so bus bandwidth
// can be computed later with its factors; docs/file-format.md lists the rule for each call.
// Non-blocking calls are parked in the RequestTable at issue and become one event, issue to
// completion, when Wait/Test sees them complete; the Wait/Test call itself is an MPI_WAIT event.
// With no active runtime (not a profiled run) every wrapper is a plain forward to PMPI.
#include <mpi.h>

#include <cstring>
#include <vector>

#include "collector/event_builder.h"
#include "collector/mpi_clock_sync.h"
#include "collector/mpi_comm_ids.h"
#include "collector/runtime.h"
#include "commprof/event.h"

namespace commprof {
namespace {

uint32_t g_op_name[256];               // name ids of the wrapped calls, interned once at MPI_Init
MpiClockSync* g_clock_sync = nullptr;  // created at MPI_Init when alignment is on; lives until exit

// The runtime when it records MPI calls (`--activities` includes mpi). MPI_Init and MPI_Finalize
// are recorded and drive clock alignment either way: they bound the rank's run.
Runtime* MpiRuntime() {
  Runtime* rt = ActiveRuntime();
  return rt != nullptr && rt->Records(kActivityMpi) ? rt : nullptr;
}

const char* OpName(uint8_t op) {
  switch (op) {
    case COMMPROF_OP_BARRIER:
      return "MPI_Barrier";
    case COMMPROF_OP_BCAST:
      return "MPI_Bcast";
    case COMMPROF_OP_REDUCE:
      return "MPI_Reduce";
    case COMMPROF_OP_ALLREDUCE:
      return "MPI_Allreduce";
    case COMMPROF_OP_GATHER:
      return "MPI_Gather";
    case COMMPROF_OP_GATHERV:
      return "MPI_Gatherv";
    case COMMPROF_OP_SCATTER:
      return "MPI_Scatter";
    case COMMPROF_OP_SCATTERV:
      return "MPI_Scatterv";
    case COMMPROF_OP_ALLGATHER:
      return "MPI_Allgather";
    case COMMPROF_OP_ALLGATHERV:
      return "MPI_Allgatherv";
    case COMMPROF_OP_ALLTOALL:
      return "MPI_Alltoall";
    case COMMPROF_OP_ALLTOALLV:
      return "MPI_Alltoallv";
    case COMMPROF_OP_REDUCE_SCATTER:
      return "MPI_Reduce_scatter";
    case COMMPROF_OP_REDUCE_SCATTER_BLOCK:
      return "MPI_Reduce_scatter_block";
    case COMMPROF_OP_SCAN:
      return "MPI_Scan";
    case COMMPROF_OP_SEND:
      return "MPI_Send";
    case COMMPROF_OP_RECV:
      return "MPI_Recv";
    case COMMPROF_OP_SENDRECV:
      return "MPI_Sendrecv";
    case COMMPROF_OP_WAIT:
      return "MPI_Wait";
    case COMMPROF_OP_WAITALL:
      return "MPI_Waitall";
    case COMMPROF_OP_WAITANY:
      return "MPI_Waitany";
    case COMMPROF_OP_TEST:
      return "MPI_Test";
    case COMMPROF_OP_COMM_DUP:
      return "MPI_Comm_dup";
    case COMMPROF_OP_COMM_SPLIT:
      return "MPI_Comm_split";
    case COMMPROF_OP_COMM_CREATE:
      return "MPI_Comm_create";
    default:
      return nullptr;
  }
}

// Non-blocking variants share the blocking call's op type and carry the NONBLOCKING flag;
// their names are distinct so users see what their code called.
enum : uint8_t {
  kNameIallreduce = 200,
  kNameIbcast,
  kNameIallgather,
  kNameIalltoall,
  kNameIsend,
  kNameIrecv,
  kNameInit,
  kNameFinalize,
  kNameWaitsome,
  kNameTestall,
  kNameTestany,
  kNameTestsome
};

void InternNames(Runtime* rt) {
  for (int op = 0; op < 200; ++op) {
    const char* n = OpName(static_cast<uint8_t>(op));
    g_op_name[op] = n != nullptr ? rt->Intern(n) : 0;
  }
  const char* extra[] = {"MPI_Iallreduce", "MPI_Ibcast",  "MPI_Iallgather", "MPI_Ialltoall",
                         "MPI_Isend",      "MPI_Irecv",   "MPI_Init",       "MPI_Finalize",
                         "MPI_Waitsome",   "MPI_Testall", "MPI_Testany",    "MPI_Testsome"};
  for (int i = 0; i < 12; ++i) g_op_name[kNameIallreduce + i] = rt->Intern(extra[i]);
}

uint8_t DatatypeCode(MPI_Datatype dt) {
  if (dt == MPI_DATATYPE_NULL) return COMMPROF_DT_NONE;
  if (dt == MPI_BYTE || dt == MPI_PACKED) return COMMPROF_DT_BYTE;
  if (dt == MPI_CHAR || dt == MPI_SIGNED_CHAR) return COMMPROF_DT_CHAR;
  if (dt == MPI_INT8_T) return COMMPROF_DT_INT8;
  if (dt == MPI_UNSIGNED_CHAR || dt == MPI_UINT8_T) return COMMPROF_DT_UINT8;
  if (dt == MPI_SHORT || dt == MPI_INT16_T) return COMMPROF_DT_INT16;
  if (dt == MPI_UNSIGNED_SHORT || dt == MPI_UINT16_T) return COMMPROF_DT_UINT16;
  if (dt == MPI_INT || dt == MPI_INT32_T) return COMMPROF_DT_INT32;
  if (dt == MPI_UNSIGNED || dt == MPI_UINT32_T) return COMMPROF_DT_UINT32;
  if (dt == MPI_LONG || dt == MPI_LONG_LONG || dt == MPI_INT64_T) return COMMPROF_DT_INT64;
  if (dt == MPI_UNSIGNED_LONG || dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_UINT64_T) return COMMPROF_DT_UINT64;
  if (dt == MPI_FLOAT) return COMMPROF_DT_FLOAT32;
  if (dt == MPI_DOUBLE) return COMMPROF_DT_FLOAT64;
  if (dt == MPI_LONG_DOUBLE) return COMMPROF_DT_LONG_DOUBLE;
  int ni, na, nd, combiner;
  PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner);
  return combiner == MPI_COMBINER_NAMED ? COMMPROF_DT_OTHER : COMMPROF_DT_DERIVED;
}

uint8_t ReduceOpCode(MPI_Op op) {
  if (op == MPI_OP_NULL) return COMMPROF_RED_NONE;
  if (op == MPI_SUM) return COMMPROF_RED_SUM;
  if (op == MPI_PROD) return COMMPROF_RED_PROD;
  if (op == MPI_MAX) return COMMPROF_RED_MAX;
  if (op == MPI_MIN) return COMMPROF_RED_MIN;
  if (op == MPI_LAND) return COMMPROF_RED_LAND;
  if (op == MPI_LOR) return COMMPROF_RED_LOR;
  if (op == MPI_BAND) return COMMPROF_RED_BAND;
  if (op == MPI_BOR) return COMMPROF_RED_BOR;
  if (op == MPI_MAXLOC) return COMMPROF_RED_MAXLOC;
  if (op == MPI_MINLOC) return COMMPROF_RED_MINLOC;
  return COMMPROF_RED_USER;
}

uint64_t TypeBytes(MPI_Datatype dt, uint64_t count) {
  if (dt == MPI_DATATYPE_NULL) return 0;
  int size = 0;
  PMPI_Type_size(dt, &size);
  return count * static_cast<uint64_t>(size > 0 ? size : 0);
}

uint64_t SumCounts(const int counts[], int n) {
  uint64_t s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<uint64_t>(counts[i] > 0 ? counts[i] : 0);
  return s;
}

int CommSize(MPI_Comm comm) { return LookupComm(comm)->size; }
int CommRank(MPI_Comm comm) {
  int r = 0;
  PMPI_Comm_rank(comm, &r);
  return r;
}

uintptr_t RequestKey(MPI_Request r) {
  uintptr_t k = 0;
  static_assert(sizeof(MPI_Request) <= sizeof(uintptr_t));
  std::memcpy(&k, &r, sizeof r);
  return k;
}

// What one call is about; turned into an event by Begin().
struct Call {
  uint8_t kind = COMMPROF_KIND_MPI_COLLECTIVE;
  uint8_t op = COMMPROF_OP_NONE;
  uint8_t name = 0;  // index into g_op_name; defaults to op
  MPI_Comm comm = MPI_COMM_NULL;
  uint64_t bytes = 0;
  MPI_Datatype dt = MPI_DATATYPE_NULL;
  MPI_Op red = MPI_OP_NULL;
  int peer = COMMPROF_NO_PEER;
  uint32_t tag = 0;
};

commprof_event Begin(Runtime* rt, const Call& c) {
  commprof_event e{};
  e.kind = c.kind;
  e.subtype = c.op;
  e.name_id = g_op_name[c.name != 0 ? c.name : c.op];
  e.bytes = c.bytes;
  e.datatype = DatatypeCode(c.dt);
  e.reduce_op = ReduceOpCode(c.red);
  e.peer = c.peer;
  e.device = COMMPROF_HOST_DEVICE;
  e.correlation = c.tag;
  if (c.comm != MPI_COMM_NULL) {
    CommInfo* info = LookupComm(c.comm);
    e.comm_id = info->id;
    if (info->untracked) e.flags |= COMMPROF_FLAG_UNTRACKED_COMM;
    if (c.kind == COMMPROF_KIND_MPI_COLLECTIVE) e.seq = info->next_seq.fetch_add(1, std::memory_order_relaxed);
  }
  e.start_ns = rt->Now();
  return e;
}

template <typename F>
int Traced(const Call& c, F&& pmpi) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr) return pmpi();
  commprof_event e = Begin(rt, c);
  int rc = pmpi();
  e.end_ns = rt->Now();
  rt->Record(e);
  // Periodic clock epochs ride on blocking world collectives (see mpi_clock_sync.h).
  if (g_clock_sync != nullptr && e.kind == COMMPROF_KIND_MPI_COLLECTIVE && e.comm_id == COMMPROF_COMM_WORLD_ID) {
    g_clock_sync->AfterWorldCollective(e.seq);
  }
  return rc;
}

// Issue of a non-blocking operation: parked until its completion is seen.
template <typename F>
int TracedStart(Call c, MPI_Request* request, F&& pmpi) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr) return pmpi();
  commprof_event e = Begin(rt, c);
  e.flags |= COMMPROF_FLAG_NONBLOCKING;
  int rc = pmpi();
  e.end_ns = rt->Now();  // replaced by the completion time
  if (rc == MPI_SUCCESS && !rt->requests().Insert(RequestKey(*request), e)) {
    e.flags |= COMMPROF_FLAG_INCOMPLETE;  // table full (counted): keep the issue at least
    rt->Record(e);
  }
  return rc;
}

void Complete(Runtime* rt, MPI_Request saved, const MPI_Status* status, uint64_t now) {
  if (saved == MPI_REQUEST_NULL) return;
  commprof_event e;
  if (!rt->requests().Take(RequestKey(saved), e)) return;
  e.end_ns = now;
  if (e.subtype == COMMPROF_OP_RECV && status != nullptr) {
    int n = 0;
    if (PMPI_Get_count(status, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED) e.bytes = static_cast<uint64_t>(n);
    e.peer = status->MPI_SOURCE;
    e.correlation = static_cast<uint32_t>(status->MPI_TAG);
  }
  rt->Record(e);
}

// Scratch for the request-array calls: requests are copied before PMPI nulls them, statuses are
// supplied when the caller passed MPI_STATUSES_IGNORE. Grows once, then reused.
struct Scratch {
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
  std::vector<int> indices;
};
thread_local Scratch t_scratch;

MPI_Status* StatusesFor(MPI_Status* user, int n) {
  if (user != MPI_STATUSES_IGNORE) return user;
  if (t_scratch.statuses.size() < static_cast<size_t>(n)) t_scratch.statuses.resize(static_cast<size_t>(n));
  return t_scratch.statuses.data();
}
MPI_Request* SaveRequests(const MPI_Request* r, int n) {
  if (t_scratch.requests.size() < static_cast<size_t>(n)) t_scratch.requests.resize(static_cast<size_t>(n));
  std::memcpy(t_scratch.requests.data(), r, sizeof(MPI_Request) * static_cast<size_t>(n));
  return t_scratch.requests.data();
}

void RecordWait(Runtime* rt, uint8_t op, uint8_t name, uint64_t t0, uint64_t t1, int count) {
  commprof_event e = BlankEvent(COMMPROF_KIND_MPI_WAIT, t0, t1);
  e.subtype = op;
  e.name_id = g_op_name[name != 0 ? name : op];
  e.bytes = static_cast<uint64_t>(count);  // number of requests passed
  rt->Record(e);
}

// Creation of a communicator: agree on its id, record the event (comm_id = new id,
// seq = parent id, bytes = new size, peer = this rank in it).
template <typename F>
int TracedCommCreate(uint8_t op, MPI_Comm parent, MPI_Comm* newcomm, F&& pmpi) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr) return pmpi();
  uint64_t t0 = rt->Now();
  int rc = pmpi();
  if (rc != MPI_SUCCESS || *newcomm == MPI_COMM_NULL) return rc;
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_COMM;
  e.subtype = op;
  e.name_id = g_op_name[op];
  e.comm_id = AssignCommId(*newcomm);
  e.seq = LookupComm(parent)->id;
  e.bytes = static_cast<uint64_t>(CommSize(*newcomm));
  e.peer = CommRank(*newcomm);
  e.device = COMMPROF_HOST_DEVICE;
  e.start_ns = t0;
  e.end_ns = rt->Now();
  rt->Record(e);
  return rc;
}

void OnInit(uint64_t t0) {
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  if (std::getenv("COMMPROF_AGGREGATOR") == nullptr && std::getenv("COMMPROF_SPOOL_DIR") == nullptr) return;
  InitCommIds(rank);
  Runtime* rt = EnsureRuntime(rank, size);
  if (rt == nullptr) return;
  InternNames(rt);
  commprof_event e = BlankEvent(COMMPROF_KIND_MPI_INIT, rt->ToLocal(t0), rt->Now());
  e.name_id = g_op_name[kNameInit];
  e.comm_id = COMMPROF_COMM_WORLD_ID;
  e.bytes = static_cast<uint64_t>(size);  // world size
  rt->Record(e);
  if (rt->config().clock_sync && g_clock_sync == nullptr) {
    g_clock_sync = new MpiClockSync(*rt, rt->config().clock_sync_rounds, rt->config().clock_sync_interval_ms);
    g_clock_sync->Start();
  }
}

Call Coll(uint8_t op, MPI_Comm comm, uint64_t bytes, MPI_Datatype dt = MPI_DATATYPE_NULL, MPI_Op red = MPI_OP_NULL,
          int root = COMMPROF_NO_PEER, uint8_t name = 0) {
  Call c;
  c.op = op;
  c.comm = comm;
  c.bytes = bytes;
  c.dt = dt;
  c.red = red;
  c.peer = root;
  c.name = name;
  return c;
}

Call P2p(uint8_t op, MPI_Comm comm, uint64_t bytes, MPI_Datatype dt, int peer, int tag, uint8_t name = 0) {
  Call c;
  c.kind = COMMPROF_KIND_MPI_P2P;
  c.op = op;
  c.comm = comm;
  c.bytes = bytes;
  c.dt = dt;
  c.peer = peer;
  c.tag = static_cast<uint32_t>(tag);
  c.name = name;
  return c;
}

}  // namespace
}  // namespace commprof

using namespace commprof;  // NOLINT: the C entry points below are the module's edge

extern "C" {

// ---- lifetime ----
int MPI_Init(int* argc, char*** argv) {
  uint64_t t0 = SteadyNowNs();
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) OnInit(t0);
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  uint64_t t0 = SteadyNowNs();
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) OnInit(t0);
  return rc;
}

int MPI_Finalize(void) {
  Runtime* rt = ActiveRuntime();
  if (rt == nullptr) return PMPI_Finalize();
  if (g_clock_sync != nullptr) g_clock_sync->Finish();  // needs MPI: before PMPI_Finalize
  uint64_t t0 = rt->Now();
  int rc = PMPI_Finalize();
  commprof_event e = BlankEvent(COMMPROF_KIND_MPI_FINALIZE, t0, rt->Now());
  e.name_id = g_op_name[kNameFinalize];
  rt->Record(e);
  ShutdownRuntime();
  return rc;
}

// ---- blocking collectives ----
int MPI_Barrier(MPI_Comm comm) {
  return Traced(Coll(COMMPROF_OP_BARRIER, comm, 0), [&] { return PMPI_Barrier(comm); });
}

int MPI_Bcast(void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Bcast(buf, count, dt, root, comm);
  return Traced(Coll(COMMPROF_OP_BCAST, comm, TypeBytes(dt, count), dt, MPI_OP_NULL, root),
                [&] { return PMPI_Bcast(buf, count, dt, root, comm); });
}

int MPI_Reduce(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Reduce(s, r, count, dt, op, root, comm);
  return Traced(Coll(COMMPROF_OP_REDUCE, comm, TypeBytes(dt, count), dt, op, root),
                [&] { return PMPI_Reduce(s, r, count, dt, op, root, comm); });
}

int MPI_Allreduce(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Allreduce(s, r, count, dt, op, comm);
  return Traced(Coll(COMMPROF_OP_ALLREDUCE, comm, TypeBytes(dt, count), dt, op),
                [&] { return PMPI_Allreduce(s, r, count, dt, op, comm); });
}

int MPI_Gather(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, int root, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Gather(s, sc, sdt, r, rc, rdt, root, comm);
  uint64_t n = static_cast<uint64_t>(CommSize(comm));
  bool in_place = s == MPI_IN_PLACE;
  uint64_t bytes = in_place ? TypeBytes(rdt, rc) * n : TypeBytes(sdt, sc) * n;
  return Traced(Coll(COMMPROF_OP_GATHER, comm, bytes, in_place ? rdt : sdt, MPI_OP_NULL, root),
                [&] { return PMPI_Gather(s, sc, sdt, r, rc, rdt, root, comm); });
}

int MPI_Gatherv(const void* s, int sc, MPI_Datatype sdt, void* r, const int rcs[], const int displs[], MPI_Datatype rdt,
                int root, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Gatherv(s, sc, sdt, r, rcs, displs, rdt, root, comm);
  bool at_root = CommRank(comm) == root;
  uint64_t bytes = at_root ? TypeBytes(rdt, SumCounts(rcs, CommSize(comm))) : TypeBytes(sdt, sc);
  return Traced(Coll(COMMPROF_OP_GATHERV, comm, bytes, at_root ? rdt : sdt, MPI_OP_NULL, root),
                [&] { return PMPI_Gatherv(s, sc, sdt, r, rcs, displs, rdt, root, comm); });
}

int MPI_Scatter(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, int root, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Scatter(s, sc, sdt, r, rc, rdt, root, comm);
  uint64_t n = static_cast<uint64_t>(CommSize(comm));
  bool at_root = CommRank(comm) == root;
  uint64_t bytes = at_root ? TypeBytes(sdt, sc) * n : TypeBytes(rdt, rc) * n;
  return Traced(Coll(COMMPROF_OP_SCATTER, comm, bytes, at_root ? sdt : rdt, MPI_OP_NULL, root),
                [&] { return PMPI_Scatter(s, sc, sdt, r, rc, rdt, root, comm); });
}

int MPI_Scatterv(const void* s, const int scs[], const int displs[], MPI_Datatype sdt, void* r, int rc,
                 MPI_Datatype rdt, int root, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Scatterv(s, scs, displs, sdt, r, rc, rdt, root, comm);
  bool at_root = CommRank(comm) == root;
  uint64_t bytes = at_root ? TypeBytes(sdt, SumCounts(scs, CommSize(comm))) : TypeBytes(rdt, rc);
  return Traced(Coll(COMMPROF_OP_SCATTERV, comm, bytes, at_root ? sdt : rdt, MPI_OP_NULL, root),
                [&] { return PMPI_Scatterv(s, scs, displs, sdt, r, rc, rdt, root, comm); });
}

int MPI_Allgather(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Allgather(s, sc, sdt, r, rc, rdt, comm);
  uint64_t bytes = TypeBytes(rdt, rc) * static_cast<uint64_t>(CommSize(comm));
  return Traced(Coll(COMMPROF_OP_ALLGATHER, comm, bytes, rdt),
                [&] { return PMPI_Allgather(s, sc, sdt, r, rc, rdt, comm); });
}

int MPI_Allgatherv(const void* s, int sc, MPI_Datatype sdt, void* r, const int rcs[], const int displs[],
                   MPI_Datatype rdt, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Allgatherv(s, sc, sdt, r, rcs, displs, rdt, comm);
  uint64_t bytes = TypeBytes(rdt, SumCounts(rcs, CommSize(comm)));
  return Traced(Coll(COMMPROF_OP_ALLGATHERV, comm, bytes, rdt),
                [&] { return PMPI_Allgatherv(s, sc, sdt, r, rcs, displs, rdt, comm); });
}

int MPI_Alltoall(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Alltoall(s, sc, sdt, r, rc, rdt, comm);
  uint64_t bytes = TypeBytes(rdt, rc) * static_cast<uint64_t>(CommSize(comm));
  return Traced(Coll(COMMPROF_OP_ALLTOALL, comm, bytes, rdt),
                [&] { return PMPI_Alltoall(s, sc, sdt, r, rc, rdt, comm); });
}

int MPI_Alltoallv(const void* s, const int scs[], const int sd[], MPI_Datatype sdt, void* r, const int rcs[],
                  const int rd[], MPI_Datatype rdt, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Alltoallv(s, scs, sd, sdt, r, rcs, rd, rdt, comm);
  bool in_place = s == MPI_IN_PLACE;
  int n = CommSize(comm);
  uint64_t bytes = in_place ? TypeBytes(rdt, SumCounts(rcs, n)) : TypeBytes(sdt, SumCounts(scs, n));
  return Traced(Coll(COMMPROF_OP_ALLTOALLV, comm, bytes, in_place ? rdt : sdt),
                [&] { return PMPI_Alltoallv(s, scs, sd, sdt, r, rcs, rd, rdt, comm); });
}

int MPI_Reduce_scatter(const void* s, void* r, const int rcs[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Reduce_scatter(s, r, rcs, dt, op, comm);
  uint64_t bytes = TypeBytes(dt, SumCounts(rcs, CommSize(comm)));
  return Traced(Coll(COMMPROF_OP_REDUCE_SCATTER, comm, bytes, dt, op),
                [&] { return PMPI_Reduce_scatter(s, r, rcs, dt, op, comm); });
}

int MPI_Reduce_scatter_block(const void* s, void* r, int rc, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Reduce_scatter_block(s, r, rc, dt, op, comm);
  uint64_t bytes = TypeBytes(dt, rc) * static_cast<uint64_t>(CommSize(comm));
  return Traced(Coll(COMMPROF_OP_REDUCE_SCATTER_BLOCK, comm, bytes, dt, op),
                [&] { return PMPI_Reduce_scatter_block(s, r, rc, dt, op, comm); });
}

int MPI_Scan(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Scan(s, r, count, dt, op, comm);
  return Traced(Coll(COMMPROF_OP_SCAN, comm, TypeBytes(dt, count), dt, op),
                [&] { return PMPI_Scan(s, r, count, dt, op, comm); });
}

// ---- non-blocking collectives ----
int MPI_Iallreduce(const void* s, void* r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  if (MpiRuntime() == nullptr) return PMPI_Iallreduce(s, r, count, dt, op, comm, req);
  return TracedStart(Coll(COMMPROF_OP_ALLREDUCE, comm, TypeBytes(dt, count), dt, op, COMMPROF_NO_PEER, kNameIallreduce),
                     req, [&] { return PMPI_Iallreduce(s, r, count, dt, op, comm, req); });
}

int MPI_Ibcast(void* buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request* req) {
  if (MpiRuntime() == nullptr) return PMPI_Ibcast(buf, count, dt, root, comm, req);
  return TracedStart(Coll(COMMPROF_OP_BCAST, comm, TypeBytes(dt, count), dt, MPI_OP_NULL, root, kNameIbcast), req,
                     [&] { return PMPI_Ibcast(buf, count, dt, root, comm, req); });
}

int MPI_Iallgather(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, MPI_Comm comm,
                   MPI_Request* req) {
  if (MpiRuntime() == nullptr) return PMPI_Iallgather(s, sc, sdt, r, rc, rdt, comm, req);
  uint64_t bytes = TypeBytes(rdt, rc) * static_cast<uint64_t>(CommSize(comm));
  return TracedStart(Coll(COMMPROF_OP_ALLGATHER, comm, bytes, rdt, MPI_OP_NULL, COMMPROF_NO_PEER, kNameIallgather), req,
                     [&] { return PMPI_Iallgather(s, sc, sdt, r, rc, rdt, comm, req); });
}

int MPI_Ialltoall(const void* s, int sc, MPI_Datatype sdt, void* r, int rc, MPI_Datatype rdt, MPI_Comm comm,
                  MPI_Request* req) {
  if (MpiRuntime() == nullptr) return PMPI_Ialltoall(s, sc, sdt, r, rc, rdt, comm, req);
  uint64_t bytes = TypeBytes(rdt, rc) * static_cast<uint64_t>(CommSize(comm));
  return TracedStart(Coll(COMMPROF_OP_ALLTOALL, comm, bytes, rdt, MPI_OP_NULL, COMMPROF_NO_PEER, kNameIalltoall), req,
                     [&] { return PMPI_Ialltoall(s, sc, sdt, r, rc, rdt, comm, req); });
}

// ---- point to point ----
int MPI_Send(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
  if (MpiRuntime() == nullptr) return PMPI_Send(buf, count, dt, dest, tag, comm);
  return Traced(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag),
                [&] { return PMPI_Send(buf, count, dt, dest, tag, comm); });
}

int MPI_Recv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status* status) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr) return PMPI_Recv(buf, count, dt, src, tag, comm, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  commprof_event e = Begin(rt, P2p(COMMPROF_OP_RECV, comm, TypeBytes(dt, count), dt, src, tag));
  int rc = PMPI_Recv(buf, count, dt, src, tag, comm, st);
  e.end_ns = rt->Now();
  int n = 0;
  if (rc == MPI_SUCCESS && PMPI_Get_count(st, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED) {
    e.bytes = static_cast<uint64_t>(n);
    e.peer = st->MPI_SOURCE;
    e.correlation = static_cast<uint32_t>(st->MPI_TAG);
  }
  rt->Record(e);
  return rc;
}

int MPI_Sendrecv(const void* sbuf, int sc, MPI_Datatype sdt, int dest, int stag, void* rbuf, int rc, MPI_Datatype rdt,
                 int src, int rtag, MPI_Comm comm, MPI_Status* status) {
  if (MpiRuntime() == nullptr) return PMPI_Sendrecv(sbuf, sc, sdt, dest, stag, rbuf, rc, rdt, src, rtag, comm, status);
  uint64_t bytes = TypeBytes(sdt, sc) + TypeBytes(rdt, rc);
  return Traced(P2p(COMMPROF_OP_SENDRECV, comm, bytes, sdt, dest, stag),
                [&] { return PMPI_Sendrecv(sbuf, sc, sdt, dest, stag, rbuf, rc, rdt, src, rtag, comm, status); });
}

int MPI_Isend(const void* buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request* req) {
  if (MpiRuntime() == nullptr) return PMPI_Isend(buf, count, dt, dest, tag, comm, req);
  return TracedStart(P2p(COMMPROF_OP_SEND, comm, TypeBytes(dt, count), dt, dest, tag, kNameIsend), req,
                     [&] { return PMPI_Isend(buf, count, dt, dest, tag, comm, req); });
}

int MPI_Irecv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request* req) {
  if (MpiRuntime() == nullptr) return PMPI_Irecv(buf, count, dt, src, tag, comm, req);
  return TracedStart(P2p(COMMPROF_OP_RECV, comm, TypeBytes(dt, count), dt, src, tag, kNameIrecv), req,
                     [&] { return PMPI_Irecv(buf, count, dt, src, tag, comm, req); });
}

// ---- completion ----
int MPI_Wait(MPI_Request* req, MPI_Status* status) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr) return PMPI_Wait(req, status);
  MPI_Request saved = *req;
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  uint64_t t0 = rt->Now();
  int rc = PMPI_Wait(req, st);
  uint64_t t1 = rt->Now();
  RecordWait(rt, COMMPROF_OP_WAIT, 0, t0, t1, 1);
  if (rc == MPI_SUCCESS) Complete(rt, saved, st, t1);
  return rc;
}

int MPI_Test(MPI_Request* req, int* flag, MPI_Status* status) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr) return PMPI_Test(req, flag, status);
  MPI_Request saved = *req;
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  uint64_t t0 = rt->Now();
  int rc = PMPI_Test(req, flag, st);
  uint64_t t1 = rt->Now();
  RecordWait(rt, COMMPROF_OP_TEST, 0, t0, t1, 1);
  if (rc == MPI_SUCCESS && *flag) Complete(rt, saved, st, t1);
  return rc;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr || count <= 0) return PMPI_Waitall(count, reqs, statuses);
  MPI_Request* saved = SaveRequests(reqs, count);
  MPI_Status* st = StatusesFor(statuses, count);
  uint64_t t0 = rt->Now();
  int rc = PMPI_Waitall(count, reqs, st);
  uint64_t t1 = rt->Now();
  RecordWait(rt, COMMPROF_OP_WAITALL, 0, t0, t1, count);
  for (int i = 0; i < count; ++i) {
    if (rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && st[i].MPI_ERROR == MPI_SUCCESS))
      Complete(rt, saved[i], &st[i], t1);
  }
  return rc;
}

int MPI_Testall(int count, MPI_Request reqs[], int* flag, MPI_Status statuses[]) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr || count <= 0) return PMPI_Testall(count, reqs, flag, statuses);
  MPI_Request* saved = SaveRequests(reqs, count);
  MPI_Status* st = StatusesFor(statuses, count);
  uint64_t t0 = rt->Now();
  int rc = PMPI_Testall(count, reqs, flag, st);
  uint64_t t1 = rt->Now();
  RecordWait(rt, COMMPROF_OP_TEST, kNameTestall, t0, t1, count);
  if (rc == MPI_SUCCESS && *flag) {
    for (int i = 0; i < count; ++i) Complete(rt, saved[i], &st[i], t1);
  }
  return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int* index, MPI_Status* status) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr || count <= 0) return PMPI_Waitany(count, reqs, index, status);
  MPI_Request* saved = SaveRequests(reqs, count);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  uint64_t t0 = rt->Now();
  int rc = PMPI_Waitany(count, reqs, index, st);
  uint64_t t1 = rt->Now();
  RecordWait(rt, COMMPROF_OP_WAITANY, 0, t0, t1, count);
  if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) Complete(rt, saved[*index], st, t1);
  return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int* index, int* flag, MPI_Status* status) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr || count <= 0) return PMPI_Testany(count, reqs, index, flag, status);
  MPI_Request* saved = SaveRequests(reqs, count);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  uint64_t t0 = rt->Now();
  int rc = PMPI_Testany(count, reqs, index, flag, st);
  uint64_t t1 = rt->Now();
  RecordWait(rt, COMMPROF_OP_TEST, kNameTestany, t0, t1, count);
  if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) Complete(rt, saved[*index], st, t1);
  return rc;
}

int MPI_Waitsome(int count, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[]) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr || count <= 0) return PMPI_Waitsome(count, reqs, outcount, indices, statuses);
  MPI_Request* saved = SaveRequests(reqs, count);
  MPI_Status* st = StatusesFor(statuses, count);
  uint64_t t0 = rt->Now();
  int rc = PMPI_Waitsome(count, reqs, outcount, indices, st);
  uint64_t t1 = rt->Now();
  RecordWait(rt, COMMPROF_OP_WAITALL, kNameWaitsome, t0, t1, count);
  if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED) {
    for (int i = 0; i < *outcount; ++i) Complete(rt, saved[indices[i]], &st[i], t1);
  }
  return rc;
}

int MPI_Testsome(int count, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[]) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr || count <= 0) return PMPI_Testsome(count, reqs, outcount, indices, statuses);
  MPI_Request* saved = SaveRequests(reqs, count);
  MPI_Status* st = StatusesFor(statuses, count);
  uint64_t t0 = rt->Now();
  int rc = PMPI_Testsome(count, reqs, outcount, indices, st);
  uint64_t t1 = rt->Now();
  RecordWait(rt, COMMPROF_OP_TEST, kNameTestsome, t0, t1, count);
  if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED) {
    for (int i = 0; i < *outcount; ++i) Complete(rt, saved[indices[i]], &st[i], t1);
  }
  return rc;
}

int MPI_Request_free(MPI_Request* req) {
  Runtime* rt = MpiRuntime();
  if (rt == nullptr) return PMPI_Request_free(req);
  MPI_Request saved = *req;
  int rc = PMPI_Request_free(req);
  commprof_event e;
  if (rc == MPI_SUCCESS && saved != MPI_REQUEST_NULL && rt->requests().Take(RequestKey(saved), e)) {
    // The operation goes on without us ever seeing it complete: keep it, flagged, ending here.
    e.end_ns = rt->Now();
    e.flags |= COMMPROF_FLAG_INCOMPLETE;
    rt->Record(e);
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
