/* Independent check of the cross-rank analysis (e2e case verify_independent): planted,
 * sleep-based lateness in rooted collectives, a sub-communicator and large messages. Run with
 * exactly 4 ranks. Each planted iteration is: MPI_Barrier(world), the late rank sleeps D ms, the
 * collective. Sleeping (not spinning) keeps 4 ranks on 2 cores from distorting the lateness.
 *
 * Phases, in order (K iterations each; D = --sleep-ms):
 *   1 Bcast, root 1, the ROOT late           Late Broadcast: ranks 0,2,3 wait ~D, the root 0
 *   2 Bcast, root 1, non-root 3 late         Late Broadcast: nobody waits (root was on time)
 *   3 Reduce, root 2, non-root 0 late        Early Reduce: root 2 waits ~D, the others exactly 0
 *   4 Reduce, root 2, the ROOT late          Early Reduce: nobody waits
 *   5 Gather, root 0, non-root 3 late        Early Reduce: root 0 waits ~D, the others 0
 *   6 Scatter, root 3, the ROOT late         Late Broadcast: ranks 0,1,2 wait ~D, the root 0
 *   7 Scan, rank 1 late                      rank i waits max(a_0..a_i) - a_i: 0,0,~D,~D
 *   8 sub-communicators: MPI_Comm_split(world, rank % 2, -rank), so {0,2} has local ranks
 *     2->0, 0->1 and {1,3} has 3->0, 1->1; per iteration (no barrier):
 *       Allreduce(sub): world 2 sleeps D first (even), world 1 sleeps 2D first (odd)
 *       Allreduce(world, 8 B)
 *       Bcast(sub, root local 0 = world 2 / world 3), the root sleeps D first
 *   9 large: Barrier, Allreduce 8 MiB (world); Barrier, Allgather 8 MiB total; Barrier,
 *     Bcast 8 MiB root 0. No planted lateness: transfer time and bandwidth.
 *  10 Gatherv, root 3, non-root 1 late (2 doubles from each: the root records 64 B, the others
 *     their own 16 B)                         Early Reduce: root 3 waits ~D, the others 0
 *  11 Scatterv, root 2, the ROOT late (2 doubles to each: root 64 B, others 16 B)
 *                                             Late Broadcast: ranks 0,1,3 wait ~D, the root 0
 *  12 a 3-rank communicator, MPI_Comm_split(world, rank == 3 ? MPI_UNDEFINED : 0, -rank): local
 *     ranks are world 2->0, 1->1, 0->2 (reversed). Per iteration: Barrier(world), world rank 1
 *     sleeps D, Scan(sub3) on ranks 0-2: local rank i waits max(a_0..a_i) - a_i, so world 2
 *     (local 0) waits 0, world 1 (local 1, late) 0, world 0 (local 2) ~D. (In world order world
 *     0 would wait 0 and world 2 ~D instead.)
 * The application's own truth: with --times PREFIX each rank writes PREFIX.<rank>, one line per
 * collective call in call order, "w|s START END": the communicator (world or sub) and
 * CLOCK_MONOTONIC (shared by the ranks of one host) just before and just after the call.
 * Usage: verify_collectives [--iters K] [--sleep-ms D] [--large-iters L] [--times PREFIX]
 *        (defaults 6, 20, 4, none) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planted_sleep.h"

enum { kMaxCalls = 4096 };
static struct {
  char comm;
  long long start, end;
} calls[kMaxCalls];
static int ncalls;

static long long NowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Runs one collective call and records the application's view of its entry and exit. */
#define TIMED(c, call)              \
  do {                              \
    long long start_ = NowNs();     \
    call;                           \
    if (ncalls < kMaxCalls) {       \
      calls[ncalls].comm = (c);     \
      calls[ncalls].start = start_; \
      calls[ncalls].end = NowNs();  \
      ++ncalls;                     \
    }                               \
  } while (0)

