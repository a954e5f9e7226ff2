// What an MPI call's arguments become in an event: datatype and reduction codes of
// commprof/event.h, byte counts (docs/file-format.md gives the rule for each call) and the key a
// request is parked under.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>

namespace commprof {

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
