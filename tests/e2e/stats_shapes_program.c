/* The communication patterns real jobs have, for `commprof stats` (tests/e2e/stats_e2e.py case
 * shapes): each of `--iters` iterations calls MPI_Allreduce on a sub-communicator (MPI_Comm_split
 * by rank parity), an MPI_Sendrecv halo with the ring neighbours (1 KiB), MPI_Irecv + MPI_Isend
 * (8 KiB) and MPI_Iallreduce completed by one MPI_Waitall, and MPI_Bcast on the sub-communicator.
 * Nothing is planted: the test compares every figure with the raw events read by h5py. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  int iters = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--iters") == 0) {
      iters = atoi(argv[i + 1]);
    } else {
      fprintf(stderr, "stats_shapes_program: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  static double a[1024], b[1024];
  double c[16] = {0}, d[16];
  for (int k = 0; k < 1024; ++k) {
    a[k] = rank + k;
  }
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  for (int i = 0; i < iters; ++i) {
    MPI_Allreduce(a, b, 16, MPI_DOUBLE, MPI_SUM, half);
    MPI_Sendrecv(a, 128, MPI_DOUBLE, right, 1, b, 128, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request rq[3];
    MPI_Irecv(b, 1024, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(a, 1024, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &rq[1]);
    MPI_Iallreduce(c, d, 16, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[2]);
    MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
    MPI_Bcast(c, 16, MPI_DOUBLE, 0, half);
  }
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
