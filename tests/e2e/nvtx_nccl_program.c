/* The real libnccl.so.2 on a machine without a GPU: collective and
 * point-to-point calls with a NULL communicator fail fast with ncclInvalidArgument but still push
 * and pop their NVTX ranges in the "NCCL" domain, with the payload NCCL fills from the arguments.
 * Each rank passes rank-dependent counts, peers and roots (the test recomputes them):
 *   ncclAllReduce(count 16 * (rank + 1) floats, ncclSum)
 *   ncclSend(count 32 + rank int64s, peer 3 + rank)
 *   ncclReduce(count 100 doubles, ncclMax, root rank + 1)
 * and exits 1 if any call did not fail with ncclInvalidArgument. */
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int bad = 0;
  ncclResult_t r = ncclAllReduce(NULL, NULL, (size_t)(16 * (rank + 1)), ncclFloat, ncclSum, NULL, NULL);
  bad |= r != ncclInvalidArgument;
  r = ncclSend(NULL, (size_t)(32 + rank), ncclInt64, 3 + rank, NULL, NULL);
  bad |= r != ncclInvalidArgument;
  r = ncclReduce(NULL, NULL, 100, ncclDouble, ncclMax, rank + 1, NULL, NULL);
  bad |= r != ncclInvalidArgument;
  if (bad) fprintf(stderr, "nvtx_nccl_program: rank %d: a call did not fail with ncclInvalidArgument\n", rank);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return bad;
}
