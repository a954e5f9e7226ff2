/* Zero-byte collectives (tests/e2e/clock_hosts_e2e.py, case zero_byte): each of `--iters`
 * iterations has rank r sleep 2r ms, call MPI_Allreduce with count 0 (Open MPI returns at once,
 * without waiting for the other ranks), then MPI_Barrier (which does wait: the 6 ms spread of the
 * arrivals is waited for there). Nothing else is called. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planted_sleep.h"

int main(int argc, char** argv) {
  int iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--iters") == 0) {
      iters = atoi(argv[i + 1]);
    } else {
      fprintf(stderr, "zero_byte_program: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x[1] = {1.0}, y[1] = {0.0};
  for (int i = 0; i < iters; ++i) {
    SleepMs(2 * rank);
    MPI_Allreduce(x, y, 0, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
