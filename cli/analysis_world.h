// The processes of a `commprof` command started as an MPI job (`mpirun -np K commprof report FILE`,
// docs/scale.md#distributed-analysis), and byte messages between them. MPI is joined only when the
// launcher says this process is one of several, so a command started alone never touches MPI.
// Every wait polls and sleeps rather than spinning: on a machine with fewer cores than processes,
// a waiting process leaves the cores to those still computing.
#pragma once

#include <memory>
#include <string>

namespace commprof::cli {

class AnalysisWorld {
 public:
  // The world when an MPI launcher started this process as one of several (OMPI_COMM_WORLD_SIZE or
  // PMI_SIZE above 1; PMIX_RANK set, with SLURM_NTASKS above 1 or unset) and COMMPROF_ANALYSIS_MPI is
  // not "off"; nullptr otherwise, or when MPI has one process. `error` is set when MPI was asked for and could not
  // start.
  static std::unique_ptr<AnalysisWorld> JoinIfLaunched(std::string& error);
  // For the commands that run as one process only: when a launcher started this process as one of
  // several (as JoinIfLaunched would join), prints once (from the launcher's rank 0) that `command`
  // is not distributed and returns true: the caller exits 2 rather than let K processes write one
  // output each.
  static bool RefuseSeveral(const char* command);
  ~AnalysisWorld();  // MPI_Finalize
  AnalysisWorld(const AnalysisWorld&) = delete;
  AnalysisWorld& operator=(const AnalysisWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool first() const { return rank_ == 0; }

  void Send(int dest, int tag, const std::string& bytes);
  std::string Receive(int source, int tag);
  // True on every process when `ok` is true on every process.
  bool AllOk(bool ok);
  void Barrier();
  // The first process's `value`, on every process.
  int FromFirst(int value);

 private:
  AnalysisWorld(int rank, int size) : rank_(rank), size_(size) {}
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace commprof::cli
