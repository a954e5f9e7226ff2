#include "collector/mpi_codes.h"

#include <iterator>

#include "commprof/event.h"

namespace commprof {
namespace {

const char* OpCallName(uint8_t op) {
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
    case COMMPROF_OP_EXSCAN:
      return "MPI_Exscan";
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
constexpr const char* kExtraNames[] = {"MPI_Iallreduce",
                                       "MPI_Ibcast",
                                       "MPI_Iallgather",
                                       "MPI_Ialltoall",
                                       "MPI_Isend",
                                       "MPI_Irecv",
                                       "MPI_Init",
                                       "MPI_Finalize",
                                       "MPI_Waitsome",
                                       "MPI_Testall",
                                       "MPI_Testany",
                                       "MPI_Testsome",
                                       "MPI_Ssend",
                                       "MPI_Bsend",
                                       "MPI_Rsend",
                                       "MPI_Issend",
                                       "MPI_Ibsend",
                                       "MPI_Irsend",
                                       "MPI_Sendrecv_replace",
                                       "MPI_Ibarrier",
                                       "MPI_Ireduce",
                                       "MPI_Igather",
                                       "MPI_Igatherv",
                                       "MPI_Iscatter",
                                       "MPI_Iscatterv",
                                       "MPI_Iallgatherv",
                                       "MPI_Ialltoallv",
                                       "MPI_Ireduce_scatter",
                                       "MPI_Ireduce_scatter_block",
                                       "MPI_Iscan",
                                       "MPI_Iexscan"};
static_assert(kNameIallreduce + std::size(kExtraNames) == kNameEnd_);

}  // namespace

const char* MpiCallName(uint8_t name) {
  if (name < kNameIallreduce) {
    return OpCallName(name);
  }
  return name < kNameEnd_ ? kExtraNames[name - kNameIallreduce] : nullptr;
}

uint8_t DatatypeCode(MPI_Datatype dt) {
  if (dt == MPI_DATATYPE_NULL) {
    return COMMPROF_DT_NONE;
  }
  if (dt == MPI_BYTE || dt == MPI_PACKED) {
    return COMMPROF_DT_BYTE;
  }
  if (dt == MPI_CHAR || dt == MPI_SIGNED_CHAR) {
    return COMMPROF_DT_CHAR;
  }
  if (dt == MPI_INT8_T) {
    return COMMPROF_DT_INT8;
  }
  if (dt == MPI_UNSIGNED_CHAR || dt == MPI_UINT8_T) {
    return COMMPROF_DT_UINT8;
  }
  if (dt == MPI_SHORT || dt == MPI_INT16_T) {
    return COMMPROF_DT_INT16;
  }
  if (dt == MPI_UNSIGNED_SHORT || dt == MPI_UINT16_T) {
    return COMMPROF_DT_UINT16;
  }
  if (dt == MPI_INT || dt == MPI_INT32_T) {
    return COMMPROF_DT_INT32;
  }
  if (dt == MPI_UNSIGNED || dt == MPI_UINT32_T) {
    return COMMPROF_DT_UINT32;
  }
  if (dt == MPI_LONG || dt == MPI_LONG_LONG || dt == MPI_INT64_T) {
    return COMMPROF_DT_INT64;
  }
  if (dt == MPI_UNSIGNED_LONG || dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_UINT64_T) {
    return COMMPROF_DT_UINT64;
  }
  if (dt == MPI_FLOAT) {
    return COMMPROF_DT_FLOAT32;
  }
  if (dt == MPI_DOUBLE) {
    return COMMPROF_DT_FLOAT64;
  }
  if (dt == MPI_LONG_DOUBLE) {
    return COMMPROF_DT_LONG_DOUBLE;
  }
  int ni, na, nd, combiner;
  PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner);
  return combiner == MPI_COMBINER_NAMED ? COMMPROF_DT_OTHER : COMMPROF_DT_DERIVED;
}

uint8_t ReduceOpCode(MPI_Op op) {
  struct Entry {
    MPI_Op op;
    uint8_t code;
  };
  // Not a static table: the MPI_* handles of some implementations are not constant expressions.
  const Entry table[] = {
      {MPI_OP_NULL, COMMPROF_RED_NONE},  {MPI_SUM, COMMPROF_RED_SUM},      {MPI_PROD, COMMPROF_RED_PROD},
      {MPI_MAX, COMMPROF_RED_MAX},       {MPI_MIN, COMMPROF_RED_MIN},      {MPI_LAND, COMMPROF_RED_LAND},
      {MPI_LOR, COMMPROF_RED_LOR},       {MPI_BAND, COMMPROF_RED_BAND},    {MPI_BOR, COMMPROF_RED_BOR},
      {MPI_MAXLOC, COMMPROF_RED_MAXLOC}, {MPI_MINLOC, COMMPROF_RED_MINLOC}};
  for (const Entry& e : table) {
    if (op == e.op) {
      return e.code;
    }
  }
  return COMMPROF_RED_USER;
}

uint64_t TypeBytes(MPI_Datatype dt, uint64_t count) {
  if (dt == MPI_DATATYPE_NULL) {
    return 0;
  }
  int size = 0;
  PMPI_Type_size(dt, &size);
  return count * static_cast<uint64_t>(size > 0 ? size : 0);
}

uint64_t SumCounts(const int counts[], int n) {
  uint64_t s = 0;
  for (int i = 0; i < n; ++i) {
    s += static_cast<uint64_t>(counts[i] > 0 ? counts[i] : 0);
  }
  return s;
}

}  // namespace commprof
