// What an MPI call's arguments become in an event: datatype and reduction codes of
// commprof/event.h, byte counts (docs/file-format.md gives the rule for each call), the key a
// request is parked under, and the name each wrapped call is stored under.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>

namespace commprof {

// Name indexes of the calls that share an op type with another call (non-blocking variants carry
// the blocking call's op and the NONBLOCKING flag; Ssend/Bsend/Rsend carry SEND) or have none;
// every other call is named by its op (commprof/event.h), below 200.
enum MpiName : uint8_t {
  kNameIallreduce = 200,
  kNameIbcast,
  kNameIallgather,
  kNameIalltoall,
  kNameIsend,
  kNameIrecv,
  kNameInit,
  kNameFinalize,
  kNameWaitsome,
  kNameTestall,
  kNameTestany,
  kNameTestsome,
  kNameSsend,
  kNameBsend,
  kNameRsend,
  kNameIssend,
  kNameIbsend,
  kNameIrsend,
  kNameSendrecvReplace,
  kNameIbarrier,
  kNameIreduce,
  kNameIgather,
  kNameIgatherv,
  kNameIscatter,
  kNameIscatterv,
  kNameIallgatherv,
  kNameIalltoallv,
  kNameIreduceScatter,
  kNameIreduceScatterBlock,
  kNameIscan,
  kNameIexscan,
  kNameEnd_  // bound, not a name
};

// The string stored for `name` (an op type or an MpiName): "MPI_Allreduce", "MPI_Issend", ...;
// nullptr for a value no wrapped call is named by.
const char* MpiCallName(uint8_t name);

uint8_t DatatypeCode(MPI_Datatype dt);
uint8_t ReduceOpCode(MPI_Op op);

// count elements of `dt`, in bytes (0 for MPI_DATATYPE_NULL).
uint64_t TypeBytes(MPI_Datatype dt, uint64_t count);

// The sum of the n counts, negative ones taken as 0.
uint64_t SumCounts(const int counts[], int n);

inline uintptr_t RequestKey(MPI_Request r) {
  uintptr_t k = 0;
  static_assert(sizeof(MPI_Request) <= sizeof(uintptr_t));
  std::memcpy(&k, &r, sizeof r);  // NOLINT(bugprone-sizeof-expression): the handle's own bytes, a pointer or not
  return k;
}

}  // namespace commprof
