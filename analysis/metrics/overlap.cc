#include "analysis/metrics/overlap.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

namespace commprof {
namespace {

// overlap, exposed communication and the breakdown from the three sets of one basis, over a span
// that contains them all (docs/metrics.md §6). Each instant of the span counts once, by
// priority: compute, else exposed communication, else memory, else idle.
struct Figures {
  int64_t comm_ns = 0;
  double overlap = 0.0;
  int64_t exposed_comm_ns = 0;
  TimeBreakdown breakdown;
};

Figures Measure(const IntervalSet& comm, const IntervalSet& compute, const IntervalSet& memory, int64_t span_ns) {
  Figures f;
  f.comm_ns = comm.Length();
  f.exposed_comm_ns = DifferenceLength(comm, compute);
  f.overlap = f.comm_ns > 0 ? static_cast<double>(f.comm_ns - f.exposed_comm_ns) / static_cast<double>(f.comm_ns) : 0.0;
  TimeBreakdown& b = f.breakdown;
  b.span_ns = span_ns;
  const std::array<const IntervalSet*, 3> sets = {&compute, &comm, &memory};
  int64_t covered = 0;
  Sweep(sets, [&](Interval piece, uint32_t mask) {
    int64_t n = piece.length();
    covered += n;
    if (mask & 1u) {
      b.compute_ns += n;
    } else if (mask & 2u) {
      b.exposed_comm_ns += n;
    } else {
      b.memory_ns += n;
    }
  });
  // Every set lies inside the span (the span is the hull of the events they come from).
  b.idle_ns = std::max<int64_t>(0, span_ns - covered);
  return f;
}

bool IsMpiCommunication(uint8_t kind) { return kind == COMMPROF_KIND_MPI_COLLECTIVE || kind == COMMPROF_KIND_MPI_P2P; }
bool IsDeviceCommunication(uint8_t kind) {
  return kind == COMMPROF_KIND_COMM_KERNEL || kind == COMMPROF_KIND_NCCL_COLLECTIVE;
}

}  // namespace

const char* OverlapBasisName(OverlapBasis basis) {
  switch (basis) {
    case OverlapBasis::kGpuKernels:
      return "gpu-kernels";
    case OverlapBasis::kCpuOutsideMpi:
      return "cpu-outside-mpi";
  }
  return "unknown";
}

void RankOverlapBuilder::Span::Extend(Interval iv) {
  first = std::min(first, iv.begin);
  last = std::max(last, iv.end);
}

void RankOverlapBuilder::Add(std::span<const commprof_event> events) {
  for (const commprof_event& e : events) {
    // A record with end < start (a broken clock reading) is kept as an instant.
    int64_t start = clock_.ToReference(static_cast<int64_t>(e.start_ns));
    int64_t end = clock_.ToReference(static_cast<int64_t>(std::max(e.start_ns, e.end_ns)));
    Interval iv{start, std::max(start, end)};
    span_.Extend(iv);
    if (e.device != COMMPROF_HOST_DEVICE) {
      devices_[e.device].span.Extend(iv);
    }
    if (e.flags & COMMPROF_FLAG_INCOMPLETE) {
      // Its end is not a completion (process end or request freed): no communication interval.
      if (IsMpiCommunication(e.kind) || IsDeviceCommunication(e.kind)) {
        ++incomplete_;
      }
      continue;
    }
    switch (e.kind) {
      case COMMPROF_KIND_MPI_COLLECTIVE:
      case COMMPROF_KIND_MPI_P2P:
        mpi_comm_.push_back(iv);
        // A non-blocking one is in flight from issue to completion, not inside a call.
        if (!(e.flags & COMMPROF_FLAG_NONBLOCKING)) {
          mpi_call_.push_back(iv);
        }
        break;
      case COMMPROF_KIND_MPI_WAIT:
      case COMMPROF_KIND_MPI_COMM:
        mpi_comm_.push_back(iv);
        mpi_call_.push_back(iv);
        break;
      case COMMPROF_KIND_MPI_INIT:
      case COMMPROF_KIND_MPI_FINALIZE:
        mpi_call_.push_back(iv);
        break;
      case COMMPROF_KIND_COMPUTE_KERNEL:
        devices_[e.device].compute.push_back(iv);
        has_compute_kernel_ = true;
        break;
      case COMMPROF_KIND_COMM_KERNEL:
      case COMMPROF_KIND_NCCL_COLLECTIVE:
        devices_[e.device].comm.push_back(iv);
        break;
      case COMMPROF_KIND_MEMCPY:
      case COMMPROF_KIND_MEMSET:
        devices_[e.device].memory.push_back(iv);
        break;
      default:
        break;  // ranges, marks, steps, allocations, API calls: only the span
    }
  }
}

RankOverlap RankOverlapBuilder::Finish(uint32_t rank) {
  RankOverlap out;
  out.rank = rank;
  out.incomplete_events = incomplete_;
  IntervalSet mpi_comm = IntervalSet::FromIntervals(std::move(mpi_comm_));
  Figures f;
  if (!has_compute_kernel_) {
    // cpu-outside-mpi: K = span \ M. No memory records on the host.
    out.basis = OverlapBasis::kCpuOutsideMpi;
    IntervalSet span = IntervalSet::FromIntervals({Interval{span_.first, span_.last}});
    IntervalSet compute = Difference(span, IntervalSet::FromIntervals(std::move(mpi_call_)));
    f = Measure(mpi_comm, compute, IntervalSet(), span_.length());
  } else {
    out.basis = OverlapBasis::kGpuKernels;
    IntervalSet comm = mpi_comm, compute, memory;
    for (auto& [device, d] : devices_) {
      IntervalSet dc = IntervalSet::FromIntervals(std::move(d.comm));
      IntervalSet dk = IntervalSet::FromIntervals(std::move(d.compute));
      IntervalSet dm = IntervalSet::FromIntervals(std::move(d.memory));
      Figures df = Measure(dc, dk, dm, d.span.length());
      out.devices.push_back({device, df.comm_ns, df.overlap, df.exposed_comm_ns, df.breakdown});
      comm = Union(comm, dc);
      compute = Union(compute, dk);
      memory = Union(memory, dm);
    }
    f = Measure(comm, compute, memory, span_.length());
  }
  out.comm_ns = f.comm_ns;
  out.overlap = f.overlap;
  out.exposed_comm_ns = f.exposed_comm_ns;
  out.breakdown = f.breakdown;
  return out;
}

RankOverlap ComputeRankOverlap(uint32_t rank, std::span<const commprof_event> events, const ClockModel& clock) {
  RankOverlapBuilder b(clock);
  b.Add(events);
  return b.Finish(rank);
}

Result<std::vector<RankOverlap>> ComputeOverlap(const ProfileReader& reader) {
  std::vector<RankOverlap> out;
  out.reserve(reader.info().ranks.size());
  for (const RankInfo& r : reader.info().ranks) {
    RankOverlapBuilder b(r.clock_model());
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) { b.Add(chunk); });
    if (!st.ok()) {
      return Status(st.code(), "overlap of rank " + std::to_string(r.rank) + ": " + st.message());
    }
    out.push_back(b.Finish(r.rank));
  }
  return out;
}

}  // namespace commprof
