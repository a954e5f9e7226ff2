/* An MPI program that uses NVTX through the real nvtx3 headers (CUDA toolkit, header-only): nested
 * push/pop ranges, a start/end range ended on another thread, marks, a domain with a registered
 * string, a named thread and a second thread with its own ranges. Each rank writes its own
 * measured bounds (CLOCK_MONOTONIC, the collector's clock) to <dir>/bounds.<rank> as
 * "begin end", so the test can check every recorded time against them. */
#include <mpi.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_us(uint64_t us) {
  uint64_t end = now_ns() + us * 1000;
  while (now_ns() < end) {
  }
}

static void* ender(void* arg) {
  nvtxRangeEnd(*(nvtxRangeId_t*)arg);
  return NULL;
}

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < 4; ++i) {
    nvtxRangePushA("worker");
    spin_us(50);
    nvtxRangePop();
  }
  return NULL;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const uint64_t begin = now_ns();

  nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "nvtx-main");
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("outer");
    spin_us(100);
    nvtxRangePushA("inner");
    spin_us(200);
    nvtxRangePop();
    nvtxMarkA("checkpoint");
    nvtxRangePop();
  }

  nvtxRangeId_t crossing = nvtxRangeStartA("crossing");
  spin_us(100);
  pthread_t t;
  pthread_create(&t, NULL, ender, &crossing);
  pthread_join(t, NULL);

  nvtxDomainHandle_t dom = nvtxDomainCreateA("app-domain");
  nvtxEventAttributes_t a = {0};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = nvtxDomainRegisterStringA(dom, "registered-name");
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xFF112233u;
  a.category = 5;
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = 1000u + (uint64_t)rank;
  nvtxDomainRangePushEx(dom, &a);
  spin_us(100);
  nvtxDomainRangePop(dom);

  pthread_t w;
  pthread_create(&w, NULL, worker, NULL);
  pthread_join(w, NULL);

  const uint64_t end = now_ns();
  MPI_Barrier(MPI_COMM_WORLD);
  if (argc > 1) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/bounds.%d", argv[1], rank);
    FILE* f = fopen(path, "w");
    if (f != NULL) {
      fprintf(f, "%llu %llu\n", (unsigned long long)begin, (unsigned long long)end);
      fclose(f);
    }
  }
  MPI_Finalize();
  return 0;
}
