/* Call sites (`commprof run --stacks`, case call_sites.py): two MPI_Allreduce call sites in two
 * functions, one of them slow because rank 1 sleeps 40 ms before it every iteration, plus a
 * non-blocking MPI_Iallreduce completed by MPI_Wait in a third function. The test finds the exact
 * lines by the marker comments (SLOW_ALLREDUCE, FAST_ALLREDUCE, IALLREDUCE, WAIT). Built with -g
 * and without frame pointers, so the stacks come from the unwind tables. Usage: PROGRAM ITERS */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

__attribute__((noinline)) static double fast_sum(double v) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* FAST_ALLREDUCE */
  return out;
}

__attribute__((noinline)) static double slow_sum(double v, int rank) {
  double out = 0;
  if (rank == 1) {
    sleep_ms(40);
  }
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SLOW_ALLREDUCE */
  return out;
}

__attribute__((noinline)) static double overlapped_sum(double v) {
  double out = 0;
  MPI_Request req;
  MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req); /* IALLREDUCE */
  MPI_Wait(&req, MPI_STATUS_IGNORE);                                      /* WAIT */
  return out;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int iters = argc > 1 ? atoi(argv[1]) : 10;
  double acc = 0;
  for (int i = 0; i < iters; ++i) {
    acc += fast_sum(1.0);
    acc += slow_sum(1.0, rank);
    acc += overlapped_sum(1.0);
  }
  MPI_Finalize();
  return acc > 0 ? 0 : 1;
}
