/* Planted hangs for the hang watchdog's end-to-end tests (hang_e2e.py, docs/hangs.md). The mode
 * and the planted rank come from argv; every other rank behaves. Each hang is one the Flight
 * Recorder's categories name, so the test knows the truth: which rank, which call, which kind.
 *
 *   hang_program MODE [R [K]]      (R: the planted rank, default 2; K: the call number, default 3)
 *   skip-allreduce R K   rank R skips the K-th allreduce (#K from 0) and goes on to the barrier
 *   skip-two R K         as skip-allreduce, for ranks R and R+3 both
 *   bcast-root R K       rank R's K-th bcast (8 MiB) names root 1 (2 if R is 1), the others root 0
 *   allreduce-bytes R K  rank R's K-th allreduce (8 MiB) has 2x the count (a size mismatch)
 *   recv-forever R       rank R waits in MPI_Recv from rank 0 for a tag never sent; the others
 *                        go on into a barrier
 *   skip-split R K       after K allreduces rank R skips an MPI_Comm_split (collective over the
 *                        world) and calls the barrier after it; the others are in the split
 *   exit-early R K       rank R finalizes and exits after K allreduces; the others go on
 *   subcomm R K          world split in halves; rank R skips the K-th allreduce of its half and
 *                        sleeps; its partner waits in that allreduce; the other half finishes its
 *                        own allreduces and finalizes (no world collective is ever stuck)
 *   subcomm-cycle R K    as subcomm, but rank R and the other half go on to a world barrier: R's
 *                        partner, still in the half's allreduce, never enters it. Two waits that
 *                        close a cycle: from the state alone "R skipped one" and "its partner
 *                        called one too many" look the same, so both are named
 *   tp-dp R K            a 2-D grid (even size): tensor-parallel pairs {2i, 2i+1}, data-parallel
 *                        groups of equal rank parity; each step one TP then one DP allreduce. At
 *                        step K rank R stops computing (in no call): its TP partner waits for it,
 *                        and so the partner never enters its DP allreduce (held up, not the cause)
 *   halo R K             a periodic 1-D halo exchange (Irecv/Isend both neighbours, Waitall);
 *                        at step K rank R stops computing: its neighbours wait for it, the
 *                        others for them (point-to-point only, no collective)
 *   nonblocking R K      rank R never posts its K-th Iallreduce; the others wait for theirs
 *   sendrecv R           rank R's Sendrecv partner (R+1) calls a barrier instead
 *   none S               healthy: allreduces, S seconds of computation (no MPI), allreduces
 *   fast N               healthy: N small allreduces, back to back
 *
 * A planted rank that has nothing left to do sleeps (not in MPI) until it is killed: the hang
 * must come from the others' calls, and the aggregator's abort ends the job. Each rank prints
 * "hang_program: rank N planted" (stdout, flushed) where the planted fault happens, so a test that
 * ends the job by a signal knows the hang is in place. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void Planted(int rank) {
  printf("hang_program: rank %d planted\n", rank);
  fflush(stdout);
}

static void Allreduces(int n, MPI_Comm comm) {
  for (int i = 0; i < n; ++i) {
    double x = 1, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comm);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "none";
  int r = argc > 2 ? atoi(argv[2]) : 2;
  int k = argc > 3 ? atoi(argv[3]) : 3;
  double buf[64] = {0}, out[64] = {0};

  if (strcmp(mode, "skip-allreduce") == 0 || strcmp(mode, "skip-two") == 0) {
    const int skips = rank == r || (strcmp(mode, "skip-two") == 0 && rank == r + 3);
    for (int i = 0; i <= k; ++i) {
      if (skips && i == k) {
        Planted(rank);
        continue;
      }
      MPI_Allreduce(buf, out, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "bcast-root") == 0) {
    /* 8 MiB: past every eager limit, so a send waits for its receive and the wrong tree blocks
     * (a small bcast with a wrong root can complete, silently wrong). */
    const int n = 1 << 20;
    double* big = calloc(n, sizeof(double));
    for (int i = 0; i <= k; ++i) {
      int root = (rank == r && i == k) ? (r == 1 ? 2 : 1) : 0;
      if (rank == r && i == k) Planted(rank);
      MPI_Bcast(big, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
    }
    free(big);
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "allreduce-bytes") == 0) {
    /* Large enough for the segmented algorithms: the planted rank expects more pieces than the
     * others send. */
    const int n = 1 << 20;
    double* in = calloc(2 * (size_t)n, sizeof(double));
    double* res = calloc(2 * (size_t)n, sizeof(double));
    for (int i = 0; i <= k; ++i) {
      int count = (rank == r && i == k) ? 2 * n : n;
      if (rank == r && i == k) Planted(rank);
      MPI_Allreduce(in, res, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    free(in);
    free(res);
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "recv-forever") == 0) {
    Allreduces(k, MPI_COMM_WORLD);
    if (rank == r) {
      Planted(rank);
      MPI_Recv(buf, 1, MPI_DOUBLE, 0, 4242, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "skip-split") == 0) {
    Allreduces(k, MPI_COMM_WORLD);
    if (rank == r) {
      Planted(rank);
    } else {
      MPI_Comm half;
      MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
      MPI_Comm_free(&half);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "exit-early") == 0) {
    if (rank == r) {
      Allreduces(k, MPI_COMM_WORLD);
      Planted(rank);
      MPI_Finalize();
      return 0;
    }
    Allreduces(k + 5, MPI_COMM_WORLD);
  } else if (strcmp(mode, "subcomm") == 0 || strcmp(mode, "subcomm-cycle") == 0) {
    const int cycle = strcmp(mode, "subcomm-cycle") == 0;
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2 ? 0 : 1, rank, &half);
    for (int i = 0; i <= k; ++i) {
      if (rank == r && i == k) {
        Planted(rank);
        if (!cycle) {
          for (;;) sleep(1); /* not in MPI: its partner waits in the half's allreduce */
        }
        continue;
      }
      MPI_Allreduce(buf, out, 4, MPI_DOUBLE, MPI_SUM, half);
    }
    if (cycle) MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&half);
  } else if (strcmp(mode, "tp-dp") == 0) {
    MPI_Comm tp, dp;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &tp);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &dp);
    for (int i = 0; i <= k; ++i) {
      if (rank == r && i == k) {
        Planted(rank);
        for (;;) sleep(1);
      }
      MPI_Allreduce(buf, out, 4, MPI_DOUBLE, MPI_SUM, tp);
      MPI_Allreduce(buf, out, 4, MPI_DOUBLE, MPI_SUM, dp);
    }
    MPI_Comm_free(&tp);
    MPI_Comm_free(&dp);
  } else if (strcmp(mode, "halo") == 0) {
    const int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int i = 0; i <= k + 1000; ++i) {
      if (rank == r && i == k) {
        Planted(rank);
        for (;;) sleep(1);
      }
      MPI_Request q[4];
      MPI_Irecv(out, 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &q[0]);
      MPI_Irecv(out + 1, 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &q[1]);
      MPI_Isend(buf, 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &q[2]);
      MPI_Isend(buf + 1, 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &q[3]);
      MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
    }
  } else if (strcmp(mode, "nonblocking") == 0) {
    for (int i = 0; i <= k; ++i) {
      if (rank == r && i == k) {
        Planted(rank);
        continue;
      }
      MPI_Request req;
      MPI_Iallreduce(buf, out, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (rank == r) {
      for (;;) sleep(1); /* not in MPI: the others wait for it */
    }
  } else if (strcmp(mode, "sendrecv") == 0) {
    Allreduces(k, MPI_COMM_WORLD);
    if (rank == r) {
      Planted(rank);
      MPI_Sendrecv(buf, 4, MPI_DOUBLE, (r + 1) % size, 7, out, 4, MPI_DOUBLE, (r + 1) % size, 7, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "none") == 0) {
    int quiet_s = argc > 2 ? atoi(argv[2]) : 4;
    Allreduces(20, MPI_COMM_WORLD);
    /* Computation longer than the hang timeout, in MPI on no rank: a quiet phase, not a hang. */
    double until = MPI_Wtime() + quiet_s;
    volatile double acc = 0;
    while (MPI_Wtime() < until) acc += 1e-9;
    Allreduces(20, MPI_COMM_WORLD);
  } else if (strcmp(mode, "fast") == 0) {
    Allreduces(argc > 2 ? atoi(argv[2]) : 1000, MPI_COMM_WORLD);
  } else {
    if (rank == 0) fprintf(stderr, "hang_program: unknown mode '%s'\n", mode);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}
