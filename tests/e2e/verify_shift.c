/* Independent check of the straggler verdict (e2e case verify_independent): the straggler changes
 * during the run. Run with 4 ranks. Only blocking MPI_Allreduce (8 B) on MPI_COMM_WORLD, no other
 * collective, so the run has exactly the planted instances. The schedule is a list of
 * RANK:COUNT: for COUNT consecutive iterations RANK sleeps D ms before the Allreduce (the others
 * enter at once), so it is the last to arrive by ~D in each of them.
 * With --times PREFIX each rank writes PREFIX.<rank>: per Allreduce, "w START END", its
 * CLOCK_MONOTONIC just before and after the call (the application's own truth).
 * Usage: verify_shift --sleep-ms D --schedule 1:30,3:20 [--times PREFIX] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planted_sleep.h"

static long long NowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int d = 10;
  const char* schedule = "1:30,3:20";
  const char* times = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--sleep-ms") == 0)
      d = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--schedule") == 0)
      schedule = argv[i + 1];
    else if (strcmp(argv[i], "--times") == 0)
      times = argv[i + 1];
  }
  double x = rank, y = 0;
  FILE* out = NULL;
  if (times != NULL) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", times, rank);
    out = fopen(path, "w");
  }
  const char* p = schedule;
  while (*p) {
    char* end;
    long late = strtol(p, &end, 10);
    if (*end != ':') {
      if (rank == 0) fprintf(stderr, "verify_shift: bad --schedule %s\n", schedule);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long count = strtol(end + 1, &end, 10);
    for (long k = 0; k < count; ++k) {
      if (rank == late) SleepMs(d);
      long long t0 = NowNs();
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      long long t1 = NowNs();
      if (out != NULL) fprintf(out, "w %lld %lld\n", t0, t1);
    }
    p = (*end == ',') ? end + 1 : end;
  }
  if (out != NULL) fclose(out);
  MPI_Finalize();
  return 0;
}
