#include "analysis/metrics/time_categories.h"

#include <algorithm>
#include <cmath>

namespace commprof {

namespace {

// A host call in which the rank is blocked communicating (docs/metrics.md §9.5): blocking MPI
// collectives and point-to-point calls, Wait*/Test* calls, MPI communicator creation. Non-blocking
// operations' issue-to-completion spans are not time the rank spent blocked.
bool IsHostBlockedCall(const commprof_event& e) {
  if (e.flags & (COMMPROF_FLAG_NONBLOCKING | COMMPROF_FLAG_INCOMPLETE)) {
    return false;
  }
  switch (e.kind) {
    case COMMPROF_KIND_MPI_COLLECTIVE:
    case COMMPROF_KIND_MPI_P2P:
    case COMMPROF_KIND_MPI_WAIT:
      return true;
    case COMMPROF_KIND_MPI_COMM:
      return e.subtype != COMMPROF_OP_NCCL_COMM_INIT;
    default:
      return false;
  }
}

}  // namespace

void RankTimeBuilder::Add(std::span<const commprof_event> events) {
  for (const commprof_event& e : events) {
    const auto len = static_cast<int64_t>(e.end_ns - e.start_ns);
    if (e.end_ns < e.start_ns) {
      continue;
    }
    if (e.kind == COMMPROF_KIND_MPI_INIT ||
        (e.kind == COMMPROF_KIND_MPI_COMM && e.subtype == COMMPROF_OP_NCCL_COMM_INIT)) {
      startup_ns_ += len;
    } else if (e.kind == COMMPROF_KIND_MPI_FINALIZE) {
      shutdown_ns_ += len;
    } else if (IsHostBlockedCall(e)) {
      const auto b = static_cast<int64_t>(e.start_ns), x = static_cast<int64_t>(e.end_ns);
      blocked_.push_back({clock_.ToReference(b), clock_.ToReference(x)});
    }
  }
}

RankTimeBuilder::Parts RankTimeBuilder::Summarize() {
  Parts p{startup_ns_, shutdown_ns_, IntervalSet::FromIntervals(std::move(blocked_)).Length()};
  blocked_ = {};
  return p;
}

RankTime ComposeRankTime(const RankTimeBuilder::Parts& parts, const RankOverlap& overlap, const RankDelay& delay) {
  RankTime t;
  t.span_ns = overlap.breakdown.span_ns;
  const int64_t blocked = parts.blocked_ns;
  t.startup_ns = std::min(parts.startup_ns, t.span_ns);
  t.shutdown_ns = std::min(parts.shutdown_ns, t.span_ns - t.startup_ns);
  const int64_t room = std::max<int64_t>(0, t.span_ns - t.startup_ns - t.shutdown_ns);
  const int64_t comm = std::min(blocked, room);
  t.wait_ns = std::min(comm, static_cast<int64_t>(std::llround(delay.host_wait_ns)));
  t.transfer_ns = std::min(comm - t.wait_ns, static_cast<int64_t>(std::llround(delay.host_transfer_ns)));
  t.unattributed_ns = comm - t.wait_ns - t.transfer_ns;
  // Compute: the overlap pass's (time outside MPI, or compute kernels), never more than is left.
  t.compute_ns = std::clamp<int64_t>(overlap.breakdown.compute_ns, 0, room - comm);
  t.idle_ns = room - comm - t.compute_ns;
  for (const auto& [rank, ns] : delay.wait_by_culprit) {
    t.wait_by_culprit.emplace_back(rank, static_cast<int64_t>(std::llround(ns)));
  }
  return t;
}

}  // namespace commprof
