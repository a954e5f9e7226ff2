/* Program shapes for `commprof diff`'s noise guard under its default options
 * (tests/e2e/diff_shapes_e2e.py): `--shape S --iters N [--compute-ms C]`, each iteration:
 *   tight    MPI_Allreduce of 8 doubles, then MPI_Bcast of 8 doubles (no compute when C is 0)
 *   subcomm  MPI_Allreduce on the even/odd halves of MPI_COMM_WORLD (MPI_Comm_split), then
 *            MPI_Barrier on MPI_COMM_WORLD
 *   halo     MPI_Sendrecv with both ring neighbours, then MPI_Allreduce
 *   nonblock MPI_Isend/MPI_Irecv with both ring neighbours + MPI_Waitall, then MPI_Iallreduce +
 *            MPI_Wait, then MPI_Bcast
 * with C ms of sleep (not a spin: more ranks than cores) before each iteration's calls.
 * Planted slowdown: COMMPROF_TEST_PLANT=TYPE:MS makes rank 0 sleep MS ms just before each call of
 * collective TYPE (bcast, allreduce, barrier), so the other ranks wait about MS ms inside it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planted_sleep.h"

static char plant_type[32];
static int plant_ms;

/* Rank 0's planted lateness before a call of collective `type`. */
static void Plant(int rank, const char* type) {
  if (rank == 0 && plant_ms > 0 && strcmp(type, plant_type) == 0) {
    SleepMs(plant_ms);
  }
}

int main(int argc, char** argv) {
  const char* shape = "tight";
  int iters = 200, compute_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--shape") == 0) {
      shape = argv[i + 1];
    } else if (strcmp(argv[i], "--iters") == 0) {
      iters = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--compute-ms") == 0) {
      compute_ms = atoi(argv[i + 1]);
    } else {
      fprintf(stderr, "diff_shapes_program: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const char* plant = getenv("COMMPROF_TEST_PLANT");
  if (plant != NULL && strchr(plant, ':') != NULL) {
    size_t n = (size_t)(strchr(plant, ':') - plant);
    if (n >= sizeof plant_type) {
      n = sizeof plant_type - 1;
    }
    memcpy(plant_type, plant, n);
    plant_type[n] = '\0';
    plant_ms = atoi(strchr(plant, ':') + 1);
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  double x[8], y[8], from_left[8], from_right[8];
  for (int k = 0; k < 8; ++k) {
    x[k] = rank + k;
  }
  for (int i = 0; i < iters; ++i) {
    if (compute_ms > 0) {
      SleepMs(compute_ms);
    }
    if (strcmp(shape, "tight") == 0) {
      Plant(rank, "allreduce");
      MPI_Allreduce(x, y, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      Plant(rank, "bcast");
      MPI_Bcast(y, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    } else if (strcmp(shape, "subcomm") == 0) {
      Plant(rank, "allreduce");
      MPI_Allreduce(x, y, 8, MPI_DOUBLE, MPI_SUM, half);
      Plant(rank, "barrier");
      MPI_Barrier(MPI_COMM_WORLD);
    } else if (strcmp(shape, "halo") == 0) {
      MPI_Sendrecv(x, 8, MPI_DOUBLE, right, 1, from_left, 8, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Sendrecv(x, 8, MPI_DOUBLE, left, 2, from_right, 8, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      Plant(rank, "allreduce");
      MPI_Allreduce(x, y, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else if (strcmp(shape, "nonblock") == 0) {
      MPI_Request r[4];
      MPI_Irecv(from_left, 8, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &r[0]);
      MPI_Irecv(from_right, 8, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &r[1]);
      MPI_Isend(x, 8, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &r[2]);
      MPI_Isend(x, 8, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &r[3]);
      MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
      Plant(rank, "allreduce");
      MPI_Request a;
      MPI_Iallreduce(x, y, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &a);
      MPI_Wait(&a, MPI_STATUS_IGNORE);
      Plant(rank, "bcast");
      MPI_Bcast(y, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    } else {
      fprintf(stderr, "diff_shapes_program: unknown shape %s\n", shape);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
