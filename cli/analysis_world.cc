#include "cli/analysis_world.h"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace commprof::cli {
namespace {

// MPI counts are ints: a message goes as its length, then pieces of at most this many bytes.
constexpr size_t kPiece = size_t{1} << 30;

// How many processes the launcher started: OMPI_COMM_WORLD_SIZE or PMI_SIZE; with only PMIX_RANK
// (srun --mpi=pmix), SLURM_NTASKS, else -1 (several, perhaps: MPI_Init will tell); 1 without a
// launcher or with COMMPROF_ANALYSIS_MPI=off.
int LaunchedSize() {
  const char* off = std::getenv("COMMPROF_ANALYSIS_MPI");
  if (off != nullptr && std::strcmp(off, "off") == 0) {
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

// The launcher's rank of this process (0 when none says).
int LaunchedRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const char* v = std::getenv(name); v != nullptr) {
      return std::atoi(v);
    }
  }
  return 0;
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

std::unique_ptr<AnalysisWorld> AnalysisWorld::JoinIfLaunched(std::string& error) {
  error.clear();
  if (LaunchedSize() == 1) {
    return nullptr;
  }
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    error = "MPI_Init_thread failed (started by an MPI launcher, but MPI could not start)";
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

bool AnalysisWorld::RefuseSeveral(const char* command) {
  if (LaunchedSize() <= 1) {
    return false;  // alone, or a count no launcher variable says: not refused on a guess
  }
  if (LaunchedRank() == 0) {
    std::fprintf(stderr,
                 "commprof %s: started by an MPI launcher as one of several processes, each of which would "
                 "write the whole output; run it as one process (only `commprof report` is distributed), or set "
                 "COMMPROF_ANALYSIS_MPI=off to let every process run it\n",
                 command);
  }
  return true;
}

AnalysisWorld::~AnalysisWorld() { MPI_Finalize(); }

void AnalysisWorld::Send(int dest, int tag, const std::string& bytes) {
  uint64_t length = bytes.size();
  MPI_Request r;
  MPI_Isend(&length, 1, MPI_UINT64_T, dest, tag, MPI_COMM_WORLD, &r);
  WaitPolitely(r);
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, bytes.size() - at));
    MPI_Isend(bytes.data() + at, n, MPI_BYTE, dest, tag, MPI_COMM_WORLD, &r);
    WaitPolitely(r);
  }
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

}  // namespace commprof::cli
