// Clock alignment over MPI (docs/clock-alignment.md).
//
// Every rank measures its offset against rank 0 by ping-pong on a private duplicate of
// MPI_COMM_WORLD (so the application's own traffic and tags are never touched), keeping the
// minimum round trip of each epoch (core/clock_model.h). Epochs run at MPI_Init, at MPI_Finalize,
// and periodically in between. The periodic ones must start on every rank at the same point of
// the program without extra communication, so they are tied to MPI_COMM_WORLD's collective
// sequence number: at each epoch rank 0 announces the sequence number of the blocking world
// collective after which the next epoch runs, sized from the observed collective rate so that
// epochs come about every COMMPROF_CLOCK_SYNC_INTERVAL_MS. Epochs only ever run inside an MPI call
// the application made (Init, Finalize, a world collective), on its thread, so the thread level
// it asked for is respected.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/clock_model.h"

namespace commprof {

class Runtime;

class MpiClockSync {
 public:
  MpiClockSync(Runtime& rt, uint32_t rounds, uint32_t interval_ms);

  void Start();  // inside MPI_Init, after PMPI_Init: collective over MPI_COMM_WORLD
  // After a blocking collective on MPI_COMM_WORLD with sequence number `seq` (same on all ranks).
  void AfterWorldCollective(uint64_t seq) {
    if (seq >= next_seq_) {
      Epoch(rounds_ / 2 > 0 ? rounds_ / 2 : 1, seq + 1);
    }
  }
  void Finish();  // inside MPI_Finalize, before PMPI_Finalize

 private:
  void Epoch(uint32_t rounds, uint64_t world_seq_now);
  void Publish();

  Runtime& rt_;
  uint32_t rounds_;
  uint32_t interval_ms_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  uint64_t next_seq_ = UINT64_MAX;
  uint64_t last_epoch_seq_ = 0;
  uint64_t last_epoch_ns_ = 0;
  uint64_t epochs_ = 0;
  std::vector<ClockPoint> points_;
  std::vector<ClockSample> epoch_samples_;  // the latest epoch's, handed to PublishClock
};

}  // namespace commprof
