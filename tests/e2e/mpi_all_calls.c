/* Calls every MPI function commprof wraps, once each, with sizes the e2e test knows, so the
 * test can check that each one is recorded with the right bytes, root/peer and communicator.
 * Run with exactly 4 ranks. Every buffer holds ints (4 bytes). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 8 /* elements per rank in the regular collectives */

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 4) {
    if (rank == 0) fprintf(stderr, "mpi_all_calls: run with 4 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int send[4 * N], recv[4 * N], counts[4], displs[4];
  for (int i = 0; i < 4 * N; ++i) send[i] = rank + i;
  for (int i = 0; i < 4; ++i) {
    counts[i] = N;
    displs[i] = i * N;
  }

  MPI_Barrier(MPI_COMM_WORLD);                                                                 /* seq 0 */
  MPI_Bcast(send, N, MPI_INT, 1, MPI_COMM_WORLD);                                              /* seq 1, 32 B, root 1 */
  MPI_Reduce(send, recv, N, MPI_INT, MPI_SUM, 2, MPI_COMM_WORLD);                              /* seq 2, 32 B, root 2 */
  MPI_Allreduce(send, recv, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD);                              /* seq 3, 32 B */
  MPI_Gather(send, N, MPI_INT, recv, N, MPI_INT, 0, MPI_COMM_WORLD);                           /* seq 4, 128 B */
  MPI_Gatherv(send, N, MPI_INT, recv, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);             /* seq 5 */
  MPI_Scatter(send, N, MPI_INT, recv, N, MPI_INT, 3, MPI_COMM_WORLD);                          /* seq 6, 128 B */
  MPI_Scatterv(send, counts, displs, MPI_INT, recv, N, MPI_INT, 3, MPI_COMM_WORLD);            /* seq 7 */
  MPI_Allgather(send, N, MPI_INT, recv, N, MPI_INT, MPI_COMM_WORLD);                           /* seq 8, 128 B */
  MPI_Allgatherv(send, N, MPI_INT, recv, counts, displs, MPI_INT, MPI_COMM_WORLD);             /* seq 9, 128 B */
  MPI_Alltoall(send, N, MPI_INT, recv, N, MPI_INT, MPI_COMM_WORLD);                            /* seq 10, 128 B */
  MPI_Alltoallv(send, counts, displs, MPI_INT, recv, counts, displs, MPI_INT, MPI_COMM_WORLD); /* seq 11 */
  MPI_Reduce_scatter(send, recv, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);                    /* seq 12, 128 B */
  MPI_Reduce_scatter_block(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);                   /* seq 13, 128 B */
  MPI_Scan(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);                                   /* seq 14, 32 B */

  MPI_Request reqs[4];
  MPI_Iallreduce(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &reqs[0]); /* seq 15 */
  MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
  MPI_Ibcast(send, N, MPI_INT, 0, MPI_COMM_WORLD, &reqs[0]); /* seq 16 */
  int flag = 0;
  while (!flag) MPI_Test(&reqs[0], &flag, MPI_STATUS_IGNORE);
  MPI_Iallgather(send, N, MPI_INT, recv, N, MPI_INT, MPI_COMM_WORLD, &reqs[0]);            /* seq 17 */
  MPI_Ialltoall(send, N / 4, MPI_INT, recv + 0, N / 4, MPI_INT, MPI_COMM_WORLD, &reqs[1]); /* seq 18, 32 B */
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);

  /* Point to point in a ring: rank r sends to r+1 with tag 7+r. */
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  if (rank % 2 == 0) {
    MPI_Send(send, N, MPI_INT, right, 7 + rank, MPI_COMM_WORLD);
    MPI_Recv(recv, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(recv, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(send, N, MPI_INT, right, 7 + rank, MPI_COMM_WORLD);
  }
  MPI_Irecv(recv, 2 * N, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(send, N / 2, MPI_INT, right, 99, MPI_COMM_WORLD, &reqs[1]);
  int index = -1;
  MPI_Waitany(2, reqs, &index, MPI_STATUS_IGNORE);
  MPI_Waitany(2, reqs, &index, MPI_STATUS_IGNORE);
  MPI_Sendrecv(send, N, MPI_INT, right, 5, recv, N, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

  /* Communicators: a dup, a split into halves, and a create of the even ranks. */
  MPI_Comm dup, half, evens;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Allreduce(send, recv, 1, MPI_INT, MPI_SUM, dup); /* dup seq 0, 4 B */
  MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &half);
  MPI_Allreduce(send, recv, 2, MPI_INT, MPI_SUM, half); /* half seq 0, 8 B */
  MPI_Group world_group, even_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int even_ranks[2] = {0, 2};
  MPI_Group_incl(world_group, 2, even_ranks, &even_group);
  MPI_Comm_create(MPI_COMM_WORLD, even_group, &evens);
  if (evens != MPI_COMM_NULL) {
    MPI_Barrier(evens);
    MPI_Comm_free(&evens);
  }
  MPI_Group_free(&even_group);
  MPI_Group_free(&world_group);
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  MPI_Finalize();
  return 0;
}
