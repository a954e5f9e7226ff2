/* Two collective types in a loop for `commprof diff` (tests/e2e/diff_e2e.py): each of `--iters`
 * iterations sleeps `--compute-ms` (a sleep, not a spin: 4 ranks share 2 cores), calls
 * MPI_Allreduce, then MPI_Bcast from rank 0. Planted slowdown: with COMMPROF_TEST_BCAST_DELAY_MS=D,
 * the root sleeps D ms just before each MPI_Bcast, so every other rank waits about D ms inside it
 * while MPI_Allreduce is unchanged (the ranks leave the Bcast together, as soon as the root sends,
 * and all sleep again before the next Allreduce). No other collective is called: a type with a
 * single call has no spread for the noise guard to judge by. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planted_sleep.h"

int main(int argc, char** argv) {
  int iters = 30, compute_ms = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    int v = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--iters") == 0) {
      iters = v;
    } else if (strcmp(argv[i], "--compute-ms") == 0) {
      compute_ms = v;
    } else {
      fprintf(stderr, "diff_program: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const char* delay_env = getenv("COMMPROF_TEST_BCAST_DELAY_MS");
  const int bcast_delay_ms = delay_env != NULL ? atoi(delay_env) : 0;
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x[64], sum[64];
  for (int k = 0; k < 64; ++k) {
    x[k] = rank + k;
  }
  for (int i = 0; i < iters; ++i) {
    SleepMs(compute_ms);
    MPI_Allreduce(x, sum, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && bcast_delay_ms > 0) {
      SleepMs(bcast_delay_ms);
    }
    MPI_Bcast(sum, 64, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
