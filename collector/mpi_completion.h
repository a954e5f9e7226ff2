// The one completion path of MPI_Wait, Waitall, Waitany, Waitsome, Test, Testall, Testany and
// Testsome: the call itself becomes an MPI_WAIT event (bytes = number of requests passed), and
// every parked non-blocking operation (mpi_calls.h, TracedStart) it completed becomes one event
// from issue to the call's exit.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "collector/event_builder.h"
#include "collector/inflight.h"
#include "collector/mpi_source.h"
#include "collector/runtime.h"

namespace commprof {

// Which of the passed requests a successful call completed.
enum class CompletionShape : uint8_t {
  kOne,   // Wait, Test: the one request
  kAll,   // Waitall, Testall: every request (with MPI_ERR_IN_STATUS: those whose status says success)
  kAny,   // Waitany, Testany: requests[*index], unless MPI_UNDEFINED
  kSome,  // Waitsome, Testsome: requests[indices[i]] for i < *outcount, unless MPI_UNDEFINED
};

// One completion call, as its wrapper was called. The output arguments are read only after the
// call succeeded.
struct CompletionCall {
  uint8_t op = 0;    // COMMPROF_OP_WAIT, _WAITALL, _WAITANY or _TEST
  uint8_t name = 0;  // an MpiName when the call is not named by op
  CompletionShape shape = CompletionShape::kOne;
  int count = 1;                    // requests passed
  MPI_Request* requests = nullptr;  // the caller's; PMPI nulls the completed ones
  MPI_Status* statuses = nullptr;   // the caller's (MPI_STATUS(ES)_IGNORE allowed)
  const int* flag = nullptr;        // Test*: nothing completed unless *flag
  const int* index = nullptr;       // kAny
  const int* outcount = nullptr;    // kSome
  const int* indices = nullptr;     // kSome
};

namespace completion_detail {

// Where the statuses of the call go: the caller's, or scratch when the caller ignores them (we
// need them for received bytes and source).
MPI_Status* StatusesFor(MpiSource& src, const CompletionCall& c, MPI_Status& one);
// The requests as passed, saved before PMPI nulls the completed ones.
MPI_Request* SaveRequests(MpiSource& src, const CompletionCall& c, MPI_Request& one);
// Whether the call completed at least one request (a Test* that found none did not).
bool Progressed(const CompletionCall& c, int rc);
// Records the call's MPI_WAIT event (with its CALL_SITE when `stack` is not 0) and the operations
// it completed.
void Record(MpiSource& src, const CompletionCall& c, int rc, const MPI_Request* saved, const MPI_Status* statuses,
            uint64_t t0, uint64_t t1, uint32_t stack);

}  // namespace completion_detail

// Makes the call through `pmpi(statuses)` and records what it completed.
template <typename F>
int TracedCompletion(const CompletionCall& c, F&& pmpi) {
  MpiSource* src = ActiveMpiSource();
  if (src == nullptr || (c.shape != CompletionShape::kOne && c.count <= 0)) {
    return pmpi(c.statuses);
  }
  MPI_Request one_request;
  MPI_Status one_status;
  MPI_Request* saved = completion_detail::SaveRequests(*src, c, one_request);
  MPI_Status* st = completion_detail::StatusesFor(*src, c, one_status);
  Runtime& rt = src->runtime();
  const uint32_t stack = rt.CaptureStack();
  uint64_t t0 = rt.Now();
  // In flight as its MPI_WAIT event; the requests it waits for are in the request table.
  commprof_event wait = BlankEvent(COMMPROF_KIND_MPI_WAIT, t0, t0);
  wait.subtype = c.op;
  wait.bytes = static_cast<uint64_t>(c.count);
  wait.name_id = src->NameId(c.name != 0 ? c.name : c.op);
  InflightSlot& inflight = rt.Thread()->inflight;
  const bool published = inflight.Publish(wait, stack);
  int rc = pmpi(st);
  uint64_t t1 = rt.Now();
  if (published) {
    inflight.Clear(t1, completion_detail::Progressed(c, rc));
  }
  completion_detail::Record(*src, c, rc, saved, st, t0, t1, stack);
  return rc;
}

}  // namespace commprof
