// cuda_nccl_allreduce — demo / check workload for commprof's GPU tracing (docs/cupti.md).
//
// MPI + NCCL, one GPU per rank (device = local rank % device count). Each step: commprof_step(i),
// a compute kernel that spins on the GPU for --compute-ms (the planted straggler --slow-rank spins
// --delay-ms longer), then ncclAllReduce of --count floats on the same stream, then a stream
// synchronize. Before the steps: device allocations, a memset and a host-to-device copy; after
// them: a device-to-host copy of the result, which is checked, and the frees. So a profile holds
// every GPU record kind commprof stores: kernels (10), NCCL kernels (11), memcpy (12), memset (13),
// allocations and frees (14/15), synchronization (20) and launch calls (24).
//
//   cuda_nccl_allreduce [--steps N] [--count ELEMS] [--compute-ms MS] [--slow-rank R] [--delay-ms D]
//
// Exit codes: 0 ok; 2 bad command line; 3 no usable GPU (message on stderr, every rank agrees
// before NCCL starts, so none hangs); 4 a CUDA or NCCL call failed; 5 wrong allreduce result.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commprof/commprof.h"

namespace {

struct Options {
  int steps = 20;
  size_t count = 1 << 20;
  double compute_ms = 2.0;
  int slow_rank = -1;
  double delay_ms = 0.0;
};

bool ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    char* end = nullptr;
    if (a == "--steps") {
      o.steps = static_cast<int>(std::strtol(v, &end, 10));
    } else if (a == "--count") {
      o.count = static_cast<size_t>(std::strtoull(v, &end, 10));
    } else if (a == "--compute-ms") {
      o.compute_ms = std::strtod(v, &end);
    } else if (a == "--slow-rank") {
      o.slow_rank = static_cast<int>(std::strtol(v, &end, 10));
    } else if (a == "--delay-ms") {
      o.delay_ms = std::strtod(v, &end);
    } else {
      return false;
    }
    if (end == nullptr || *end != '\0') return false;
  }
  return o.steps > 0 && o.count > 0 && o.compute_ms >= 0 && o.delay_ms >= 0;
}

// Spins for `ns` of GPU time (the %globaltimer register, ns), then scales the buffer so the work is
// not optimised away. One block: the kernel's length is the planted compute time.
__global__ void compute_kernel(float* data, size_t n, unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) data[i] = data[i] * 1.0f;
}

int Fail(int rank, const char* what, const char* detail, int code) {
  std::fprintf(stderr, "cuda_nccl_allreduce: rank %d: %s: %s\n", rank, what, detail);
  return code;
}

#define CUDA_OK(call)                                                           \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) return Fail(rank, #call, cudaGetErrorString(e_), 4); \
  } while (0)
#define NCCL_OK(call)                                                           \
  do {                                                                          \
    ncclResult_t r_ = (call);                                                   \
    if (r_ != ncclSuccess) return Fail(rank, #call, ncclGetErrorString(r_), 4); \
  } while (0)

int LocalRank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

int Run(int rank, int size, const Options& o) {
  // Every rank must agree there is a GPU before NCCL init, or the others would wait forever.
  int devices = 0;
  cudaError_t dc = cudaGetDeviceCount(&devices);
  int ok = dc == cudaSuccess && devices > 0 ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok) return Fail(rank, "no CUDA device", cudaGetErrorString(dc), 3);
  if (!all_ok) return Fail(rank, "no CUDA device", "another rank has none", 3);
  int device = LocalRank() % devices;
  CUDA_OK(cudaSetDevice(device));

  ncclUniqueId id;
  if (rank == 0) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, size, id, rank));

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  float* data = nullptr;
  float* scratch = nullptr;
  CUDA_OK(cudaMalloc(&data, o.count * sizeof(float)));
  CUDA_OK(cudaMalloc(&scratch, o.count * sizeof(float)));
  CUDA_OK(cudaMemsetAsync(scratch, 0, o.count * sizeof(float), stream));
  std::vector<float> host(o.count, 1.0f);
  CUDA_OK(cudaMemcpyAsync(data, host.data(), o.count * sizeof(float), cudaMemcpyHostToDevice, stream));
  CUDA_OK(cudaStreamSynchronize(stream));

  double ms = o.compute_ms + (rank == o.slow_rank ? o.delay_ms : 0.0);
  auto spin_ns = static_cast<unsigned long long>(ms * 1e6);
  for (int step = 0; step < o.steps; ++step) {
    commprof_step(static_cast<uint64_t>(step));
    compute_kernel<<<1, 256, 0, stream>>>(data, o.count, spin_ns);
    CUDA_OK(cudaGetLastError());
    // In place, so the values stay 1.0 * size^steps: checkable; sum of ones averaged back.
    NCCL_OK(ncclAllReduce(data, data, o.count, ncclFloat, ncclAvg, comm, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
  }
  commprof_step(static_cast<uint64_t>(o.steps));  // the end of the last step

  CUDA_OK(cudaMemcpy(host.data(), data, o.count * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t i = 0; i < o.count; ++i) bad += host[i] != 1.0f;
  CUDA_OK(cudaFree(scratch));
  CUDA_OK(cudaFree(data));
  CUDA_OK(cudaStreamDestroy(stream));
  NCCL_OK(ncclCommDestroy(comm));
  if (bad != 0) {
    std::fprintf(stderr, "cuda_nccl_allreduce: rank %d: %d of %zu elements differ from 1.0\n", rank, bad, o.count);
    return 5;
  }
  std::printf(
      "cuda_nccl_allreduce: rank %d of %d on device %d: %d steps of %.3f ms compute + allreduce of %zu floats ok\n",
      rank, size, device, o.steps, ms, o.count);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: cuda_nccl_allreduce [--steps N] [--count ELEMS] [--compute-ms MS] [--slow-rank R] "
                 "[--delay-ms D]\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = Run(rank, size, o);
  MPI_Finalize();
  return rc;
}
