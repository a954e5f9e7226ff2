/* A rank that makes a known number of events and exits with a chosen code:
 * output_faults_program ITERATIONS EXIT_CODE [PAUSE_MS]. Each iteration is one MPI_Allreduce, so
 * a rank records ITERATIONS + 2 events (with MPI_Init and MPI_Finalize); with PAUSE_MS it sleeps
 * that long after every 2000 iterations, so that the aggregator flushes in between. */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int iterations = argc > 1 ? atoi(argv[1]) : 100;
  int code = argc > 2 ? atoi(argv[2]) : 0;
  long pause_ms = argc > 3 ? atol(argv[3]) : 0;
  int one = 1, sum = 0;
  for (int i = 0; i < iterations; ++i) {
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (pause_ms > 0 && (i + 1) % 2000 == 0) {
      struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
  MPI_Finalize();
  return code;
}
