/* Independent check of Late Sender / Late Receiver with non-blocking operations (e2e case
 * verify_independent; docs/metrics.md §5.2-5.4). Run with 4 ranks. Per iteration, after
 * MPI_Barrier(world) at t = 0 (all times planted by sleeping):
 *   rank 0: MPI_Irecv from 1 (tag 1) and from 2 (tag 2), sleeps C ms ("compute"), MPI_Waitall:
 *           the Waitall is the completing call, entered at ~C; the sends come at ~S1 and ~S2, so
 *           Late Sender = S2 - C, charged once (the largest), not from the Irecv posts.
 *   rank 1: sleeps S1 ms, MPI_Send 8 B to 0 (tag 1), then MPI_Recv 4 MiB from 3 (tag 3) at ~S1.
 *   rank 2: sleeps S2 ms, MPI_Send 8 B to 0 (tag 2).
 *   rank 3: MPI_Isend 4 MiB to 1 (tag 3) at ~0 and MPI_Wait at once: a rendezvous that cannot
 *           finish before rank 1 posts its receive at ~S1: Late Receiver = S1, charged to rank 3.
 * Usage: verify_p2p [--iters K] [--compute-ms C] [--s1-ms S1] [--s2-ms S2]  (5, 10, 30, 50) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planted_sleep.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = 5, c = 10, s1 = 30, s2 = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--iters") == 0)
      iters = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--compute-ms") == 0)
      c = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--s1-ms") == 0)
      s1 = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--s2-ms") == 0)
      s2 = atoi(argv[i + 1]);
  }
  if (size != 4) {
    if (rank == 0) fprintf(stderr, "verify_p2p: run with 4 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int big = 4 << 20;
  char* buf = calloc(big, 1);
  double small[2] = {0, 0};
  for (int k = 0; k < iters; ++k) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      MPI_Request req[2];
      MPI_Irecv(&small[0], 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, &req[0]);
      MPI_Irecv(&small[1], 1, MPI_DOUBLE, 2, 2, MPI_COMM_WORLD, &req[1]);
      SleepMs(c);
      MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    } else if (rank == 1) {
      SleepMs(s1);
      MPI_Send(&small[0], 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
      MPI_Recv(buf, big, MPI_BYTE, 3, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 2) {
      SleepMs(s2);
      MPI_Send(&small[1], 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
    } else {
      MPI_Request req;
      MPI_Isend(buf, big, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  free(buf);
  MPI_Finalize();
  return 0;
}
