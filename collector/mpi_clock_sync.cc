#include "collector/mpi_clock_sync.h"

#include <algorithm>

#include "collector/runtime.h"
#include "core/log.h"

namespace commprof {
namespace {
constexpr int kTagPing = 0x5C01;
constexpr int kTagPong = 0x5C02;
constexpr uint64_t kFirstResyncAfter = 64;  // world collectives before the rate is known
// A pong's error field when the parent got no point this epoch: its readings are not on the reference.
constexpr int64_t kParentUnaligned = -1;
}  // namespace

MpiClockSync::MpiClockSync(Runtime& rt, uint32_t rounds, uint32_t interval_ms)
    : rt_(rt), rounds_(rounds), interval_ms_(interval_ms) {}

void MpiClockSync::Start() {
  rt_.ClaimClockForMpi();
  uint64_t t0 = rt_.Now();
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  PMPI_Comm_rank(comm_, &rank_);
  PMPI_Comm_size(comm_, &size_);
  // Who shares this rank's clock: one key per rank, the same on every rank of a host.
  const uint64_t domain = rt_.host_clock().Domain();
  std::vector<uint64_t> keys(static_cast<size_t>(size_));
  PMPI_Allgather(&domain, 1, MPI_UINT64_T, keys.data(), 1, MPI_UINT64_T, comm_);
  const ClockHosts hosts = GroupByClockDomain(keys);
  const int leader = hosts.leader_of[static_cast<size_t>(rank_)];
  PMPI_Comm_split(comm_, leader, rank_, &host_comm_);
  leader_ = leader == rank_;
  if (leader_) {
    const int j = hosts.leader_index[static_cast<size_t>(rank_)];
    const int count = static_cast<int>(hosts.leaders.size());
    parent_ = j == 0 ? -1 : hosts.leaders[static_cast<size_t>(ClockTreeParent(j))];
    for (int c : ClockTreeChildren(j, count)) {
      children_.push_back(hosts.leaders[static_cast<size_t>(c)]);
    }
    method_ = rank_ == 0 ? "mpi-reference" : "mpi-pingpong";
  } else {
    method_ = "mpi-same-host";
  }
  COMMPROF_LOG_DEBUG("clock sync: %zu host(s), leader %d, tree parent %d, %zu child(ren), %d round(s)",
                     hosts.leaders.size(), leader, parent_, children_.size(),
                     ClockTreeRounds(static_cast<int>(hosts.leaders.size())));
  Epoch(rounds_, 0);
  rt_.SetCounter("clock_sync_init_ns", rt_.Now() - t0);
}

void MpiClockSync::Finish() {
  if (comm_ == MPI_COMM_NULL) {
    return;
  }
  next_seq_ = UINT64_MAX;
  Epoch(rounds_, UINT64_MAX);
  PMPI_Comm_free(&host_comm_);
  PMPI_Comm_free(&comm_);
}

void MpiClockSync::MeasureAgainstParent(uint32_t rounds) {
  std::vector<ClockSample> epoch(rounds);
  int64_t parent_error = 0;  // the largest bound the parent sent with its readings
  bool parent_aligned = true;
  for (uint32_t k = 0; k < rounds; ++k) {
    ClockSample& s = epoch[k];
    int64_t pong[2] = {0, 0};  // the parent's clock on the reference; the bound of that reading
    s.local_send_ns = rt_.Now();
    PMPI_Send(&s.local_send_ns, 1, MPI_UINT64_T, parent_, kTagPing, comm_);
    PMPI_Recv(pong, 2, MPI_INT64_T, parent_, kTagPong, comm_, MPI_STATUS_IGNORE);
    s.local_recv_ns = rt_.Now();
    s.reference_ns = static_cast<uint64_t>(pong[0]);
    if (pong[1] == kParentUnaligned) {
      parent_aligned = false;
    } else {
      parent_error = std::max(parent_error, pong[1]);
    }
  }
  ClockPoint p;
  if (parent_aligned && EstimateEpochThroughParent(epoch, parent_error, p)) {
    if (KeepEpochPoint(points_, p)) {
      points_.push_back(p);
    } else {
      COMMPROF_LOG_DEBUG("clock sync: an epoch's half round trip of %lld ns is an outlier: no point",
                         static_cast<long long>(p.half_rtt_ns));
    }
  }
  epoch_samples_ = std::move(epoch);
}

void MpiClockSync::ServeChildren(uint32_t rounds, bool measured) {
  // One child after another, in the tree's round order: each sees an idle parent, so its minimum
  // round trip is a clean one, and the children of one round measure at the same time as the
  // other pairs of that round.
  // Readings are mapped by the model through this epoch's point, and are as good as that point:
  // without one (no usable sample, or a parent without one), an older point's bound would not
  // cover the extrapolation since then, so the children get no point either.
  // A reading past the newest point is extrapolated, and its error grows with the time since
  // (ParentReadingErrorNs). Rank 0's clock is the reference itself: exact.
  const ClockModel model(points_);
  const bool reference = parent_ < 0;
  for (int child : children_) {
    for (uint32_t k = 0; k < rounds; ++k) {
      uint64_t ping = 0;
      PMPI_Recv(&ping, 1, MPI_UINT64_T, child, kTagPing, comm_, MPI_STATUS_IGNORE);
      const auto now = static_cast<int64_t>(rt_.Now());
      const int64_t error = measured ? ParentReadingErrorNs(points_.back(), now, reference) : kParentUnaligned;
      int64_t pong[2] = {model.ToReference(now), error};
      PMPI_Send(pong, 2, MPI_INT64_T, child, kTagPong, comm_);
    }
  }
}

void MpiClockSync::ShareWithHost(bool measured) {
  // The leader's point of this epoch, given as it is to the ranks that share its clock.
  int64_t point[4] = {0, 0, 0, 0};  // measured?, local_ns, offset_ns, half_rtt_ns
  if (leader_ && measured) {
    point[0] = 1;
    point[1] = points_.back().local_ns;
    point[2] = points_.back().offset_ns;
    point[3] = points_.back().half_rtt_ns;
  }
  PMPI_Bcast(point, 4, MPI_INT64_T, 0, host_comm_);
  if (!leader_ && point[0] != 0) {
    points_.push_back(ClockPoint{point[1], point[2], point[3]});
  }
}

void MpiClockSync::Epoch(uint32_t rounds, uint64_t world_seq_now) {
  uint64_t t_begin = rt_.Now();
  const size_t points_before = points_.size();
  if (leader_) {
    if (parent_ < 0) {
      points_.push_back(ClockPoint{static_cast<int64_t>(rt_.Now()), 0, 0});  // the reference itself
    } else {
      MeasureAgainstParent(rounds);
    }
  }
  // Without a point this epoch (no usable sample, an outlier, or a parent without one) the
  // leader's children and members get none either.
  const bool measured = points_.size() > points_before;
  if (leader_) {
    if (!measured) {
      COMMPROF_LOG_DEBUG("clock sync epoch %llu: no point", static_cast<unsigned long long>(epochs_ + 1));
    }
    ServeChildren(rounds, measured);
  }
  ShareWithHost(measured);
  // Rank 0 sizes the next interval in world collectives from the rate it has seen.
  uint64_t next = UINT64_MAX;
  if (rank_ == 0 && interval_ms_ > 0 && world_seq_now != UINT64_MAX) {
    uint64_t now = rt_.Now();
    if (epochs_ == 0 || now <= last_epoch_ns_ || world_seq_now <= last_epoch_seq_) {
      next = world_seq_now + kFirstResyncAfter;
    } else {
      double per_ns = static_cast<double>(world_seq_now - last_epoch_seq_) / static_cast<double>(now - last_epoch_ns_);
      double k = per_ns * static_cast<double>(interval_ms_) * 1e6;
      next = world_seq_now + static_cast<uint64_t>(std::clamp(k, 1.0, 1e15));
    }
    last_epoch_seq_ = world_seq_now;
    last_epoch_ns_ = now;
  }
  PMPI_Bcast(&next, 1, MPI_UINT64_T, 0, comm_);
  next_seq_ = next;
  ++epochs_;
  rt_.SetCounter("clock_sync_epochs", epochs_);
  // Epochs that gave this rank no point: no usable sample, an outlier, or a leader without one.
  rt_.SetCounter("clock_sync_epochs_without_point", epochs_ - std::min<uint64_t>(epochs_, points_.size()));
  COMMPROF_LOG_DEBUG("clock sync epoch %llu: %u rounds in %llu ns", static_cast<unsigned long long>(epochs_), rounds,
                     static_cast<unsigned long long>(rt_.Now() - t_begin));
  Publish();
}

void MpiClockSync::Publish() {
  rt_.PublishClock(points_, std::move(epoch_samples_), method_);
  epoch_samples_.clear();
}

}  // namespace commprof
