// How a wrapped MPI call becomes an event: the shapes shared by the PMPI wrappers (mpi_wrappers.cc)
// other than completion (mpi_completion.h). Each takes the real call as a callable and, without an
// MPI source to record into (ActiveMpiSource() null), only makes it.
//
// Byte counts follow nccl-tests' "size" (the largest buffer of the operation), so bus bandwidth
// can be computed later with its factors; docs/file-format.md lists the rule for each call.
#pragma once

#include <mpi.h>

#include "collector/event_builder.h"
#include "collector/inflight.h"
#include "collector/mpi_codes.h"
#include "collector/mpi_source.h"
#include "collector/runtime.h"
#include "commprof/event.h"

namespace commprof {

// What one call is about; turned into an event by BeginEvent().
struct MpiCall {
  uint8_t kind = COMMPROF_KIND_MPI_COLLECTIVE;
  uint8_t op = COMMPROF_OP_NONE;
  uint8_t name = 0;  // an MpiName; 0: named by op
  MPI_Comm comm = MPI_COMM_NULL;
  uint64_t bytes = 0;
  MPI_Datatype dt = MPI_DATATYPE_NULL;
  MPI_Op red = MPI_OP_NULL;
  int peer = COMMPROF_NO_PEER;
  uint32_t tag = 0;
};

inline MpiCall Coll(uint8_t op, MPI_Comm comm, uint64_t bytes, MPI_Datatype dt = MPI_DATATYPE_NULL,
                    MPI_Op red = MPI_OP_NULL, int root = COMMPROF_NO_PEER, uint8_t name = 0) {
  MpiCall c;
  c.op = op;
  c.comm = comm;
  c.bytes = bytes;
  c.dt = dt;
  c.red = red;
  c.peer = root;
  c.name = name;
  return c;
}

inline MpiCall P2p(uint8_t op, MPI_Comm comm, uint64_t bytes, MPI_Datatype dt, int peer, int tag, uint8_t name = 0) {
  MpiCall c;
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

// The event of `c`, its start time taken now; a collective takes its communicator's next number
// (and, under --step-every, begins a step when that number is a multiple of N).
commprof_event BeginEvent(MpiSource& src, const MpiCall& c);

// A blocking call: one event from entry to exit.
template <typename F>
int Traced(const MpiCall& c, F&& pmpi) {
  MpiSource* src = ActiveMpiSource();
  if (src == nullptr) {
    return pmpi();
  }
  Runtime& rt = src->runtime();
  const uint32_t stack = rt.CaptureStack();  // --stacks: before the start, so not in the call's time
  commprof_event e = BeginEvent(*src, c);
  // In flight until it returns (collector/inflight.h): published whether or not it is recorded.
  InflightSlot& inflight = rt.Thread()->inflight;
  const bool published = inflight.Publish(e, stack);
  int rc = pmpi();
  e.end_ns = rt.Now();
  if (published) {
    inflight.Clear(e.end_ns);
  }
  rt.Record(e);
  rt.RecordCallSite(stack, e);
  if (e.kind == COMMPROF_KIND_MPI_COLLECTIVE && e.comm_id == COMMPROF_COMM_WORLD_ID) {
    src->AfterWorldCollective(e.seq);
  }
  return rc;
}

// Issue of a non-blocking operation: parked in the request table until its completion is seen,
// then one event from issue to completion.
template <typename F>
int TracedStart(const MpiCall& c, MPI_Request* request, F&& pmpi) {
  MpiSource* src = ActiveMpiSource();
  if (src == nullptr) {
    return pmpi();
  }
  Runtime& rt = src->runtime();
  const uint32_t stack = rt.CaptureStack();
  commprof_event e = BeginEvent(*src, c);
  e.flags |= COMMPROF_FLAG_NONBLOCKING;
  e.thread_id = rt.Thread()->index;  // the issuer, for the in-flight view (the completion restamps it)
  int rc = pmpi();
  e.end_ns = rt.Now();  // replaced by the completion time
  // The call site is recorded at issue: the event it joins (same start, kind, communicator) is
  // recorded at completion with this start.
  rt.RecordCallSite(rc == MPI_SUCCESS ? stack : 0, e);
  if (rc == MPI_SUCCESS && !rt.requests().Insert(RequestKey(*request), e, stack)) {
    e.flags |= COMMPROF_FLAG_INCOMPLETE;  // table full (counted): keep the issue at least
    rt.Record(e);
  }
  return rc;
}

// The receive half of an MPI_Sendrecv(_replace) whose send half is `send` (same start, end and
// thread): flagged RECV_HALF, with the source, tag and byte count the status reports once the call
// succeeded (`rc`), else the posted ones in `posted`.
commprof_event ReceiveHalf(const commprof_event& send, const MpiCall& posted, int rc, const MPI_Status& status);

// MPI_Sendrecv(_replace): one blocking call, two events (docs/file-format.md): the send half as
// `send` says, then the receive half of what `recv` posted. The call always gets a status, ours
// when the caller ignores it: the receive half needs the source, tag and count.
template <typename F>
int TracedSendrecv(const MpiCall& send, const MpiCall& recv, MPI_Status* status, F&& pmpi) {
  MpiSource* src = ActiveMpiSource();
  if (src == nullptr) {
    return pmpi(status);
  }
  Runtime& rt = src->runtime();
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const uint32_t stack = rt.CaptureStack();
  commprof_event e = BeginEvent(*src, send);
  // In flight as its send half (op SENDRECV, the destination as peer).
  InflightSlot& inflight = rt.Thread()->inflight;
  const bool published = inflight.Publish(e, stack);
  int rc = pmpi(st);
  e.end_ns = rt.Now();
  if (published) {
    inflight.Clear(e.end_ns);
  }
  rt.Record(e);
  rt.Record(ReceiveHalf(e, recv, rc, *st));
  rt.RecordCallSite(stack, e);  // one for both halves: they share start, kind and communicator
  return rc;
}

// Creation of a communicator: agree on its id, record the event (comm_id = new id,
// seq = parent id, bytes = new size, peer = this rank in it).
commprof_event CommCreatedEvent(MpiSource& src, uint8_t op, MPI_Comm parent, MPI_Comm newcomm, uint64_t t0);

template <typename F>
int TracedCommCreate(uint8_t op, MPI_Comm parent, MPI_Comm* newcomm, F&& pmpi) {
  MpiSource* src = ActiveMpiSource();
  if (src == nullptr) {
    return pmpi();
  }
  Runtime& rt = src->runtime();
  uint64_t t0 = rt.Now();
  // In flight as a kind 6 event on the parent (the new id is agreed on inside the call).
  commprof_event e = BlankEvent(COMMPROF_KIND_MPI_COMM, t0, t0);
  e.subtype = op;
  e.name_id = src->NameId(op);
  e.comm_id = src->comms().Lookup(parent)->id;
  InflightSlot& inflight = rt.Thread()->inflight;
  const bool published = inflight.Publish(e, 0);
  int rc = pmpi();
  if (published) {
    inflight.Clear(rt.Now());
  }
  if (rc == MPI_SUCCESS && *newcomm != MPI_COMM_NULL) {
    src->runtime().RecordStructural(CommCreatedEvent(*src, op, parent, *newcomm, t0));
  }
  return rc;
}

}  // namespace commprof
