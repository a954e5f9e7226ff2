#include "collector/mpi_completion.h"

#include <cstring>

#include "collector/event_builder.h"
#include "collector/mpi_codes.h"
#include "collector/runtime.h"
#include "commprof/event.h"

namespace commprof::completion_detail {
namespace {

bool PerRequestStatuses(CompletionShape shape) {
  return shape == CompletionShape::kAll || shape == CompletionShape::kSome;
}

// The parked operation of `saved`, if any, ends at `now`; a receive learns its real size, source
// and tag from the status.
void Complete(Runtime& rt, MPI_Request saved, const MPI_Status* status, uint64_t now) {
  if (saved == MPI_REQUEST_NULL) {
    return;
  }
  commprof_event e;
  if (!rt.requests().Take(RequestKey(saved), e)) {
    return;
  }
  e.end_ns = now;
  if (e.subtype == COMMPROF_OP_RECV && status != nullptr) {
    int n = 0;
    if (PMPI_Get_count(status, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED) {
      e.bytes = static_cast<uint64_t>(n);
    }
    e.peer = status->MPI_SOURCE;
    e.correlation = static_cast<uint32_t>(status->MPI_TAG);
  }
  rt.Record(e);
}

}  // namespace

MPI_Status* StatusesFor(MpiSource& src, const CompletionCall& c, MPI_Status& one) {
  if (!PerRequestStatuses(c.shape)) {
    return c.statuses == MPI_STATUS_IGNORE ? &one : c.statuses;
  }
  if (c.statuses != MPI_STATUSES_IGNORE) {
    return c.statuses;
  }
  auto& v = src.Scratch().statuses;
  if (v.size() < static_cast<size_t>(c.count)) {
    v.resize(static_cast<size_t>(c.count));
  }
  return v.data();
}

MPI_Request* SaveRequests(MpiSource& src, const CompletionCall& c, MPI_Request& one) {
  if (c.shape == CompletionShape::kOne) {
    one = *c.requests;
    return &one;
  }
  auto& v = src.Scratch().requests;
  if (v.size() < static_cast<size_t>(c.count)) {
    v.resize(static_cast<size_t>(c.count));
  }
  std::memcpy(v.data(), c.requests, sizeof(MPI_Request) * static_cast<size_t>(c.count));
  return v.data();
}

bool Progressed(const CompletionCall& c, int rc) {
  if (rc != MPI_SUCCESS && !(c.shape == CompletionShape::kAll && rc == MPI_ERR_IN_STATUS)) {
    return false;
  }
  if (c.flag != nullptr && *c.flag == 0) {
    return false;
  }
  if (c.shape == CompletionShape::kAny && c.index != nullptr && *c.index == MPI_UNDEFINED) {
    return false;
  }
  return c.shape != CompletionShape::kSome || c.outcount == nullptr ||
         (*c.outcount != MPI_UNDEFINED && *c.outcount > 0);
}

void Record(MpiSource& src, const CompletionCall& c, int rc, const MPI_Request* saved, const MPI_Status* statuses,
            uint64_t t0, uint64_t t1, uint32_t stack) {
  Runtime& rt = src.runtime();
  commprof_event wait = BlankEvent(COMMPROF_KIND_MPI_WAIT, t0, t1);
  wait.subtype = c.op;
  wait.name_id = src.NameId(c.name != 0 ? c.name : c.op);
  wait.bytes = static_cast<uint64_t>(c.count);  // number of requests passed
  rt.Record(wait);
  rt.RecordCallSite(stack, wait);

  // Only Waitall/Testall report per-request errors (MPI_ERR_IN_STATUS): the requests whose status
  // says success did complete.
  const bool partial = c.shape == CompletionShape::kAll && rc == MPI_ERR_IN_STATUS;
  if (rc != MPI_SUCCESS && !partial) {
    return;
  }
  if (c.flag != nullptr && *c.flag == 0) {
    return;  // a Test* that found nothing complete
  }
  switch (c.shape) {
    case CompletionShape::kOne:
      Complete(rt, saved[0], statuses, t1);
      break;
    case CompletionShape::kAll:
      for (int i = 0; i < c.count; ++i) {
        if (!partial || statuses[i].MPI_ERROR == MPI_SUCCESS) {
          Complete(rt, saved[i], &statuses[i], t1);
        }
      }
      break;
    case CompletionShape::kAny:
      if (*c.index != MPI_UNDEFINED) {
        Complete(rt, saved[*c.index], statuses, t1);
      }
      break;
    case CompletionShape::kSome:
      if (*c.outcount != MPI_UNDEFINED) {
        for (int i = 0; i < *c.outcount; ++i) {
          Complete(rt, saved[c.indices[i]], &statuses[i], t1);
        }
      }
      break;
  }
}

}  // namespace commprof::completion_detail
