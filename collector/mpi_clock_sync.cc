#include "collector/mpi_clock_sync.h"

#include <algorithm>

#include "collector/runtime.h"
#include "core/log.h"

namespace commprof {
namespace {
constexpr int kTagPing = 0x5C01;
constexpr int kTagPong = 0x5C02;
constexpr uint64_t kFirstResyncAfter = 64;  // world collectives before the rate is known
}  // namespace

MpiClockSync::MpiClockSync(Runtime& rt, uint32_t rounds, uint32_t interval_ms)
    : rt_(rt), rounds_(rounds), interval_ms_(interval_ms) {}

void MpiClockSync::Start() {
  rt_.ClaimClockForMpi();
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  PMPI_Comm_rank(comm_, &rank_);
  PMPI_Comm_size(comm_, &size_);
  uint64_t t0 = rt_.Now();
  Epoch(rounds_, 0);
  rt_.SetCounter("clock_sync_init_ns", rt_.Now() - t0);
}

void MpiClockSync::Finish() {
  if (comm_ == MPI_COMM_NULL) {
    return;
  }
  next_seq_ = UINT64_MAX;
  Epoch(rounds_, UINT64_MAX);
  PMPI_Comm_free(&comm_);
}

void MpiClockSync::Epoch(uint32_t rounds, uint64_t world_seq_now) {
  uint64_t t_begin = rt_.Now();
  if (rank_ == 0) {
    // Serve the ranks one after another: each sees an idle reference, so its minimum round trip
    // is a clean one.
    for (int r = 1; r < size_; ++r) {
      for (uint32_t k = 0; k < rounds; ++k) {
        uint64_t ping = 0;
        PMPI_Recv(&ping, 1, MPI_UINT64_T, r, kTagPing, comm_, MPI_STATUS_IGNORE);
        uint64_t ref = rt_.Now();
        PMPI_Send(&ref, 1, MPI_UINT64_T, r, kTagPong, comm_);
      }
    }
    points_.push_back(ClockPoint{static_cast<int64_t>(rt_.Now()), 0, 0});
  } else {
    std::vector<ClockSample> epoch(rounds);
    for (uint32_t k = 0; k < rounds; ++k) {
      ClockSample& s = epoch[k];
      s.local_send_ns = rt_.Now();
      PMPI_Send(&s.local_send_ns, 1, MPI_UINT64_T, 0, kTagPing, comm_);
      PMPI_Recv(&s.reference_ns, 1, MPI_UINT64_T, 0, kTagPong, comm_, MPI_STATUS_IGNORE);
      s.local_recv_ns = rt_.Now();
    }
    ClockPoint p;
    if (EstimateEpoch(epoch, p)) {
      points_.push_back(p);
    }
    epoch_samples_ = std::move(epoch);
  }
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
  COMMPROF_LOG_DEBUG("clock sync epoch %llu: %u rounds in %llu ns", static_cast<unsigned long long>(epochs_), rounds,
                     static_cast<unsigned long long>(rt_.Now() - t_begin));
  Publish();
}

void MpiClockSync::Publish() {
  rt_.PublishClock(points_, std::move(epoch_samples_), rank_ == 0 ? "mpi-reference" : "mpi-pingpong");
  epoch_samples_.clear();
}

}  // namespace commprof
