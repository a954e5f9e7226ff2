// Ranks stuck in different calls, for the fault suite's in-flight case (tests/e2e/delivery_faults.py
// case term_inflight): a job ended by SIGTERM (a Slurm time limit, scancel) must still say where
// each rank was.
//
//   inflight_program            (4 ranks)
//
// Every rank runs 3 MPI_Allreduce calls on MPI_COMM_WORLD (8 bytes, complete everywhere), then
// splits the world into evens and odds, then blocks for good:
//   rank 0  MPI_Allreduce of 2 doubles on the evens' communicator (rank 2 never joins)
//   rank 1  MPI_Irecv of 16 bytes from rank 3, tag 6, then MPI_Wait on it (never sent)
//   rank 2  MPI_Recv of 1 int from rank 3, tag 5 (never sent)
//   rank 3  MPI_Barrier on MPI_COMM_WORLD (nobody else enters it)
// Each rank prints "rank R blocking" just before its last call; the suite then sends SIGTERM.
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x = rank, y = 0;
  for (int i = 0; i < 3; ++i) {
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  printf("rank %d blocking\n", rank);
  fflush(stdout);
  double two[2] = {1, 2}, out[2];
  char buf[16];
  int v = 0;
  MPI_Request req;
  switch (rank) {
    case 0:
      MPI_Allreduce(two, out, 2, MPI_DOUBLE, MPI_SUM, half);
      break;
    case 1:
      MPI_Irecv(buf, 16, MPI_CHAR, 3, 6, MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      break;
    case 2:
      MPI_Recv(&v, 1, MPI_INT, 3, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      break;
    default:
      MPI_Barrier(MPI_COMM_WORLD);
      break;
  }
  MPI_Finalize();  // never reached
  return 0;
}
