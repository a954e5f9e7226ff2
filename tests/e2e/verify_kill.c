/* Independent check of incomplete instances (e2e case verify_independent). Run with 4 ranks.
 *   K x Allreduce (8 B, world)                      complete on every rank
 *   B x Bcast (8 B, root 0) on ranks 0,1,2 only     rank 3 never enters them: the eager sends
 *                                                   let 0,1,2 return, so each is recorded by
 *                                                   exactly ranks 0,1,2 (incomplete, 3 of 4)
 *   rank 3 sleeps 800 ms (the others' shippers flush meanwhile), then SIGKILLs itself; ranks
 *   0,1,2 wait in MPI_Barrier (never returns, not recorded) until mpirun ends the job.
 * Usage: verify_kill [--iters K] [--bcasts B]  (defaults 5, 3) */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int iters = 5, bcasts = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--iters") == 0)
      iters = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--bcasts") == 0)
      bcasts = atoi(argv[i + 1]);
  }
  double x = rank, y = 0;
  for (int k = 0; k < iters; ++k) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 3) {
    struct timespec t = {0, 800000000L};
    while (nanosleep(&t, &t) != 0) {
    }
    raise(SIGKILL);
  }
  for (int k = 0; k < bcasts; ++k) {
    struct timespec t = {0, 50000000L};
    while (nanosleep(&t, &t) != 0) {
    }
    MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
