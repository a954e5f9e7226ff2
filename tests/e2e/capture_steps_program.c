/* A training loop that marks its steps one way (the mode) and does a known amount of MPI per step,
 * for tests/e2e/capture_windows.py.
 *
 * Usage: capture_steps_program MODE STEPS CALLS SLEEP_MS [PAUSED]
 * Each step: CALLS MPI_Allreduce on the step communicator, then PAUSED more inside
 * MPI_Pcontrol(0) ... MPI_Pcontrol(1) (recorded never), then SLEEP_MS of sleep. Modes, by what
 * marks the step:
 *   c_api       commprof_step(s) at the step's start
 *   pcontrol    MPI_Pcontrol(2) at the step's start (the collector numbers them 0, 1, ...)
 *   nvtx        an NVTX range "ProfilerStep#s" around the step (torch's name)
 *   nvtx_named  an NVTX range "train_step" around the step (commprof run --step-range train_step)
 *   every_world nothing: the allreduces are on MPI_COMM_WORLD (commprof run --step-every CALLS+PAUSED)
 *   every_named nothing: the allreduces are on a duplicate named "train" with MPI_Comm_set_name,
 *               and one MPI_Barrier on MPI_COMM_WORLD per step must not count
 *               (commprof run --step-every CALLS+PAUSED:train)
 * No other collective touches the step communicator, so collective s * (CALLS + PAUSED) of it is
 * the first of step s on every rank. */
#include <commprof/commprof.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef CAPTURE_HAVE_NVTX3
#include <nvtx3/nvToolsExt.h>
#endif

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s MODE STEPS CALLS SLEEP_MS [PAUSED]\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  const int steps = atoi(argv[2]);
  const int calls = atoi(argv[3]);
  const int pause_ms = atoi(argv[4]);
  const int paused = argc > 5 ? atoi(argv[5]) : 0;
  const int nvtx = strncmp(mode, "nvtx", 4) == 0;
#ifndef CAPTURE_HAVE_NVTX3
  if (nvtx) {
    fprintf(stderr, "%s: built without the nvtx3 headers\n", argv[0]);
    return 77;
  }
#endif
  MPI_Init(&argc, &argv);
  MPI_Comm comm = MPI_COMM_WORLD;
  if (strcmp(mode, "every_named") == 0) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_name(comm, "train");
  }
  int in = 1, out = 0;
  for (int s = 0; s < steps; ++s) {
    if (strcmp(mode, "c_api") == 0) {
      commprof_step((uint64_t)s);
    } else if (strcmp(mode, "pcontrol") == 0) {
      MPI_Pcontrol(2);
    }
#ifdef CAPTURE_HAVE_NVTX3
    if (strcmp(mode, "nvtx") == 0) {
      char name[32];
      snprintf(name, sizeof name, "ProfilerStep#%d", s);
      nvtxRangePushA(name);
    } else if (strcmp(mode, "nvtx_named") == 0) {
      nvtxRangePushA("train_step");
    }
#endif
    for (int c = 0; c < calls; ++c) {
      MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, comm);
    }
    if (paused > 0) {
      MPI_Pcontrol(0);
      for (int c = 0; c < paused; ++c) {
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, comm);
      }
      MPI_Pcontrol(1);
    }
    if (comm != MPI_COMM_WORLD) {
      MPI_Barrier(MPI_COMM_WORLD);
    }
    sleep_ms(pause_ms);
#ifdef CAPTURE_HAVE_NVTX3
    if (nvtx) {
      nvtxRangePop();
    }
#endif
  }
  if (comm != MPI_COMM_WORLD) {
    MPI_Comm_free(&comm);
  }
  MPI_Finalize();
  return 0;
}
