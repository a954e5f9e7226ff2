// The processes of a `commprof` command started as an MPI job (`mpirun -np K commprof report FILE`,
// docs/scale.md#distributed-analysis), and byte messages between them. MPI is joined only when the
// launcher says this process is one of several, so a command started alone never touches MPI.
// Every wait polls and sleeps rather than spinning: on a machine with fewer cores than processes,
// a waiting process leaves the cores to those still computing.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace commprof::cli {

// The contiguous block [first, last) of `items` that the `slot`-th of `slots` workers takes: every
// item in exactly one block, in order, the blocks' sizes differing by at most one.
inline std::pair<size_t, size_t> BlockOf(size_t items, size_t slot, size_t slots) {
  return {items * slot / slots, items * (slot + 1) / slots};
}

class AnalysisWorld {
 public:
  // The world when an MPI launcher started this process as one of several (OMPI_COMM_WORLD_SIZE or
  // PMI_SIZE above 1; PMIX_RANK set, with SLURM_NTASKS above 1 or unset) and COMMPROF_ANALYSIS_MPI is
  // not "off"; nullptr otherwise, or when MPI has one process. `error` is set (with the exit code to end with) when MPI
  // was asked for and could not start, or when srun started several tasks without MPI support (they cannot make one
  // report; the exit code is then RefusedExitCode's, and only the task that exits 2 should print `error`).
  static std::unique_ptr<AnalysisWorld> JoinIfLaunched(std::string& error, int& exit_code);
  // The exit code of a process refused before MPI is joined: 2 for the one that told why
  // (SpeaksForAll), 0 for the others. mpirun ends the whole job at the first process that exits
  // non-zero, and could kill the speaker before its message is out; the job still exits 2.
  static int RefusedExitCode();
  // Whether this process, before MPI is joined (or without it), tells the others' shared messages:
  // the launcher's rank 0 (core/launcher_env.h: MPI's, srun's or a torch launcher's), or a process
  // no launcher started.
  static bool SpeaksForAll();
  // Whether a launcher started this process as one of several that JoinIfLaunched would join or
  // refuse (MPI's or srun's variables say more than one, COMMPROF_ANALYSIS_MPI is not
  // "off"), and it is not the one that speaks for them: its usage errors are the speaker's too.
  static bool QuietBesideItsSpeaker();
  ~AnalysisWorld();  // MPI_Finalize
  AnalysisWorld(const AnalysisWorld&) = delete;
  AnalysisWorld& operator=(const AnalysisWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool first() const { return rank_ == 0; }

  // Starts sending `bytes` and returns at once (the receiver takes them when it asks); the order of
  // the sends to one process with one tag is the order they arrive in. FinishSends waits for all.
  void Send(int dest, int tag, std::string bytes);
  void FinishSends();
  // Lets MPI move the pending sends on (a long computation between calls would hold them back).
  void Progress();
  std::string Receive(int source, int tag);
  // For a transfer both sides are already in (the receiver asked for it): blocking MPI calls,
  // without the polite waits' sleeps, which would hold a large message back between its pieces.
  void SendAtOnce(int dest, int tag, const std::string& bytes);
  std::string ReceiveAtOnce(int source, int tag);
  // True on every process when `ok` is true on every process.
  bool AllOk(bool ok);
  void Barrier();
  // The first process's `value`, on every process.
  int FromFirst(int value);
  // The first process's `text`, on every process (the others' own `text` is replaced).
  std::string TextFromFirst(std::string text);

 private:
  AnalysisWorld(int rank, int size) : rank_(rank), size_(size) {}
  // A message being sent: its length word and bytes stay here until FinishSends.
  struct Outgoing {
    uint64_t length = 0;
    std::string bytes;
    std::vector<MPI_Request> requests;
  };
  std::deque<Outgoing> outgoing_;
  int rank_ = 0;
  int size_ = 1;
};

// Whether the launcher started this process as one of several and not the first (its rank in
// OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, or SLURM_PROCID of a step of several tasks). The
// commands that do not divide their work (info, check, diff, hta, merge, import) run in the first
// process alone: the others end at once, with 0, so that `mpirun -np K commprof check` prints once
// and exits with the first process's code. False with COMMPROF_ANALYSIS_MPI=off.
bool LaterProcessOfALaunch();

}  // namespace commprof::cli
