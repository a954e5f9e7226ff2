// Clock alignment over MPI (docs/clock-alignment.md).
//
// Ranks that read one clock (same HostClock::Domain(): boot id and clock source) form a host,
// found once in MPI_Init by an allgather of the keys; the host's lowest world rank is its leader
// and every other rank of it takes the leader's model as it is (exact: they share the clock). The
// leaders align to rank 0 (the leader of its host, the reference) over a binomial tree
// (core/clock_tree.h): each leader ping-pongs with its parent, which answers with its clock already
// mapped to the reference, so offsets compose along the path and the bounds add up it; ceil(log2
// hosts) rounds, the pairs of one round measuring at the same time. All of it on private duplicates
// of MPI_COMM_WORLD (the world duplicate for the tree, a split of it per host), so the application's
// own traffic and tags are never touched. Each epoch keeps the minimum round trip
// (core/clock_model.h). Epochs run at MPI_Init, at MPI_Finalize, and periodically in between. The
// periodic ones must start on every rank at the same point of the program without extra
// communication, so they are tied to MPI_COMM_WORLD's collective sequence number: at each epoch
// rank 0 announces the sequence number of the blocking world collective after which the next epoch
// runs, sized from the observed collective rate so that epochs come about every
// COMMPROF_CLOCK_SYNC_INTERVAL_MS. Epochs only ever run inside an MPI call the application made
// (Init, Finalize, a world collective), on its thread, so the thread level it asked for is
// respected.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/clock_model.h"
#include "core/clock_tree.h"

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
  void MeasureAgainstParent(uint32_t rounds);
  void ServeChildren(uint32_t rounds, bool measured);  // measured: this leader got a point this epoch
  void ShareWithHost(bool measured);                   // measured: the leader got a point this epoch
  void Publish();

  Runtime& rt_;
  uint32_t rounds_;
  uint32_t interval_ms_;
  MPI_Comm comm_ = MPI_COMM_NULL;       // duplicate of MPI_COMM_WORLD: the tree, the closing broadcast
  MPI_Comm host_comm_ = MPI_COMM_NULL;  // the ranks sharing this rank's clock; the leader is its rank 0
  int rank_ = 0;
  int size_ = 1;
  bool leader_ = true;
  int parent_ = -1;            // world rank of the tree parent (leaders but rank 0's)
  std::vector<int> children_;  // world ranks this leader serves, in order
  const char* method_ = "mpi-pingpong";
  uint64_t next_seq_ = UINT64_MAX;
  uint64_t last_epoch_seq_ = 0;
  uint64_t last_epoch_ns_ = 0;
  uint64_t epochs_ = 0;
  std::vector<ClockPoint> points_;
  std::vector<ClockSample> epoch_samples_;  // the latest epoch's, handed to PublishClock
};

}  // namespace commprof
