#include "collector/mpi_codes.h"

#include "commprof/event.h"

namespace commprof {

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
