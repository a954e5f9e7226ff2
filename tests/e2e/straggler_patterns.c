/* Ground-truth straggler patterns for the e2e cases of straggler_scenarios.py (issue 15: the
 * straggler verdict on the patterns real jobs have). Every rank "computes" by sleeping C ms per
 * iteration; a planted straggler sleeps D ms more, just before the MPI call named below. Sleeping
 * (planted_sleep.h), not spinning, so that 4 or 8 ranks sharing 2 cores do not slow each other
 * and the planted lateness reaches the MPI calls intact. Every pattern starts with one
 * MPI_Barrier(MPI_COMM_WORLD) (after MPI_Init and the communicator splits) and ends with one
 * MPI_Barrier(MPI_COMM_WORLD) before MPI_Finalize. Iteration i counts from 0.
 *
 * --pattern (required):
 *   persistent   rank S sleeps D before every MPI_Allreduce(MPI_COMM_WORLD, 8 doubles)
 *                (with --from A --to B: only in iterations A <= i < B, a transient straggler)
 *   periodic     as persistent, but only when i % K == K - 1 (every K-th iteration)
 *   subcomm      groups of G consecutive world ranks (MPI_Comm_split(world, rank / G, rank), the
 *                "tensor-parallel" groups) each do an MPI_Allreduce on their group every
 *                iteration; rank S sleeps D before each of its group's allreduces; every N-th
 *                iteration (i % N == N - 1; --world-every N, 0 = never) all ranks then do an
 *                MPI_Allreduce(MPI_COMM_WORLD). The "data-parallel" split (rank % G) is created
 *                too (and used once, by the opening barrier on it), so the file has three kinds
 *                of communicator.
 *   halo         a 1-D periodic ring: MPI_Sendrecv to the right / from the left, then to the left
 *                / from the right (8 doubles, eager), then MPI_Allreduce(MPI_COMM_WORLD); rank S
 *                sleeps D before its first Sendrecv. Its two neighbours wait in their Sendrecv,
 *                everyone else in the allreduce; the culprit is S.
 *   nonblocking  rank S sleeps D, then every rank issues MPI_Iallreduce(world) and
 *                MPI_Ibcast(world, root 0) and completes them: MPI_Waitall on even iterations,
 *                MPI_Wait on each (allreduce first) on odd ones.
 *   two          two culprits in disjoint groups of G consecutive ranks (split rank / G; needs
 *                exactly two groups): every iteration each group does an MPI_Allreduce on its
 *                group; S (in one group) sleeps D before it, S2 (in the other) sleeps D2.
 *                No world collective in the loop: the closing world barrier is where the
 *                faster group waits for the slower one.
 *   rooted       MPI_Reduce(MPI_SUM) of --bytes bytes (default 1 MiB: rendezvous, the non-roots
 *                are held in the call until the root takes their data) to root R, followed by
 *                MPI_Barrier(world); rank S sleeps D before the Reduce. S == R: the root late;
 *                S != R: a non-root late.
 *   jitter       balanced, no straggler: every rank sleeps a further uniform 0..J ms (microsecond
 *                steps, rand_r seeded with --seed + 7919 * rank) before each
 *                MPI_Allreduce(world).
 *   chain        point-to-point chain: rank S sleeps D, then MPI_Send (8 B, eager) to S+1; each
 *                of the next H ranks (--hops H) MPI_Recv from its left neighbour and (but the last)
 *                forwards to its right one; then MPI_Barrier(world). The chain's ranks are held in
 *                their Recv, then late to the barrier, where the others wait; the culprit is S.
 *
 * Options (defaults): --iters N (100) --compute-ms C (2) --slow-rank S (1) --slow-ms D (3)
 *   --every K (10) --from A (0) --to B (iters) --group-size G (world size / 2)
 *   --world-every N (10) --slow-rank2 S2 (size - 1) --slow-ms2 D2 (1) --root R (0)
 *   --bytes B (rooted: 1048576) --jitter-ms J (2) --seed X (1) --hops H (1)
 * Prints one line from rank 0 on success; exits 2 on bad options. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planted_sleep.h"

/* Sleeps `us` microseconds (the jitter's finer steps), resuming after signals. */
static void SleepUs(long us) {
  struct timespec t = {us / 1000000L, (us % 1000000L) * 1000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

typedef struct {
  const char* pattern;
  int iters, compute_ms, slow, slow_ms, every, from, to, group_size, world_every, slow2, slow_ms2;
  int root, jitter_ms, seed, hops;
  long bytes;
} Options;

static int Planted(const Options* o, int i) {
  if (strcmp(o->pattern, "periodic") == 0) return i % o->every == o->every - 1;
  return i >= o->from && i < o->to;
}

static void Fail(int rank, const char* what) {
  if (rank == 0) fprintf(stderr, "straggler_patterns: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options o = {"", 100, 2, 1, 3, 10, 0, -1, size / 2, 10, size - 1, 1, 0, 2, 1, 1, -1};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* k = argv[i];
    const char* v = argv[i + 1];
    if (strcmp(k, "--pattern") == 0)
      o.pattern = v;
    else if (strcmp(k, "--iters") == 0)
      o.iters = atoi(v);
    else if (strcmp(k, "--compute-ms") == 0)
      o.compute_ms = atoi(v);
    else if (strcmp(k, "--slow-rank") == 0)
      o.slow = atoi(v);
    else if (strcmp(k, "--slow-ms") == 0)
      o.slow_ms = atoi(v);
    else if (strcmp(k, "--every") == 0)
      o.every = atoi(v);
    else if (strcmp(k, "--from") == 0)
      o.from = atoi(v);
    else if (strcmp(k, "--to") == 0)
      o.to = atoi(v);
    else if (strcmp(k, "--group-size") == 0)
      o.group_size = atoi(v);
    else if (strcmp(k, "--world-every") == 0)
      o.world_every = atoi(v);
    else if (strcmp(k, "--slow-rank2") == 0)
      o.slow2 = atoi(v);
    else if (strcmp(k, "--slow-ms2") == 0)
      o.slow_ms2 = atoi(v);
    else if (strcmp(k, "--root") == 0)
      o.root = atoi(v);
    else if (strcmp(k, "--bytes") == 0)
      o.bytes = atol(v);
    else if (strcmp(k, "--jitter-ms") == 0)
      o.jitter_ms = atoi(v);
    else if (strcmp(k, "--seed") == 0)
      o.seed = atoi(v);
    else if (strcmp(k, "--hops") == 0)
      o.hops = atoi(v);
    else
      Fail(rank, "unknown option");
  }
  if (o.to < 0) o.to = o.iters;
  if (o.bytes < 0) o.bytes = strcmp(o.pattern, "rooted") == 0 ? 1L << 20 : 64;
  if (o.iters <= 0 || o.compute_ms < 0 || o.slow_ms < 0 || o.slow_ms2 < 0 || o.every <= 0 || o.slow < 0 ||
      o.slow >= size || o.slow2 < 0 || o.slow2 >= size || o.root < 0 || o.root >= size || o.group_size <= 0 ||
      size % o.group_size != 0 || o.world_every < 0 || o.jitter_ms < 0 || o.hops <= 0 || o.hops >= size ||
      o.bytes < 8 || o.bytes > (1L << 30))
    Fail(rank, "bad option value");

  /* The groups: "tensor-parallel" (consecutive ranks) and "data-parallel" (strided). */
  MPI_Comm tp = MPI_COMM_NULL, dp = MPI_COMM_NULL;
  int grouped = strcmp(o.pattern, "subcomm") == 0 || strcmp(o.pattern, "two") == 0;
  if (grouped) {
    if (strcmp(o.pattern, "two") == 0 && (size / o.group_size != 2 || o.slow / o.group_size == o.slow2 / o.group_size))
      Fail(rank, "two: needs two groups, one culprit in each");
    MPI_Comm_split(MPI_COMM_WORLD, rank / o.group_size, rank, &tp);
    if (strcmp(o.pattern, "subcomm") == 0) {
      MPI_Comm_split(MPI_COMM_WORLD, rank % o.group_size, rank, &dp);
      MPI_Barrier(dp);
    }
  }

  long n = o.bytes / (long)sizeof(double);
  double* a = calloc((size_t)n, sizeof(double));
  double* b = calloc((size_t)n, sizeof(double));
  double c[8] = {0}, d[8] = {0}, e[8] = {0};
  unsigned jitter_state = (unsigned)(o.seed + 7919 * rank);
  int left = (rank + size - 1) % size, right = (rank + 1) % size;
  MPI_Barrier(MPI_COMM_WORLD);

  for (int i = 0; i < o.iters; ++i) {
    SleepMs(o.compute_ms);
    int late = rank == o.slow && Planted(&o, i);
    c[0] = i + rank;
    if (strcmp(o.pattern, "persistent") == 0 || strcmp(o.pattern, "periodic") == 0) {
      if (late) SleepMs(o.slow_ms);
      MPI_Allreduce(c, d, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(o.pattern, "subcomm") == 0) {
      if (late) SleepMs(o.slow_ms);
      MPI_Allreduce(c, d, 8, MPI_DOUBLE, MPI_SUM, tp);
      if (o.world_every > 0 && i % o.world_every == o.world_every - 1)
        MPI_Allreduce(c, d, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(o.pattern, "halo") == 0) {
      if (late) SleepMs(o.slow_ms);
      MPI_Sendrecv(c, 8, MPI_DOUBLE, right, 1, d, 8, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Sendrecv(c, 8, MPI_DOUBLE, left, 2, e, 8, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Allreduce(c, d, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(o.pattern, "nonblocking") == 0) {
      if (late) SleepMs(o.slow_ms);
      MPI_Request r[2];
      MPI_Iallreduce(c, d, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r[0]);
      MPI_Ibcast(e, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r[1]);
      if (i % 2 == 0) {
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
      } else {
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
        MPI_Wait(&r[1], MPI_STATUS_IGNORE);
      }
    } else if (strcmp(o.pattern, "two") == 0) {
      if (late) SleepMs(o.slow_ms);
      if (rank == o.slow2 && Planted(&o, i)) SleepMs(o.slow_ms2);
      MPI_Allreduce(c, d, 8, MPI_DOUBLE, MPI_SUM, tp);
    } else if (strcmp(o.pattern, "rooted") == 0) {
      if (late) SleepMs(o.slow_ms);
      a[0] = i;
      MPI_Reduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, o.root, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
    } else if (strcmp(o.pattern, "jitter") == 0) {
      if (o.jitter_ms > 0) SleepUs((long)(rand_r(&jitter_state) % (o.jitter_ms * 1000 + 1)));
      MPI_Allreduce(c, d, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(o.pattern, "chain") == 0) {
      int pos = (rank - o.slow + size) % size; /* 0: the culprit; 1..H: the chain */
      if (pos == 0) {
        if (late) SleepMs(o.slow_ms);
        MPI_Send(c, 1, MPI_DOUBLE, right, 3, MPI_COMM_WORLD);
      } else if (pos <= o.hops) {
        MPI_Recv(d, 1, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (pos < o.hops) MPI_Send(d, 1, MPI_DOUBLE, right, 3, MPI_COMM_WORLD);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    } else {
      Fail(rank, "unknown --pattern");
    }
  }

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("straggler_patterns: %s, %d ranks, %d iterations\n", o.pattern, size, o.iters);
  if (tp != MPI_COMM_NULL) MPI_Comm_free(&tp);
  if (dp != MPI_COMM_NULL) MPI_Comm_free(&dp);
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
