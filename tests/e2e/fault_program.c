// A job that fails on purpose, for the fault suite (tests/e2e/delivery_faults.py).
//
//   fault_program ITERATIONS VICTIM ACTION AT [SLEEP_US]
//
// Every rank runs ITERATIONS MPI_Allreduce calls, sleeping SLEEP_US (default 1000) between them.
// Just before its call number AT (0-based), rank VICTIM does ACTION:
//   none   nothing (every rank completes ITERATIONS calls)
//   segv   raise(SIGSEGV)      abort  abort()      term   raise(SIGTERM)
//   kill   raise(SIGKILL)      exit5  exit(5) without MPI_Finalize
//   fault  writes through a null pointer (a real fault, not a sent signal)
//   late   sleeps 300 ms and goes on (with AT = ITERATIONS: after its last call, before MPI_Finalize)
// The other ranks then block in call AT and are torn down by mpirun. So every rank has completed
// exactly AT calls (ITERATIONS with `none`): the ground truth the suite checks the file against.
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void act(const char* action) {
  if (strcmp(action, "segv") == 0) {
    raise(SIGSEGV);
  } else if (strcmp(action, "abort") == 0) {
    abort();
  } else if (strcmp(action, "term") == 0) {
    raise(SIGTERM);
  } else if (strcmp(action, "kill") == 0) {
    raise(SIGKILL);
  } else if (strcmp(action, "exit5") == 0) {
    exit(5);
  } else if (strcmp(action, "late") == 0) {
    usleep(300000);
  } else if (strcmp(action, "fault") == 0) {
    volatile int* volatile p = NULL;
    *p = 1;
  }
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s ITERATIONS VICTIM ACTION AT [SLEEP_US]\n", argv[0]);
    return 2;
  }
  int iterations = atoi(argv[1]);
  int victim = atoi(argv[2]);
  const char* action = argv[3];
  int at = atoi(argv[4]);
  int sleep_us = argc > 5 ? atoi(argv[5]) : 1000;
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 0; i < iterations; ++i) {
    if (i == at && rank == victim) {
      act(action);
    }
    double x = rank + i, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (sleep_us > 0) {
      usleep((useconds_t)sleep_us);
    }
  }
  if (at == iterations && rank == victim) {
    act(action);
  }
  MPI_Finalize();
  return 0;
}
