/* A CUDA program on a machine without a GPU (case cuda_no_gpu): linked with the shared CUDA
 * runtime, it asks for devices and memory and prints what CUDA answered, then does one MPI
 * collective. Under `commprof run` its exit code and output must be exactly those of a bare run,
 * each rank must log "GPU tracing unavailable" once, and its MPI events must still be recorded.
 * It also calls the CUDA injection entry point twice, as a driver that initializes twice would:
 * under commprof (libcommprof.so preloaded) each call must return 1 and add no second log line;
 * bare, there is no such symbol and the program counts 1 + 1 itself, so the output is the same.
 * Exit code: 0 whatever CUDA says (the output carries CUDA's answers). */
#define _GNU_SOURCE 1 /* RTLD_DEFAULT */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int count = -1;
  cudaError_t count_rc = cudaGetDeviceCount(&count);
  void* p = NULL;
  cudaError_t malloc_rc = cudaMalloc(&p, 1 << 20);
  if (malloc_rc == cudaSuccess) cudaFree(p);
  typedef int (*InjectFn)(void);
  InjectFn inject = (InjectFn)dlsym(RTLD_DEFAULT, "InitializeInjection");
  int injected = inject != NULL ? inject() + inject() : 2;
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d: cudaGetDeviceCount -> %d (%s), count %d; cudaMalloc -> %d (%s); allreduce %d; injection %d\n", rank,
         (int)count_rc, cudaGetErrorName(count_rc), count, (int)malloc_rc, cudaGetErrorName(malloc_rc), sum, injected);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
