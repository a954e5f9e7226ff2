/* Two non-blocking collectives in flight at once, completed in issue order by separate waits,
 * with a blocking allreduce while both are open: each rank's thread then records
 *   Iallreduce [i0, end of Wait 0]   Ibcast [i1, end of Wait 1]   with i0 < i1 < end0 < end1,
 * a partial overlap on one thread (the Chrome export must put the Ibcast on a second lane), and
 * the blocking Allreduce nested inside both. Usage: mpi_overlap [ITERS] (default 20). */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int iters = argc > 1 ? atoi(argv[1]) : 20;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int a = rank, b = 0, c = rank, d = 0;
  MPI_Request req[2];
  for (int i = 0; i < iters; ++i) {
    MPI_Iallreduce(&a, &b, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
    MPI_Ibcast(&c, 1, MPI_INT, 0, MPI_COMM_WORLD, &req[1]);
    MPI_Allreduce(&a, &d, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    MPI_Wait(&req[1], MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
