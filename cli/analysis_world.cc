#include "cli/analysis_world.h"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <vector>

#include "core/config.h"
#include "core/launcher_env.h"

namespace commprof::cli {
namespace {

// MPI counts are ints: a message goes as its length, then pieces of at most this many bytes.
constexpr size_t kPiece = size_t{1} << 30;

// COMMPROF_ANALYSIS_MPI=off (0, false, no): every process a command of its own, whatever started it.
bool EachProcessAlone() {
  const char* off = std::getenv("COMMPROF_ANALYSIS_MPI");
  return off != nullptr && IsOffSwitch(off);
}

// How many processes the launcher started: OMPI_COMM_WORLD_SIZE or PMI_SIZE; with only PMIX_RANK
// (srun --mpi=pmix), SLURM_NTASKS, else -1 (several, perhaps: MPI_Init will tell); 1 without a
// launcher or with COMMPROF_ANALYSIS_MPI=off.
int LaunchedSize() {
  if (EachProcessAlone()) {
    return 1;
  }
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(name); v != nullptr) {
      return std::max(1, std::atoi(v));
    }
  }
  if (std::getenv("PMIX_RANK") == nullptr) {
    return 1;
  }
  const char* tasks = std::getenv("SLURM_NTASKS");
  return tasks != nullptr ? std::max(1, std::atoi(tasks)) : -1;
}

// srun started this process as one of a step's N > 1 tasks without MPI support (no PMI variable:
// srun without --mpi=pmix or pmi2): N, else 0. The tasks cannot join one MPI job, and each alone
// would write the whole output. (A batch script has no step task count: it is one process.)
int SlurmTasksWithoutMpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) {
      return 0;
    }
  }
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  if (EachProcessAlone() || tasks == nullptr || std::getenv("SLURM_PROCID") == nullptr) {
    return 0;
  }
  const int n = std::atoi(tasks);
  return n > 1 ? n : 0;
}

// The rank a launcher gave this process in `name`, or -1 without it.
int LaunchedRankIn(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : -1;
}

// Waits for `request` without spinning a core: a test, then a sleep that grows to 1 ms.
void WaitPolitely(MPI_Request& request) {
  long sleep_ns = 10000;
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done != 0) {
      return;
    }
    const timespec ts{0, sleep_ns};
    nanosleep(&ts, nullptr);
    sleep_ns = std::min(sleep_ns * 2, 1000000L);
  }
}

}  // namespace

std::unique_ptr<AnalysisWorld> AnalysisWorld::JoinIfLaunched(std::string& error, int& exit_code) {
  error.clear();
  exit_code = 0;
  if (LaunchedSize() == 1) {
    if (const int tasks = SlurmTasksWithoutMpi(); tasks > 1) {
      error = "started by srun as one of " + std::to_string(tasks) +
              " tasks without MPI support: run it as one task, or with srun --mpi=pmix to make one output of "
              "them (COMMPROF_ANALYSIS_MPI=off: each task an output of its own)";
      exit_code = RefusedExitCode();  // 2: the command line (the launch) is wrong, not the file
    }
    return nullptr;
  }
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    error = "MPI_Init_thread failed (started by an MPI launcher, but MPI could not start)";
    exit_code = 1;
    return nullptr;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1) {
    MPI_Finalize();
    return nullptr;
  }
  return std::unique_ptr<AnalysisWorld>(new AnalysisWorld(rank, size));
}

bool AnalysisWorld::SpeaksForAll() { return LauncherRank().value_or(0) == 0; }

int AnalysisWorld::RefusedExitCode() { return SpeaksForAll() ? 2 : 0; }

bool AnalysisWorld::QuietBesideItsSpeaker() {
  const bool several = LaunchedSize() != 1 || SlurmTasksWithoutMpi() > 1;
  return several && !SpeaksForAll();
}

