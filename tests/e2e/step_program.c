/* A training loop of 4 MPI ranks marking its steps with the C API (commprof_step): each step
 * sleeps `--compute-ms` (default 40; a sleep, not a spin: 4 ranks on 2 cores), then calls MPI_Allreduce.
 * Planted truth: rank `--slow-rank` sleeps `--slow-ms` more before its allreduce in step
 * `--slow-step` only, so that step is the slowest and that rank its straggler (docs/metrics.md
 * §10); no other step has a late rank. */
#include <commprof/commprof.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planted_sleep.h"

int main(int argc, char** argv) {
  int steps = 10, compute_ms = 40, slow_rank = 2, slow_step = 7, slow_ms = 80;
  for (int i = 1; i + 1 < argc; i += 2) {
    int v = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--steps") == 0) {
      steps = v;
    } else if (strcmp(argv[i], "--compute-ms") == 0) {
      compute_ms = v;
    } else if (strcmp(argv[i], "--slow-rank") == 0) {
      slow_rank = v;
    } else if (strcmp(argv[i], "--slow-step") == 0) {
      slow_step = v;
    } else if (strcmp(argv[i], "--slow-ms") == 0) {
      slow_ms = v;
    } else {
      fprintf(stderr, "step_program: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x = rank, sum = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int s = 0; s < steps; ++s) {
    commprof_step((uint64_t)s);
    SleepMs(compute_ms);
    if (s == slow_step && rank == slow_rank) {
      SleepMs(slow_ms);
    }
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
