/* One simulated rank for the fault suite (tests/e2e/delivery_faults.py): records exactly N marks
 * through the public C API, SLEEP_US apart, and exits. The rank comes from PMI_RANK/PMI_SIZE, so
 * hundreds of these on one aggregator stand in for a large job without MPI. */
#include <commprof/commprof.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s N [SLEEP_US]\n", argv[0]);
    return 2;
  }
  long n = atol(argv[1]);
  long sleep_us = argc > 2 ? atol(argv[2]) : 0;
  for (long i = 0; i < n; ++i) {
    commprof_mark("tick");
    if (sleep_us > 0) {
      usleep((useconds_t)sleep_us);
    }
  }
  return 0;
}