// Leaving through an exception, the other processes may be waiting for this one: MPI_Finalize would
// wait for them in turn, for ever. MPI_Abort ends the whole job instead, and mpirun reports it.
AnalysisWorld::~AnalysisWorld() {
  if (std::uncaught_exceptions() > 0) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

void AnalysisWorld::Send(int dest, int tag, std::string bytes) {
  auto& out = outgoing_.emplace_back();
  out.length = bytes.size();
  out.bytes = std::move(bytes);
  out.requests.emplace_back();
  MPI_Isend(&out.length, 1, MPI_UINT64_T, dest, tag, MPI_COMM_WORLD, &out.requests.back());
  for (size_t at = 0; at < out.bytes.size(); at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, out.bytes.size() - at));
    out.requests.emplace_back();
    MPI_Isend(out.bytes.data() + at, n, MPI_BYTE, dest, tag, MPI_COMM_WORLD, &out.requests.back());
  }
}

void AnalysisWorld::Progress() {
  for (Outgoing& out : outgoing_) {
    int done = 0;
    MPI_Testall(static_cast<int>(out.requests.size()), out.requests.data(), &done, MPI_STATUSES_IGNORE);
  }
}

void AnalysisWorld::FinishSends() {
  for (Outgoing& out : outgoing_) {
    for (MPI_Request& r : out.requests) {
      WaitPolitely(r);
    }
  }
  outgoing_.clear();
}

std::string AnalysisWorld::Receive(int source, int tag) {
  uint64_t length = 0;
  MPI_Request r;
  MPI_Irecv(&length, 1, MPI_UINT64_T, source, tag, MPI_COMM_WORLD, &r);
  WaitPolitely(r);
  std::string bytes(length, '\0');
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, bytes.size() - at));
    MPI_Irecv(bytes.data() + at, n, MPI_BYTE, source, tag, MPI_COMM_WORLD, &r);
    WaitPolitely(r);
  }
  return bytes;
}

void AnalysisWorld::SendAtOnce(int dest, int tag, const std::string& bytes) {
  uint64_t length = bytes.size();
  MPI_Send(&length, 1, MPI_UINT64_T, dest, tag, MPI_COMM_WORLD);
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, bytes.size() - at));
    MPI_Send(bytes.data() + at, n, MPI_BYTE, dest, tag, MPI_COMM_WORLD);
  }
}

std::string AnalysisWorld::ReceiveAtOnce(int source, int tag) {
  uint64_t length = 0;
  MPI_Recv(&length, 1, MPI_UINT64_T, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  std::string bytes(length, '\0');
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, bytes.size() - at));
    MPI_Recv(bytes.data() + at, n, MPI_BYTE, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  return bytes;
}

bool AnalysisWorld::AllOk(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Request r;
  MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &r);
  WaitPolitely(r);
  return all == 1;
}

void AnalysisWorld::Barrier() {
  MPI_Request r;
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  WaitPolitely(r);
}

int AnalysisWorld::FromFirst(int value) {
  MPI_Request r;
  MPI_Ibcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD, &r);
  WaitPolitely(r);
  return value;
}

std::string AnalysisWorld::TextFromFirst(std::string text) {
  uint64_t length = text.size();
  MPI_Request r;
  MPI_Ibcast(&length, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &r);
  WaitPolitely(r);
  text.resize(length);
  for (size_t at = 0; at < text.size(); at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, text.size() - at));
    MPI_Ibcast(text.data() + at, n, MPI_BYTE, 0, MPI_COMM_WORLD, &r);
    WaitPolitely(r);
  }
  return text;
}

bool LaterProcessOfALaunch() {
  if (EachProcessAlone()) {
    return false;
  }
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const int rank = LaunchedRankIn(name); rank >= 0) {
      return rank > 0;
    }
  }
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  return tasks != nullptr && std::atoi(tasks) > 1 && LaunchedRankIn("SLURM_PROCID") > 0;
}

}  // namespace commprof::cli