static void WriteTimes(const char* prefix, int rank) {
  if (prefix == NULL) return;
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", prefix, rank);
  FILE* f = fopen(path, "w");
  if (f == NULL) return;
  for (int i = 0; i < ncalls; ++i) fprintf(f, "%c %lld %lld\n", calls[i].comm, calls[i].start, calls[i].end);
  fclose(f);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = 6, d = 20, large_iters = 4;
  const char* times = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--iters") == 0)
      iters = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--sleep-ms") == 0)
      d = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--large-iters") == 0)
      large_iters = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--times") == 0)
      times = argv[i + 1];
  }
  if (size != 4 || iters <= 0 || d < 0 || large_iters < 0) {
    if (rank == 0) fprintf(stderr, "verify_collectives: 4 ranks; --iters > 0, --sleep-ms >= 0\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double v[4] = {1, 2, 3, 4}, out[16];
  int k;
#define PLANTED(late_rank, call)             \
  for (k = 0; k < iters; ++k) {              \
    TIMED('w', MPI_Barrier(MPI_COMM_WORLD)); \
    if (rank == (late_rank)) SleepMs(d);     \
    TIMED('w', call);                        \
  }
  PLANTED(1, MPI_Bcast(v, 4, MPI_DOUBLE, 1, MPI_COMM_WORLD));
  PLANTED(3, MPI_Bcast(v, 4, MPI_DOUBLE, 1, MPI_COMM_WORLD));
  PLANTED(0, MPI_Reduce(v, out, 4, MPI_DOUBLE, MPI_SUM, 2, MPI_COMM_WORLD));
  PLANTED(2, MPI_Reduce(v, out, 4, MPI_DOUBLE, MPI_SUM, 2, MPI_COMM_WORLD));
  PLANTED(3, MPI_Gather(v, 2, MPI_DOUBLE, out, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  PLANTED(3, MPI_Scatter(out, 2, MPI_DOUBLE, v, 2, MPI_DOUBLE, 3, MPI_COMM_WORLD));
  PLANTED(1, MPI_Scan(v, out, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));

  MPI_Comm sub;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &sub);
  for (k = 0; k < iters; ++k) {
    if (rank == 2) SleepMs(d);
    if (rank == 1) SleepMs(2 * d);
    TIMED('s', MPI_Allreduce(v, out, 1, MPI_DOUBLE, MPI_SUM, sub));
    TIMED('w', MPI_Allreduce(v, out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    if (rank == 2 || rank == 3) SleepMs(d);
    TIMED('s', MPI_Bcast(v, 4, MPI_DOUBLE, 0, sub));
  }
  MPI_Comm_free(&sub);

  const int big = 8 << 20; /* bytes */
  char* a = malloc(big);
  char* b = malloc(big);
  memset(a, 1, big);
  for (k = 0; k < large_iters; ++k) {
    TIMED('w', MPI_Barrier(MPI_COMM_WORLD));
    TIMED('w', MPI_Allreduce(a, b, big / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  }
  for (k = 0; k < large_iters; ++k) {
    TIMED('w', MPI_Barrier(MPI_COMM_WORLD));
    TIMED('w', MPI_Allgather(a, big / 4, MPI_BYTE, b, big / 4, MPI_BYTE, MPI_COMM_WORLD));
  }
  for (k = 0; k < large_iters; ++k) {
    TIMED('w', MPI_Barrier(MPI_COMM_WORLD));
    TIMED('w', MPI_Bcast(a, big, MPI_BYTE, 0, MPI_COMM_WORLD));
  }
  int counts[4] = {2, 2, 2, 2}, displs[4] = {0, 2, 4, 6};
  PLANTED(1, MPI_Gatherv(v, 2, MPI_DOUBLE, out, counts, displs, MPI_DOUBLE, 3, MPI_COMM_WORLD));
  PLANTED(2, MPI_Scatterv(out, counts, displs, MPI_DOUBLE, v, 2, MPI_DOUBLE, 2, MPI_COMM_WORLD));
  MPI_Comm sub3;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 3 ? MPI_UNDEFINED : 0, -rank, &sub3);
  for (k = 0; k < iters; ++k) {
    TIMED('w', MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1) SleepMs(d);
    if (rank != 3) TIMED('s', MPI_Scan(v, out, 4, MPI_DOUBLE, MPI_SUM, sub3));
  }
  if (sub3 != MPI_COMM_NULL) MPI_Comm_free(&sub3);
  free(a);
  free(b);
  WriteTimes(times, rank);
  MPI_Finalize();
  return 0;
}
