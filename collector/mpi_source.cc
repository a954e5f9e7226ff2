#include "collector/mpi_source.h"

#include "collector/runtime.h"
#include "commprof/event.h"

namespace commprof {
namespace {

const char* OpName(uint8_t op) {
  switch (op) {
    case COMMPROF_OP_BARRIER:
      return "MPI_Barrier";
    case COMMPROF_OP_BCAST:
      return "MPI_Bcast";
    case COMMPROF_OP_REDUCE:
      return "MPI_Reduce";
    case COMMPROF_OP_ALLREDUCE:
      return "MPI_Allreduce";
    case COMMPROF_OP_GATHER:
      return "MPI_Gather";
    case COMMPROF_OP_GATHERV:
      return "MPI_Gatherv";
    case COMMPROF_OP_SCATTER:
      return "MPI_Scatter";
    case COMMPROF_OP_SCATTERV:
      return "MPI_Scatterv";
    case COMMPROF_OP_ALLGATHER:
      return "MPI_Allgather";
    case COMMPROF_OP_ALLGATHERV:
      return "MPI_Allgatherv";
    case COMMPROF_OP_ALLTOALL:
      return "MPI_Alltoall";
    case COMMPROF_OP_ALLTOALLV:
      return "MPI_Alltoallv";
    case COMMPROF_OP_REDUCE_SCATTER:
      return "MPI_Reduce_scatter";
    case COMMPROF_OP_REDUCE_SCATTER_BLOCK:
      return "MPI_Reduce_scatter_block";
    case COMMPROF_OP_SCAN:
      return "MPI_Scan";
    case COMMPROF_OP_SEND:
      return "MPI_Send";
    case COMMPROF_OP_RECV:
      return "MPI_Recv";
    case COMMPROF_OP_SENDRECV:
      return "MPI_Sendrecv";
    case COMMPROF_OP_WAIT:
      return "MPI_Wait";
    case COMMPROF_OP_WAITALL:
      return "MPI_Waitall";
    case COMMPROF_OP_WAITANY:
      return "MPI_Waitany";
    case COMMPROF_OP_TEST:
      return "MPI_Test";
    case COMMPROF_OP_COMM_DUP:
      return "MPI_Comm_dup";
    case COMMPROF_OP_COMM_SPLIT:
      return "MPI_Comm_split";
    case COMMPROF_OP_COMM_CREATE:
      return "MPI_Comm_create";
    default:
      return nullptr;
  }
}

// The names of MpiName's entries, in its order from kNameIallreduce.
constexpr const char* kExtraNames[] = {"MPI_Iallreduce", "MPI_Ibcast",  "MPI_Iallgather", "MPI_Ialltoall",
                                       "MPI_Isend",      "MPI_Irecv",   "MPI_Init",       "MPI_Finalize",
                                       "MPI_Waitsome",   "MPI_Testall", "MPI_Testany",    "MPI_Testsome"};
static_assert(kNameIallreduce + std::size(kExtraNames) == kNameTestsome + 1);

}  // namespace

MpiSource::MpiSource(Runtime& rt, int world_rank) : rt_(rt), comms_(world_rank) {
  for (int op = 0; op < kNameIallreduce; ++op) {
    const char* n = OpName(static_cast<uint8_t>(op));
    names_[op] = n != nullptr ? rt_.Intern(n) : 0;
  }
  for (size_t i = 0; i < std::size(kExtraNames); ++i) {
    names_[kNameIallreduce + i] = rt_.Intern(kExtraNames[i]);
  }
}

MpiSource::~MpiSource() = default;

void MpiSource::StartClockSync() {
  const Config& c = rt_.config();
  if (!c.clock_sync || clock_sync_ != nullptr) {
    return;
  }
  clock_sync_ = std::make_unique<MpiClockSync>(rt_, c.clock_sync_rounds, c.clock_sync_interval_ms);
  clock_sync_->Start();
}

MpiThreadScratch& MpiSource::Scratch() {
  ThreadState* t = rt_.Thread();
  if (t->mpi_scratch == nullptr) {
    t->mpi_scratch = std::make_unique<MpiThreadScratch>();  // once per thread
  }
  return *t->mpi_scratch;
}

}  // namespace commprof
