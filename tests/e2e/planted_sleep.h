/* The planted lateness of the e2e MPI programs: a sleep (not a spin), so that 4 ranks sharing 2
 * cores do not slow each other and the planted delay reaches the MPI calls intact. */
#ifndef COMMPROF_TESTS_E2E_PLANTED_SLEEP_H
#define COMMPROF_TESTS_E2E_PLANTED_SLEEP_H

#include <time.h>

/* Sleeps `ms` milliseconds, resuming after signals. */
static inline void SleepMs(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

#endif
