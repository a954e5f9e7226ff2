/* Planted point-to-point wait states for the p2p_late e2e case (docs/metrics.md §5). Run with
 * exactly 4 ranks. The lateness is made by sleeping, so ranks sharing cores do not distort it:
 *   Late Sender:   rank 1 sleeps S ms before each MPI_Send (8 B) to rank 0, which waits in
 *                  MPI_Recv: about S ms per message charged to rank 0;
 *   Late Receiver: rank 3 sleeps S ms before posting each MPI_Recv of a large message (4 MiB by
 *                  default, far above Open MPI's eager limits, so the send is a rendezvous) that
 *                  rank 2 is already sending with MPI_Send: about S ms per message charged to rank 2.
 * Then one exchange through an MPI_Sendrecv (docs/file-format.md, Sendrecv: two events): rank 2
 * sends 4 B (tag 5) that rank 3 takes in the receive half of its MPI_Sendrecv, whose send half
 * (tag 6) rank 2 gets with MPI_Recv: two matched messages.
 * Usage: mpi_p2p_late [--iters N] [--sleep-ms S] [--bytes B]   (defaults 10, 20, 4194304) */
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
  int iters = 10, sleep_ms = 20;
  long bytes = 4L << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--iters") == 0)
      iters = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--sleep-ms") == 0)
      sleep_ms = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--bytes") == 0)
      bytes = atol(argv[i + 1]);
  }
  if (size != 4 || iters <= 0 || sleep_ms < 0 || bytes <= 0 || bytes > (1L << 30)) {
    if (rank == 0)
      fprintf(stderr, "mpi_p2p_late: run with 4 ranks; --iters > 0, --sleep-ms >= 0, 0 < --bytes <= 1 GiB\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char* big = calloc((size_t)bytes, 1);
  double small[1] = {0};
  int word = rank;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int k = 0; k < iters; ++k) {
    if (rank == 0) {
      MPI_Recv(small, 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      SleepMs(sleep_ms);
      small[0] = k;
      MPI_Send(small, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
    } else if (rank == 2) {
      MPI_Send(big, (int)bytes, MPI_BYTE, 3, 2, MPI_COMM_WORLD);
    } else {
      SleepMs(sleep_ms);
      MPI_Recv(big, (int)bytes, MPI_BYTE, 2, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 2) {
    MPI_Send(&word, 1, MPI_INT, 3, 5, MPI_COMM_WORLD); /* eager: returns before it is received */
    MPI_Recv(&word, 1, MPI_INT, 3, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (rank == 3) {
    int got = 0;
    MPI_Sendrecv(&word, 1, MPI_INT, 2, 6, &got, 1, MPI_INT, 2, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  free(big);
  MPI_Finalize();
  return 0;
}
