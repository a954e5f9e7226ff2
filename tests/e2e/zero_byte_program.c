/* Zero-byte collectives (tests/e2e/clock_hosts_e2e.py, case zero_byte): each of `--iters`
 * iterations has rank r sleep 2r ms, call MPI_Allreduce with count 0 (Open MPI returns at once,
 * without waiting for the other ranks), then MPI_Barrier (which does wait: the 6 ms spread of the
 * arrivals is waited for there). With --alltoallv, each iteration then has rank r sleep 2r ms again
 * and call MPI_Alltoallv with every count 0, which in Open MPI still exchanges empty messages with
 * every peer and so waits for the last rank. With --sizeless, each iteration then has rank r sleep
 * 2r ms once more and call MPI_Allgather with count 1 of a datatype of size 0 (MPI_Type_contiguous
 * of 0 doubles): no byte moves, yet the count is not 0, so Open MPI runs the allgather and waits;
 * then, after the same sleep, MPI_Alltoall with count 1 of that type, which Open MPI returns from at
 * once (an empty type signature, whatever the count). Nothing else is called. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planted_sleep.h"

int main(int argc, char** argv) {
  int iters = 20;
  int alltoallv = 0;
  int sizeless = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--alltoallv") == 0) {
      alltoallv = 1;
    } else if (strcmp(argv[i], "--sizeless") == 0) {
      sizeless = 1;
    } else {
      fprintf(stderr, "zero_byte_program: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double x[1] = {1.0}, y[1] = {0.0};
  int* zeros = calloc((size_t)size, sizeof(int)); /* every count and displacement 0 */
  MPI_Datatype empty;
  MPI_Type_contiguous(0, MPI_DOUBLE, &empty);
  MPI_Type_commit(&empty);
  for (int i = 0; i < iters; ++i) {
    SleepMs(2 * rank);
    MPI_Allreduce(x, y, 0, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (alltoallv) {
      SleepMs(2 * rank);
      MPI_Alltoallv(x, zeros, zeros, MPI_DOUBLE, y, zeros, zeros, MPI_DOUBLE, MPI_COMM_WORLD);
    }
    if (sizeless) {
      SleepMs(2 * rank);
      MPI_Allgather(x, 1, empty, y, 1, empty, MPI_COMM_WORLD);
      SleepMs(2 * rank);
      MPI_Alltoall(x, 1, empty, y, 1, empty, MPI_COMM_WORLD);
    }
  }
  MPI_Type_free(&empty);
  free(zeros);
  MPI_Finalize();
  return 0;
}
