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
  MPI_Exscan(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* seq 19, 32 B */

  /* The other non-blocking collectives, all in flight together (a receive buffer each), completed
   * by one Waitall. Bytes as their blocking forms. */
  static int out[12][4 * N];
  MPI_Request nbc[12];
  MPI_Ibarrier(MPI_COMM_WORLD, &nbc[0]);                                         /* seq 20, 0 B */
  MPI_Ireduce(send, out[1], N, MPI_INT, MPI_SUM, 2, MPI_COMM_WORLD, &nbc[1]);    /* seq 21, 32 B, root 2 */
  MPI_Igather(send, N, MPI_INT, out[2], N, MPI_INT, 0, MPI_COMM_WORLD, &nbc[2]); /* seq 22, 128 B */
  MPI_Igatherv(send, N, MPI_INT, out[3], counts, displs, MPI_INT, 0, MPI_COMM_WORLD, &nbc[3]);  /* seq 23 */
  MPI_Iscatter(send, N, MPI_INT, out[4], N, MPI_INT, 3, MPI_COMM_WORLD, &nbc[4]);               /* seq 24, 128 B */
  MPI_Iscatterv(send, counts, displs, MPI_INT, out[5], N, MPI_INT, 3, MPI_COMM_WORLD, &nbc[5]); /* seq 25 */
  MPI_Iallgatherv(send, N, MPI_INT, out[6], counts, displs, MPI_INT, MPI_COMM_WORLD, &nbc[6]);  /* seq 26, 128 B */
  MPI_Ialltoallv(send, counts, displs, MPI_INT, out[7], counts, displs, MPI_INT, MPI_COMM_WORLD, &nbc[7]); /* 27 */
  MPI_Ireduce_scatter(send, out[8], counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &nbc[8]);  /* seq 28, 128 B */
  MPI_Ireduce_scatter_block(send, out[9], N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &nbc[9]); /* seq 29, 128 B */
  MPI_Iscan(send, out[10], N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &nbc[10]);               /* seq 30, 32 B */
  MPI_Iexscan(send, out[11], N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &nbc[11]);             /* seq 31, 32 B */
  MPI_Waitall(12, nbc, MPI_STATUSES_IGNORE);

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
  /* Sendrecv ring: 16 B sent right with tag 5+rank; the receive half (32 B posted, any source)
   * gets 16 B from the left. Sendrecv_replace the other way: 32 B, tag 40, received with any tag.
   * One wildcard each, so neither receive can take the other's message. */
  MPI_Sendrecv(send, N / 2, MPI_INT, right, 5 + rank, recv, N, MPI_INT, MPI_ANY_SOURCE, 5 + left, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Status status;
  MPI_Sendrecv_replace(recv, N, MPI_INT, left, 40, right, MPI_ANY_TAG, MPI_COMM_WORLD, &status);

  /* The send modes, to the right, tags 20-25, into receives posted first. The ready-mode
   * receives (22, 25) are posted before the Ssend's (20), so the Ssend returning means the right
   * neighbour has posted them: Rsend and Irsend are then legal. */
  static char bsend_space[2 * (N * sizeof(int) + MPI_BSEND_OVERHEAD)];
  MPI_Buffer_attach(bsend_space, sizeof bsend_space);
  static int modes_in[6][N];
  MPI_Request modes[9];
  const int tags[6] = {22, 25, 21, 23, 24, 20};
  for (int i = 0; i < 6; ++i) MPI_Irecv(modes_in[i], N, MPI_INT, left, tags[i], MPI_COMM_WORLD, &modes[i]);
  MPI_Ssend(send, N, MPI_INT, right, 20, MPI_COMM_WORLD);                 /* 32 B */
  MPI_Rsend(send, N, MPI_INT, right, 22, MPI_COMM_WORLD);                 /* 32 B */
  MPI_Irsend(send, N / 2, MPI_INT, right, 25, MPI_COMM_WORLD, &modes[6]); /* 16 B */
  MPI_Bsend(send, N, MPI_INT, right, 21, MPI_COMM_WORLD);                 /* 32 B */
  MPI_Issend(send, N / 2, MPI_INT, right, 23, MPI_COMM_WORLD, &modes[7]); /* 16 B */
  MPI_Ibsend(send, N / 2, MPI_INT, right, 24, MPI_COMM_WORLD, &modes[8]); /* 16 B */
  MPI_Waitall(9, modes, MPI_STATUSES_IGNORE);
  void* detached;
  int detached_size;
  MPI_Buffer_detach(&detached, &detached_size);

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
