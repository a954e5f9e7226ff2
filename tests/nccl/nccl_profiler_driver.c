/* nccl_profiler_driver: an MPI program that behaves towards an NCCL profiler plugin the way NCCL
 * 2.28 does (v5 and v4 tables) or NCCL 2.24/2.25 does (v2 table), without NCCL and without a GPU.
 * Every fact about NCCL it follows is listed in docs/nccl-plugin.md (cited as §N); see
 * tests/nccl/README.md.
 *
 * Per rank: load the plugin like NCCL's loader (§1), init it with a commHash agreed across ranks
 * (rank 0 draws it; one MPI_Alltoall carries it), then per iteration one MPI_Barrier and the operations
 *   ncclAllReduce, ncclAllGather, ncclBroadcast, ncclReduceScatter (implicit groups),
 *   a user group of ring Send/Recv, an AlltoAll as a user group of Send/Recv to every other rank,
 * each emitted as §4: API events and the Group/Coll/P2p task events on the application thread,
 * ProxyOp/ProxyStep and KernelCh events on a second ("proxy") thread, whose KernelCh pTimer values
 * come from a simulated %globaltimer (own offset and drift against CLOCK_MONOTONIC, §3).
 *
 * Planted truth: the slow rank's kernel starts --slow-us later (v5/v4: on the simulated GPU; v2,
 * which has no kernel timing (§2c), on the host: it calls the API late), and every rank's kernel of
 * a collective ends at (slow rank's start + transfer), so each other rank waits --slow-us in each
 * collective. Timing is sleep-based so that 4 ranks on 2 cores keep it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_abi_driver.h"

#define MAX_TASKS 16
#define MAX_CH 4

/* ------------------------------------------------------------------------------------------ */
/* Options */

typedef struct {
  const char* plugin;
  int abi; /* 5, 4 or 2 */
  int iters;
  int slow_rank;
  long slow_us;
  int slow_host; /* 1: plant the delay on the host (API call late); 0: on the simulated GPU */
  int slow_p2p;  /* also delay the slow rank's point-to-point kernels */
  long transfer_us;
  long launch_us;
  long count;
  int coll_channels;
  const char* comm_name;
  int selftest;     /* run by tests/nccl/selftest.py: a plugin must load */
  double drift_ppm; /* with have_drift; else the per-rank default */
  int have_drift;
  long long gpu_offset_ns;
  int have_offset;
  int bcast_root;
  const char* truth; /* --truth PATH: each rank writes PATH.<rank>, the times it realised */
  int hang_rank;     /* --hang-rank R (-1: none): its allreduce of iteration --hang-iter never finishes */
  int hang_iter;
} Options;

static void Usage(FILE* out) {
  fprintf(out,
          "usage: nccl_profiler_driver [--plugin PATH] [--abi v5|v4|v2] [--iters N] [--slow-rank R]\n"
          "         [--slow-us U] [--slow-where gpu|host] [--slow-p2p] [--transfer-us T] [--launch-us L]\n"
          "         [--count N] [--channels C] [--comm-name S] [--bcast-root R] [--gpu-offset-ns O]\n"
          "         [--gpu-drift-ppm D] [--truth PATH] [--hang-rank R --hang-iter N] [--selftest]\n"
          "--hang-rank: that rank's ncclAllReduce of iteration N is enqueued (Coll start and stop) but its\n"
          "kernel never runs; the rank prints 'rank R hung' and sleeps until it is killed.\n"
          "Without --plugin, NCCL_PROFILER_PLUGIN is resolved as NCCL 2.28 does (§1).\n");
}

static long ParseLong(const char* flag, const char* v) {
  char* end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0') {
    fprintf(stderr, "nccl_profiler_driver: bad value '%s' for %s\n", v, flag);
    exit(2);
  }
  return x;
}

static Options ParseArgs(int argc, char** argv) {
  Options o;
  memset(&o, 0, sizeof o);
  o.abi = 5;
  o.iters = 20;
  o.slow_rank = -1;
  o.slow_host = -1;
  o.transfer_us = 300;
  o.launch_us = 50;
  o.count = 1 << 18;
  o.coll_channels = 2;
  o.comm_name = "driver_world";
  o.bcast_root = -1;
  o.hang_rank = -1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV()                                                           \
  do {                                                                    \
    if (!v) {                                                             \
      fprintf(stderr, "nccl_profiler_driver: missing value for %s\n", a); \
      exit(2);                                                            \
    }                                                                     \
    ++i;                                                                  \
  } while (0)
    if (!strcmp(a, "--plugin")) {
      NEEDV();
      o.plugin = v;
    } else if (!strcmp(a, "--abi")) {
      NEEDV();
      if (!strcmp(v, "v5"))
        o.abi = 5;
      else if (!strcmp(v, "v4"))
        o.abi = 4;
      else if (!strcmp(v, "v2"))
        o.abi = 2;
      else {
        fprintf(stderr, "nccl_profiler_driver: --abi must be v5, v4 or v2\n");
        exit(2);
      }
    } else if (!strcmp(a, "--iters")) {
      NEEDV();
      o.iters = (int)ParseLong(a, v);
    } else if (!strcmp(a, "--slow-rank")) {
      NEEDV();
      o.slow_rank = (int)ParseLong(a, v);
    } else if (!strcmp(a, "--slow-us")) {
      NEEDV();
      o.slow_us = ParseLong(a, v);
    } else if (!strcmp(a, "--slow-where")) {
      NEEDV();
      if (!strcmp(v, "gpu"))
        o.slow_host = 0;
      else if (!strcmp(v, "host"))
        o.slow_host = 1;
      else {
        fprintf(stderr, "nccl_profiler_driver: --slow-where must be gpu or host\n");
        exit(2);
      }
    } else if (!strcmp(a, "--slow-p2p"))
      o.slow_p2p = 1;
    else if (!strcmp(a, "--transfer-us")) {
      NEEDV();
      o.transfer_us = ParseLong(a, v);
    } else if (!strcmp(a, "--launch-us")) {
      NEEDV();
      o.launch_us = ParseLong(a, v);
    } else if (!strcmp(a, "--count")) {
      NEEDV();
      o.count = ParseLong(a, v);
    } else if (!strcmp(a, "--channels")) {
      NEEDV();
      o.coll_channels = (int)ParseLong(a, v);
    } else if (!strcmp(a, "--comm-name")) {
      NEEDV();
      o.comm_name = v;
    } else if (!strcmp(a, "--truth")) {
      NEEDV();
      o.truth = v;
    } else if (!strcmp(a, "--bcast-root")) {
      NEEDV();
      o.bcast_root = (int)ParseLong(a, v);
    } else if (!strcmp(a, "--gpu-offset-ns")) {
      NEEDV();
      o.gpu_offset_ns = strtoll(v, NULL, 10);
      o.have_offset = 1;
    } else if (!strcmp(a, "--gpu-drift-ppm")) {
      NEEDV();
      o.drift_ppm = strtod(v, NULL);
      o.have_drift = 1;
    } else if (!strcmp(a, "--hang-rank")) {
      NEEDV();
      o.hang_rank = (int)ParseLong(a, v);
    } else if (!strcmp(a, "--hang-iter")) {
      NEEDV();
      o.hang_iter = (int)ParseLong(a, v);
    } else if (!strcmp(a, "--selftest"))
      o.selftest = 1;
    else if (!strcmp(a, "--help")) {
      Usage(stdout);
      exit(0);
    } else {
      fprintf(stderr, "nccl_profiler_driver: unknown argument %s\n", a);
      Usage(stderr);
      exit(2);
    }
#undef NEEDV
  }
  if (o.coll_channels < 1 || o.coll_channels > MAX_CH) {
    fprintf(stderr, "nccl_profiler_driver: --channels must be 1..%d\n", MAX_CH);
    exit(2);
  }
  if (o.iters < 1 || o.count < 1 || o.slow_us < 0 || o.transfer_us < 1 || o.launch_us < 0) {
    fprintf(stderr, "nccl_profiler_driver: --iters, --count, --transfer-us must be > 0; delays >= 0\n");
    exit(2);
  }
  /* v2 has no KernelCh (§2c): a GPU-only delay would be invisible to it, so plant it on the host. */
  if (o.slow_host < 0) o.slow_host = (o.abi == 2);
  return o;
}

/* ------------------------------------------------------------------------------------------ */
/* Clocks: the host clock is CLOCK_MONOTONIC; the simulated GPU %globaltimer runs at
 * gpu = offset + host + drift_ppm * 1e-6 * (host - host0) (§3: raw ns, unrelated to the host). */

static int64_t NowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void SleepUntil(int64_t t_ns) {
  struct timespec t = {(time_t)(t_ns / 1000000000LL), (long)(t_ns % 1000000000LL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
  }
}

static int64_t g_host0;
static int64_t g_gpu_offset;
static double g_gpu_drift_ppm;

static uint64_t GpuTimer(int64_t host_ns) {
  double drift = g_gpu_drift_ppm * 1e-6 * (double)(host_ns - g_host0);
  return (uint64_t)(g_gpu_offset + host_ns + (int64_t)drift);
}

/* ------------------------------------------------------------------------------------------ */
/* Plugin loading (§1, NCCL 2.28 openPluginLib/tryOpenLib + ncclProfilerPluginLoad) */

static void* g_lib;
static const void* g_table;

static int EndsWith(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Returns 0 when a table was found, 1 when profiling is disabled or no library opened. */
static int LoadPlugin(const Options* o) {
  const char* name = o->plugin ? o->plugin : getenv("NCCL_PROFILER_PLUGIN");
  void* lib = NULL;
  if (name == NULL) {
    lib = dlopen("libnccl-profiler.so", RTLD_NOW | RTLD_LOCAL);
  } else if (strcasecmp(name, "none") == 0) {
    return 1;
  } else if (name[0] != '\0' && strncasecmp(name, "STATIC_PLUGIN", strlen(name)) == 0) {
    lib = dlopen(NULL, RTLD_NOW | RTLD_LOCAL);
  } else {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL && strchr(name, '/') == NULL && !(strncmp(name, "lib", 3) == 0 && EndsWith(name, ".so"))) {
      char buf[4096];
      snprintf(buf, sizeof buf, "libnccl-profiler-%s.so", name);
      lib = dlopen(buf, RTLD_NOW | RTLD_LOCAL);
    }
  }
  if (lib == NULL) {
    fprintf(stderr, "nccl_profiler_driver: no profiler plugin opened (%s): %s\n", name ? name : "(unset)", dlerror());
    return 1;
  }
  /* The driver is told which table to use (--abi): NCCL 2.28 would take the first of v5, v4, v3,
   * v2, v1 that exists; asking for an older table tests that table of a plugin exporting several. */
  char sym[32];
  snprintf(sym, sizeof sym, "ncclProfiler_v%d", o->abi);
  g_table = dlsym(lib, sym);
  if (g_table == NULL) {
    fprintf(stderr, "nccl_profiler_driver: %s has no symbol %s\n", name ? name : "(plugin)", sym);
    dlclose(lib);
    return 1;
  }
  g_lib = lib;
  return 0;
}

static void DriverLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  if (level > 2) return; /* WARN and above only */
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "nccl_profiler_driver: plugin log (%d, 0x%lx, %s:%d): ", level, flags, file ? file : "?", line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* ------------------------------------------------------------------------------------------ */
/* The communicator as NCCL keeps it */

typedef struct {
  int abi;
  void* ctx;
  uint64_t comm_hash;
  const char* comm_name;
  int rank, nranks;
  uint64_t seq[16]; /* comm->seqNumber[func], per collective type (§6) */
} Comm;

static int g_mask; /* ncclProfilerEventMask: one process-global int (§2a) */
static Comm g_comm;

static int LoadMask(void) { return __atomic_load_n(&g_mask, __ATOMIC_RELAXED); }

/* The generic event: a v5 descriptor; v4 and v2 descriptors are made from it like NCCL's
 * adapters do (§2b, §2c), with the v2-only fields from the communicator. */
static void* Start(const drv_descr_v5_t* d, size_t traffic_bytes) {
  void* h = NULL;
  if (g_comm.abi == 5) {
    drv_descr_v5_t e = *d;
    ((const drv_profiler_v5_t*)g_table)->startEvent(g_comm.ctx, &h, &e);
  } else if (g_comm.abi == 4) {
    drv_descr_v4_t e;
    memset(&e, 0, sizeof e);
    e.type = (uint8_t)d->type;
    e.parentObj = d->parentObj;
    e.rank = d->rank;
    switch (d->type) {
      case DRV_GROUP:
        break;
      case DRV_COLL:
        e.coll.seqNumber = d->coll.seqNumber;
        e.coll.func = d->coll.func;
        e.coll.sendBuff = d->coll.sendBuff;
        e.coll.recvBuff = d->coll.recvBuff;
        e.coll.count = d->coll.count;
        e.coll.root = d->coll.root;
        e.coll.datatype = d->coll.datatype;
        e.coll.nChannels = d->coll.nChannels;
        e.coll.nWarps = d->coll.nWarps;
        e.coll.algo = d->coll.algo;
        e.coll.proto = d->coll.proto;
        e.parentObj = d->coll.parentGroup; /* 2.28 adapter: parent = legacy Group */
        break;
      case DRV_P2P:
        e.p2p.func = d->p2p.func;
        e.p2p.buff = d->p2p.buff;
        e.p2p.datatype = d->p2p.datatype;
        e.p2p.count = d->p2p.count;
        e.p2p.peer = d->p2p.peer;
        e.p2p.nChannels = d->p2p.nChannels;
        e.parentObj = d->p2p.parentGroup;
        break;
      case DRV_PROXY_OP:
        memcpy(&e.proxyOp, &d->proxyOp, sizeof e.proxyOp);
        break;
      case DRV_PROXY_STEP:
        e.proxyStep.step = d->proxyStep.step;
        break;
      case DRV_KERNEL_CH:
        e.kernelCh.channelId = d->kernelCh.channelId;
        e.kernelCh.pTimer = d->kernelCh.pTimer;
        break;
      default:
        return NULL; /* v5-only types are dropped by the adapter */
    }
    ((const drv_profiler_v4_t*)g_table)->startEvent(g_comm.ctx, &h, &e);
  } else {
    drv_descr_v2_t e;
    memset(&e, 0, sizeof e);
    e.type = (uint8_t)d->type;
    e.parentObj = d->parentObj;
    e.rank = d->rank;
    switch (d->type) {
      case DRV_GROUP:
        break;
      case DRV_COLL: /* 2.24/2.25: name = commName, commHash in the descriptor (§2c) */
        e.coll.name = g_comm.comm_name;
        e.coll.commHash = g_comm.comm_hash;
        e.coll.seqNumber = d->coll.seqNumber;
        e.coll.func = d->coll.func;
        e.coll.sendBuff = d->coll.sendBuff;
        e.coll.recvBuff = d->coll.recvBuff;
        e.coll.count = d->coll.count;
        e.coll.root = d->coll.root;
        e.coll.datatype = d->coll.datatype;
        e.coll.trafficBytes = traffic_bytes;
        e.coll.nMaxChannels = d->coll.nChannels;
        e.coll.nWarps = d->coll.nWarps;
        e.coll.algo = d->coll.algo;
        e.coll.proto = d->coll.proto;
        e.parentObj = d->coll.parentGroup;
        break;
      case DRV_P2P:
        e.p2p.name = g_comm.comm_name;
        e.p2p.commHash = g_comm.comm_hash;
        e.p2p.func = d->p2p.func;
        e.p2p.buff = d->p2p.buff;
        e.p2p.datatype = d->p2p.datatype;
        e.p2p.count = d->p2p.count;
        e.p2p.peer = d->p2p.peer;
        e.parentObj = d->p2p.parentGroup;
        break;
      case DRV_PROXY_OP:
        memcpy(&e.proxyOp, &d->proxyOp, sizeof e.proxyOp);
        break;
      case DRV_PROXY_STEP:
        e.proxyStep.step = d->proxyStep.step;
        break;
      default:
        return NULL;
    }
    ((const drv_profiler_v2_t*)g_table)->startEvent(g_comm.ctx, &h, &e);
  }
  return h;
}

/* NCCL checks the handle for NULL before stop and record (§7). */
static void Stop(void* h) {
  if (h == NULL) return;
  if (g_comm.abi == 5)
    ((const drv_profiler_v5_t*)g_table)->stopEvent(h);
  else if (g_comm.abi == 4)
    ((const drv_profiler_v4_t*)g_table)->stopEvent(h);
  else
    ((const drv_profiler_v2_t*)g_table)->stopEvent(h);
}

static void Record(void* h, int state, const drv_state_args_v5_t* a5, const drv_state_args_v2_t* a2) {
  if (h == NULL) return;
  if (g_comm.abi == 5 || g_comm.abi == 4) {
    drv_state_args_v5_t args;
    if (a5) args = *a5;
    /* v4's table has the same state-args union (§2b). */
    if (g_comm.abi == 5)
      ((const drv_profiler_v5_t*)g_table)->recordEventState(h, state, a5 ? &args : NULL);
    else
      ((const drv_profiler_v4_t*)g_table)->recordEventState(h, state, a5 ? &args : NULL);
  } else {
    drv_state_args_v2_t args;
    if (a2) args = *a2;
    ((const drv_profiler_v2_t*)g_table)->recordEventState(h, state, a2 ? &args : NULL);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Emission gates (§2a for 2.28; §2c for 2.24/2.25, where only Group..ProxyCtrl exist) */

static int GateGroupApi(int m) { return g_comm.abi == 5 && (m & ~DRV_PROXY_CTRL) != 0; }
static int GateCollApi(int m) {
  return g_comm.abi == 5 &&
         (m & (DRV_COLL_API | DRV_COLL | DRV_PROXY_OP | DRV_PROXY_STEP | DRV_KERNEL_CH | DRV_NET_PLUGIN)) != 0;
}
static int GateP2pApi(int m) {
  return g_comm.abi == 5 &&
         (m & (DRV_P2P_API | DRV_P2P | DRV_PROXY_OP | DRV_PROXY_STEP | DRV_KERNEL_CH | DRV_NET_PLUGIN)) != 0;
}
static int GateKernelLaunch(int m) { return g_comm.abi == 5 && (m & DRV_KERNEL_LAUNCH) != 0; }
static int GateGroup(int m) {
  if (g_comm.abi == 2) return (m & (DRV_GROUP | DRV_COLL | DRV_P2P | DRV_PROXY_OP | DRV_PROXY_STEP)) != 0;
  return (m & (DRV_GROUP | DRV_COLL | DRV_P2P | DRV_PROXY_OP | DRV_PROXY_STEP | DRV_KERNEL_CH | DRV_NET_PLUGIN)) != 0;
}
static int GateColl(int m) {
  if (g_comm.abi == 2) return (m & (DRV_COLL | DRV_PROXY_OP | DRV_PROXY_STEP)) != 0;
  return (m & (DRV_COLL | DRV_PROXY_OP | DRV_PROXY_STEP | DRV_KERNEL_CH | DRV_NET_PLUGIN)) != 0;
}
static int GateP2p(int m) {
  /* 2.24/2.25 quirk (§2c): P2p fires only if the mask also has Coll, ProxyOp or ProxyStep; read
   * here as that outer condition plus the event's own gate, P2p or a child of it (ProxyOp,
   * ProxyStep), as in 2.28, so a ProxyOp never comes without its P2p parent. */
  if (g_comm.abi == 2)
    return (m & (DRV_COLL | DRV_PROXY_OP | DRV_PROXY_STEP)) != 0 &&
           (m & (DRV_P2P | DRV_PROXY_OP | DRV_PROXY_STEP)) != 0;
  return (m & (DRV_P2P | DRV_PROXY_OP | DRV_PROXY_STEP | DRV_KERNEL_CH | DRV_NET_PLUGIN)) != 0;
}
static int GateProxyOp(int m) {
  if (g_comm.abi == 2) return (m & (DRV_PROXY_OP | DRV_PROXY_STEP)) != 0;
  return (m & (DRV_PROXY_OP | DRV_PROXY_STEP | DRV_NET_PLUGIN)) != 0;
}
static int GateProxyStep(int m) {
  if (g_comm.abi == 2) return (m & DRV_PROXY_STEP) != 0;
  return (m & (DRV_PROXY_STEP | DRV_NET_PLUGIN)) != 0;
}
static int GateKernelCh(int m) { return g_comm.abi != 2 && (m & DRV_KERNEL_CH) != 0; }

/* ------------------------------------------------------------------------------------------ */
/* Operations */

enum { F_ALLREDUCE, F_ALLGATHER, F_BROADCAST, F_REDUCESCATTER, F_SEND, F_RECV, F_NUM };
static const char* kFunc[F_NUM] = {"AllReduce", "AllGather", "Broadcast", "ReduceScatter", "Send", "Recv"};

typedef struct {
  int func;
  const char* dtype; /* the user's datatype string */
  size_t dsize;
  size_t count; /* the user's count */
  int root;
  int peer;
  void* handle; /* Coll/P2p handle, for the proxy thread */
  int nch;
  int mask;                 /* the task's copy of the mask (§2a) */
  int64_t start_ns, end_ns; /* planned host times of the kernel on this rank */
  struct Truth* truth;      /* a collective's realised times (--truth), else NULL */
} Task;

/* What this rank realised for one collective, on the host clock (CLOCK_MONOTONIC): the schedule
 * sleeps, so a loaded machine wakes a rank late and moves its times; tests compare a profiler's
 * figures with these rather than with the plant alone (tests/nccl/README.md). The arrival is the
 * start a profiler sees (v5/v4: the earliest KernelCh pTimer; v2: the first ProxyOp start, taken
 * by the plugin inside the call, so between a_lo and a_hi), the end likewise (the latest KernelCh
 * stop pTimer; v2: the last ProxyOp stop). */
struct Truth {
  int func;
  uint64_t seq;
  int64_t planned;    /* the slot's common due time */
  int64_t a_lo, a_hi; /* arrival */
  int64_t e_lo, e_hi; /* end */
  int64_t cal;        /* the least KernelCh callback delay seen 16 callbacks before (-1: fewer) */
};
static struct Truth* g_truth;
static int g_ntruth, g_truth_cap;

/* A plugin maps pTimer to the host clock by a fit on its callbacks, which arrive late by this
 * thread's delay (docs/nccl-plugin.md): its converted times are late by about the least delay it
 * has seen, and the fit is redone every few pairs. So each collective's record carries the least
 * delay seen up to 16 callbacks before its kernel starts (a loaded machine makes it milliseconds
 * early in a run). */
#define CB_HIST 32
static int64_t g_cb_min = INT64_MAX, g_cb_hist[CB_HIST];
static uint64_t g_cb_count;
static void NoteCallbackDelay(int64_t delay) {
  if (delay < g_cb_min) g_cb_min = delay;
  g_cb_hist[g_cb_count++ % CB_HIST] = g_cb_min;
}
static int64_t CalibrationLag(void) { return g_cb_count < 16 ? -1 : g_cb_hist[(g_cb_count - 16) % CB_HIST]; }

typedef struct {
  Task tasks[MAX_TASKS];
  int ntasks;
} Plan;

/* Static buffers stand in for device pointers. */
static char g_sendbuf[64], g_recvbuf[64];
static char g_stream_obj;

/* ------------------------------------------------------------------------------------------ */
/* The proxy thread: ProxyOp/ProxyStep (network transport, per channel x peer x direction) and
 * KernelCh (per channel, through the profiler proxy connection) events (§4). */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static Plan* g_work;
static int g_work_done;
static int g_quit;

typedef struct {
  void* h;
  int is_send;
  int nsteps;
  size_t step_bytes;
  struct Truth* truth; /* its collective's, when the proxy ops give its span */
} ProxyOpRec;

static void RunProxyPlan(Plan* p) {
  ProxyOpRec ops[MAX_TASKS * MAX_CH * 2];
  int nops = 0;
  pid_t pid = getpid();
  /* 1. ProxyOps are started when appended, then marked in progress (v4/v5: state 19; v2: the
   *    Posted state with {steps, transSize}). */
  for (int t = 0; t < p->ntasks; ++t) {
    Task* k = &p->tasks[t];
    if (!GateProxyOp(k->mask)) continue;
    for (int ch = 0; ch < k->nch; ++ch) {
      for (int dir = 0; dir < 2; ++dir) {
        int is_send;
        int peer;
        if (k->func == F_SEND) {
          if (dir == 1) continue;
          is_send = 1;
          peer = k->peer;
        } else if (k->func == F_RECV) {
          if (dir == 1) continue;
          is_send = 0;
          peer = k->peer;
        } else {
          is_send = dir == 0;
          peer = is_send ? (g_comm.rank + 1) % g_comm.nranks : (g_comm.rank + g_comm.nranks - 1) % g_comm.nranks;
        }
        drv_descr_v5_t d;
        memset(&d, 0, sizeof d);
        d.type = DRV_PROXY_OP;
        d.parentObj = k->handle;
        d.rank = g_comm.rank;
        d.proxyOp.pid = pid;
        d.proxyOp.channelId = (uint8_t)ch;
        d.proxyOp.peer = peer;
        d.proxyOp.nSteps = 1;
        d.proxyOp.chunkSize = 131072;
        d.proxyOp.isSend = is_send;
        ProxyOpRec* r = &ops[nops++];
        int64_t before = NowNs();
        r->h = Start(&d, 0);
        r->truth = NULL;
        if (k->truth != NULL && !GateKernelCh(k->mask)) { /* no kernel timing: the proxy ops' span */
          if (k->truth->a_lo == 0) {
            k->truth->a_lo = before;
            k->truth->a_hi = NowNs();
          }
          r->truth = k->truth;
        }
        r->is_send = is_send;
        r->nsteps = 1;
        r->step_bytes = k->count * k->dsize / (size_t)k->nch;
        if (g_comm.abi == 2) {
          drv_state_args_v2_t a;
          memset(&a, 0, sizeof a);
          a.proxyOp.steps = 0;
          a.proxyOp.transSize = 0;
          Record(r->h, is_send ? DRV_ST_PROXY_OP_SEND_POSTED : DRV_ST_PROXY_OP_RECV_POSTED, NULL, &a);
        } else {
          Record(r->h, DRV_ST_PROXY_OP_IN_PROGRESS, NULL, NULL);
        }
      }
    }
  }
  /* 2. The kernel starts: KernelCh start with the GPU timer of that moment. All tasks of a plan
   *    run in one kernel; each task's channels start 1 us apart. */
  int64_t start = INT64_MAX, end = 0;
  for (int t = 0; t < p->ntasks; ++t) {
    if (p->tasks[t].start_ns < start) start = p->tasks[t].start_ns;
    if (p->tasks[t].end_ns > end) end = p->tasks[t].end_ns;
  }
  void* kch[MAX_TASKS][MAX_CH];
  memset(kch, 0, sizeof kch);
  SleepUntil(start);
  for (int t = 0; t < p->ntasks; ++t) {
    Task* k = &p->tasks[t];
    if (!GateKernelCh(k->mask)) continue;
    for (int ch = 0; ch < k->nch; ++ch) {
      int64_t at = k->start_ns + ch * 1000;
      SleepUntil(at);
      drv_descr_v5_t d;
      memset(&d, 0, sizeof d);
      d.type = DRV_KERNEL_CH;
      d.parentObj = k->handle;
      d.rank = 0; /* KernelCh rank is 0 (§2a) */
      d.kernelCh.channelId = (uint8_t)ch;
      d.kernelCh.pTimer = GpuTimer(at);
      if (k->truth != NULL && (k->truth->a_lo == 0 || at < k->truth->a_lo)) {
        k->truth->a_lo = k->truth->a_hi = at;
        k->truth->cal = CalibrationLag();
      }
      NoteCallbackDelay(NowNs() - at);
      kch[t][ch] = Start(&d, 0);
    }
  }
  /* 3. Steps: send 8, 20, 9 / receive 10, 11, 12 with transSize (v2: NULL args) (§4, §2c). */
  for (int i = 0; i < nops; ++i) {
    if (ops[i].h == NULL) continue;
    int m = 0;
    for (int t = 0; t < p->ntasks; ++t) m |= p->tasks[t].mask;
    if (!GateProxyStep(m)) continue;
    for (int s = 0; s < ops[i].nsteps; ++s) {
      drv_descr_v5_t d;
      memset(&d, 0, sizeof d);
      d.type = DRV_PROXY_STEP;
      d.parentObj = ops[i].h;
      d.rank = g_comm.rank;
      d.proxyStep.step = s;
      void* hs = Start(&d, 0);
      drv_state_args_v5_t a;
      memset(&a, 0, sizeof a);
      a.proxyStep.transSize = ops[i].step_bytes;
      const drv_state_args_v5_t* pa = g_comm.abi == 2 ? NULL : &a;
      if (ops[i].is_send) {
        Record(hs, DRV_ST_STEP_SEND_GPU_WAIT, pa, NULL);
        if (g_comm.abi != 2) Record(hs, DRV_ST_STEP_SEND_PEER_WAIT, pa, NULL);
        Record(hs, DRV_ST_STEP_SEND_WAIT, pa, NULL);
      } else {
        Record(hs, DRV_ST_STEP_RECV_WAIT, pa, NULL);
        Record(hs, DRV_ST_STEP_RECV_FLUSH_WAIT, pa, NULL);
        Record(hs, DRV_ST_STEP_RECV_GPU_WAIT, pa, NULL);
      }
      Stop(hs);
    }
  }
  /* 4. The kernel ends: per channel record(22, {pTimer = stop}) immediately before stop (§3), in
   *    the order of the stop times (a task's channels 1 us apart, the last at the task's end). */
  struct {
    int64_t at;
    int t, ch;
  } stops[MAX_TASKS * MAX_CH];
  int nstops = 0;
  for (int t = 0; t < p->ntasks; ++t)
    for (int ch = 0; ch < p->tasks[t].nch; ++ch) {
      stops[nstops].at = p->tasks[t].end_ns - (int64_t)(p->tasks[t].nch - 1 - ch) * 1000;
      stops[nstops].t = t;
      stops[nstops].ch = ch;
      ++nstops;
    }
  for (int i = 1; i < nstops; ++i) /* insertion sort: a handful of entries */
    for (int j = i; j > 0 && stops[j].at < stops[j - 1].at; --j) {
      __typeof__(stops[0]) tmp = stops[j];
      stops[j] = stops[j - 1];
      stops[j - 1] = tmp;
    }
  for (int i = 0; i < nstops; ++i) {
    SleepUntil(stops[i].at);
    void* h = kch[stops[i].t][stops[i].ch];
    if (h == NULL) continue;
    drv_state_args_v5_t a;
    memset(&a, 0, sizeof a);
    a.kernelCh.pTimer = GpuTimer(stops[i].at);
    NoteCallbackDelay(NowNs() - stops[i].at);
    Record(h, DRV_ST_KERNEL_CH_STOP, &a, NULL);
    Stop(h);
    struct Truth* tr = p->tasks[stops[i].t].truth;
    if (tr != NULL && stops[i].at > tr->e_lo) tr->e_lo = tr->e_hi = stops[i].at;
  }
  SleepUntil(end);
  /* 5. ProxyOps complete (v2: the Transmitted/Done states with the op's bytes first). */
  for (int i = 0; i < nops; ++i) {
    if (g_comm.abi == 2) {
      drv_state_args_v2_t a;
      memset(&a, 0, sizeof a);
      a.proxyOp.steps = ops[i].nsteps;
      a.proxyOp.transSize = ops[i].step_bytes;
      if (ops[i].is_send) {
        Record(ops[i].h, DRV_ST_PROXY_OP_SEND_REM_FIFO_WAIT, NULL, &a);
        Record(ops[i].h, DRV_ST_PROXY_OP_SEND_TRANSMITTED, NULL, &a);
        Record(ops[i].h, DRV_ST_PROXY_OP_SEND_DONE, NULL, &a);
      } else {
        Record(ops[i].h, DRV_ST_PROXY_OP_RECV_RECEIVED, NULL, &a);
        Record(ops[i].h, DRV_ST_PROXY_OP_RECV_TRANSMITTED, NULL, &a);
        Record(ops[i].h, DRV_ST_PROXY_OP_RECV_DONE, NULL, &a);
      }
    }
    int64_t before = NowNs();
    Stop(ops[i].h);
    if (ops[i].truth != NULL && ops[i].h != NULL) { /* the last stop so far */
      ops[i].truth->e_lo = before;
      ops[i].truth->e_hi = NowNs();
    }
  }
}

static void* ProxyMain(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    while (g_work == NULL && !g_quit) pthread_cond_wait(&g_cv, &g_mu);
    if (g_work == NULL && g_quit) break;
    Plan* p = g_work;
    pthread_mutex_unlock(&g_mu);
    RunProxyPlan(p);
    pthread_mutex_lock(&g_mu);
    g_work = NULL;
    g_work_done = 1;
    pthread_cond_broadcast(&g_cv);
  }
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

/* Hands the plan to the proxy thread and waits for it like cudaStreamSynchronize. */
static void RunOnProxyAndWait(Plan* p) {
  pthread_mutex_lock(&g_mu);
  g_work = p;
  g_work_done = 0;
  pthread_cond_broadcast(&g_cv);
  while (!g_work_done) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------------------------------------ */
/* The application thread: one API call (implicit group, depth 1) or a user group (depth 2),
 * §4 steps 1-8. */

typedef struct {
  const Options* o;
  long counts[F_NUM]; /* operations emitted per func */
  long groups;
} Driver;

static void* StartGroupApi(int m, int depth) {
  if (!GateGroupApi(m)) return NULL;
  drv_descr_v5_t d;
  memset(&d, 0, sizeof d);
  d.type = DRV_GROUP_API;
  d.parentObj = NULL;
  d.rank = 0; /* never set by NCCL 2.28 (§2a) */
  d.groupApi.graphCaptured = false;
  d.groupApi.groupDepth = depth;
  return Start(&d, 0);
}

/* Plans the kernel times of this rank for a plan due at host time `planned` (common to all ranks)
 * and issued at `t_launch` (the same unless this rank ran late, or is the host-planted straggler). */
static void PlanTimes(Driver* dr, Plan* p, int64_t planned, int64_t t_launch, int is_coll) {
  const Options* o = dr->o;
  int slow = o->slow_rank >= 0 && o->slow_rank < g_comm.nranks && (is_coll || o->slow_p2p);
  int64_t L = o->launch_us * 1000, U = o->slow_us * 1000, X = o->transfer_us * 1000;
  int me_slow = slow && g_comm.rank == o->slow_rank;
  for (int t = 0; t < p->ntasks; ++t) {
    Task* k = &p->tasks[t];
    /* The GPU straggler starts U late; the host straggler's t_launch is already U late. */
    int64_t own_start = t_launch + L + ((me_slow && !o->slow_host) ? U : 0);
    /* This rank's partners in the plan: every rank for a collective, the peer for a P2p. The slow
     * rank's start is planned + L + U in the common schedule. */
    int partner_slow = slow && !me_slow && (is_coll || k->peer == o->slow_rank);
    int64_t last_start = own_start;
    if (partner_slow && planned + L + U > last_start) last_start = planned + L + U;
    k->start_ns = own_start;
    k->end_ns = last_start + X;
  }
}

/* Sleeps until the operation is due (the straggler, with a host-planted delay, U later) and returns
 * the launch time. */
static int64_t WaitUntilDue(Driver* dr, int64_t planned, int is_coll) {
  const Options* o = dr->o;
  int64_t due = planned;
  if (o->slow_host && o->slow_rank == g_comm.rank && (is_coll || o->slow_p2p)) due += o->slow_us * 1000;
  SleepUntil(due);
  int64_t now = NowNs();
  return now > due ? now : due;
}

static void IssueCollective(Driver* dr, int64_t planned, int func, const char* dtype, size_t dsize, size_t count,
                            int root) {
  const Options* o = dr->o;
  int64_t t_launch = WaitUntilDue(dr, planned, 1);
  int m = LoadMask(); /* each enqueue re-reads the global mask (§7) */
  /* 1-2 */
  void* hGA = StartGroupApi(m, 1);
  Record(hGA, DRV_ST_GROUP_START_API_STOP, NULL, NULL);
  /* 3-4 */
  void* hCA = NULL;
  if (GateCollApi(m)) {
    drv_descr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = DRV_COLL_API;
    d.parentObj = hGA;
    d.rank = 0;
    d.collApi.func = kFunc[func];
    d.collApi.count = count;
    d.collApi.datatype = dtype;
    d.collApi.root = root;
    d.collApi.stream = &g_stream_obj;
    d.collApi.graphCaptured = false;
    hCA = Start(&d, 0);
  }
  Stop(hCA);
  /* 5-6 */
  Record(hGA, DRV_ST_GROUP_END_API_START, NULL, NULL);
  if (GateKernelLaunch(m)) {
    drv_descr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = DRV_KERNEL_LAUNCH;
    d.parentObj = hGA;
    d.kernelLaunch.stream = &g_stream_obj;
    void* hKL = Start(&d, 0);
    Stop(hKL);
  }
  /* 7: hostStreamPlanTask, after the launch */
  Plan plan;
  memset(&plan, 0, sizeof plan);
  Task* k = &plan.tasks[plan.ntasks++];
  k->func = func;
  k->dtype = dtype;
  k->dsize = dsize;
  k->count = count;
  k->root = root;
  k->peer = -1;
  k->nch = o->coll_channels;
  k->mask = m;
  void* hG = NULL;
  if (GateGroup(m)) {
    drv_descr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = DRV_GROUP;
    hG = Start(&d, 0);
  }
  /* AllGather and Broadcast: count in bytes as ncclInt8 in the Coll event (§2a traps). */
  int as_bytes = func == F_ALLGATHER || func == F_BROADCAST;
  /* 2.24/2.25 advance seqNumber only while profiling the Coll (§2c); 2.28 always (§6). */
  int coll_on = GateColl(m);
  uint64_t seq = g_comm.seq[func];
  if (coll_on) {
    drv_descr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = DRV_COLL;
    d.parentObj = hCA;
    d.rank = g_comm.rank;
    d.coll.seqNumber = seq;
    d.coll.func = kFunc[func];
    d.coll.sendBuff = g_sendbuf;
    d.coll.recvBuff = g_recvbuf;
    d.coll.count = as_bytes ? count * dsize : count;
    d.coll.root = root;
    d.coll.datatype = as_bytes ? "ncclInt8" : dtype;
    d.coll.nChannels = (uint8_t)k->nch;
    d.coll.nWarps = 16;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    d.coll.parentGroup = hG;
    k->handle = Start(&d, count * dsize);
  }
  if (g_comm.abi != 2 || coll_on) g_comm.seq[func]++;
  Stop(k->handle);
  Stop(hG);
  /* 8 */
  Stop(hGA);
  PlanTimes(dr, &plan, planned, t_launch, 1);
  if (g_truth != NULL && coll_on && g_ntruth < g_truth_cap) {
    struct Truth* tr = &g_truth[g_ntruth++];
    memset(tr, 0, sizeof *tr);
    tr->func = func;
    tr->seq = seq;
    tr->planned = planned;
    k->truth = tr;
  }
  RunOnProxyAndWait(&plan);
  dr->counts[func]++;
}

/* --hang-rank: an allreduce enqueued whose kernel never runs (a GPU stuck on a peer that never
 * joins): Coll start and stop only, then the rank waits for its end (SIGTERM from the test). */
static void HangInAllReduce(Driver* dr, size_t count) {
  int m = LoadMask();
  if (GateColl(m)) {
    drv_descr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = DRV_COLL;
    d.rank = g_comm.rank;
    d.coll.seqNumber = g_comm.seq[F_ALLREDUCE];
    d.coll.func = kFunc[F_ALLREDUCE];
    d.coll.sendBuff = g_sendbuf;
    d.coll.recvBuff = g_recvbuf;
    d.coll.count = count;
    d.coll.root = 0;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = (uint8_t)dr->o->coll_channels;
    d.coll.nWarps = 16;
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    Stop(Start(&d, count * 4));
  }
  printf("rank %d hung in ncclAllReduce seq %llu\n", g_comm.rank, (unsigned long long)g_comm.seq[F_ALLREDUCE]);
  fflush(stdout);
  for (;;) {
    struct timespec t = {1, 0};
    nanosleep(&t, NULL);
  }
}

/* A user group (ncclGroupStart; ncclSend/ncclRecv...; ncclGroupEnd) with the given peers. */
static void IssueP2pGroup(Driver* dr, int64_t planned, const int* send_peers, int nsend, const int* recv_peers,
                          int nrecv, const char* dtype, size_t dsize, size_t count) {
  int64_t t_launch = WaitUntilDue(dr, planned, 0);
  int m = LoadMask();
  void* hGA = StartGroupApi(m, 2); /* a user ncclGroupStart gives depth >= 2 (§4 step 1) */
  Record(hGA, DRV_ST_GROUP_START_API_STOP, NULL, NULL);
  Plan plan;
  memset(&plan, 0, sizeof plan);
  void* api[MAX_TASKS];
  for (int i = 0; i < nsend + nrecv; ++i) {
    int is_send = i < nsend;
    Task* k = &plan.tasks[plan.ntasks++];
    k->func = is_send ? F_SEND : F_RECV;
    k->dtype = dtype;
    k->dsize = dsize;
    k->count = count;
    k->peer = is_send ? send_peers[i] : recv_peers[i - nsend];
    k->root = 0;
    k->nch = 1;
    k->mask = m;
    api[i] = NULL;
    if (GateP2pApi(m)) {
      drv_descr_v5_t d;
      memset(&d, 0, sizeof d);
      d.type = DRV_P2P_API;
      d.parentObj = hGA;
      d.p2pApi.func = kFunc[k->func];
      d.p2pApi.count = count;
      d.p2pApi.datatype = dtype;
      d.p2pApi.stream = &g_stream_obj;
      d.p2pApi.graphCaptured = false;
      api[i] = Start(&d, 0);
    }
    Stop(api[i]);
  }
  Record(hGA, DRV_ST_GROUP_END_API_START, NULL, NULL);
  if (GateKernelLaunch(m)) {
    drv_descr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = DRV_KERNEL_LAUNCH;
    d.parentObj = hGA;
    d.kernelLaunch.stream = &g_stream_obj;
    void* hKL = Start(&d, 0);
    Stop(hKL);
  }
  void* hG = NULL;
  if (GateGroup(m)) {
    drv_descr_v5_t d;
    memset(&d, 0, sizeof d);
    d.type = DRV_GROUP;
    hG = Start(&d, 0);
  }
  for (int i = 0; i < plan.ntasks; ++i) {
    Task* k = &plan.tasks[i];
    if (GateP2p(m)) {
      drv_descr_v5_t d;
      memset(&d, 0, sizeof d);
      d.type = DRV_P2P;
      d.parentObj = api[i];
      d.rank = g_comm.rank;
      d.p2p.func = kFunc[k->func];
      d.p2p.buff = k->func == F_SEND ? (void*)g_sendbuf : (void*)g_recvbuf;
      d.p2p.datatype = dtype;
      d.p2p.count = count;
      d.p2p.peer = k->peer;
      d.p2p.nChannels = (uint8_t)k->nch;
      d.p2p.parentGroup = hG;
      k->handle = Start(&d, 0);
    }
    Stop(k->handle);
    dr->counts[k->func]++;
  }
  Stop(hG);
  Stop(hGA);
  PlanTimes(dr, &plan, planned, t_launch, 0);
  RunOnProxyAndWait(&plan);
  dr->groups++;
}

/* PATH.<rank>: one line per collective emitted with a Coll event: func seq planned a_lo a_hi e_lo e_hi
 * cal (host ns; 0 where no timing was emitted; cal 0 without kernel timing, -1 early in a run). */
static void WriteTruth(const char* path, int rank) {
  char name[4096];
  snprintf(name, sizeof name, "%s.%d", path, rank);
  FILE* f = fopen(name, "w");
  if (f == NULL) {
    fprintf(stderr, "nccl_profiler_driver: cannot write %s: %s\n", name, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int i = 0; i < g_ntruth; ++i) {
    const struct Truth* t = &g_truth[i];
    fprintf(f, "%s %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n",
            kFunc[t->func], t->seq, t->planned, t->a_lo, t->a_hi, t->e_lo, t->e_hi, t->cal);
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "nccl_profiler_driver: cannot write %s: %s\n", name, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

/* ------------------------------------------------------------------------------------------ */

int main(int argc, char** argv) {
  Options o = ParseArgs(argc, argv);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mpi_collectives = 0;

  /* The commHash: identical on every rank of the communicator (§6); rank 0 draws it (below). */
  uint64_t hash = 0;
  if (rank == 0) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    hash = ((uint64_t)t.tv_nsec << 32) ^ (uint64_t)t.tv_sec ^ ((uint64_t)getpid() << 17) ^ 0x9e3779b97f4a7c15ULL;
    hash ^= hash >> 29;
    hash *= 0xbf58476d1ce4e5b9ULL;
    hash ^= hash >> 32;
  }
  /* The schedule (below) is on CLOCK_MONOTONIC, common to the ranks when all share one host
   * (checked here); the operations are then due at the same instants on every rank, so the
   * planted waits do not depend on how the scheduler wakes 4 ranks on 2 cores. One MPI_Alltoall
   * carries rank 0's hash and every rank's host-name hash: an MPI collective type that
   * none of the NCCL operations maps to, so a profiler's per-type figures of the NCCL
   * collectives stay free of MPI instances. */
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  uint64_t hh = 1469598103934665603ULL;
  for (const char* ch = host; *ch; ++ch) hh = (hh ^ (unsigned char)*ch) * 1099511628211ULL;
  uint64_t* sendv = (uint64_t*)calloc((size_t)size * 3, sizeof(uint64_t));
  uint64_t* recvv = (uint64_t*)calloc((size_t)size * 3, sizeof(uint64_t));
  for (int p = 0; p < size; ++p) {
    sendv[3 * p] = hash;
    sendv[3 * p + 1] = 0;
    sendv[3 * p + 2] = hh;
  }
  MPI_Alltoall(sendv, 3, MPI_UINT64_T, recvv, 3, MPI_UINT64_T, MPI_COMM_WORLD);
  ++mpi_collectives;
  hash = recvv[0];
  int one_host = 1;
  for (int p = 0; p < size; ++p) one_host = one_host && recvv[3 * p + 2] == hh;
  /* every rank sees the same host hashes, so every rank reaches the same one_host */
  free(sendv);
  free(recvv);

  g_host0 = NowNs();
  g_gpu_offset = o.have_offset ? o.gpu_offset_ns : 1756135989724672000LL + (int64_t)rank * 1234567891LL - g_host0;
  g_gpu_drift_ppm = o.have_drift ? o.drift_ppm : 10.0 * (rank - 1.5);

  memset(&g_comm, 0, sizeof g_comm);
  g_comm.abi = o.abi;
  g_comm.comm_hash = hash;
  g_comm.comm_name = o.comm_name;
  g_comm.rank = rank;
  g_comm.nranks = size;

  int loaded = LoadPlugin(&o) == 0;
  if (!loaded && o.selftest) {
    fprintf(stderr, "nccl_profiler_driver: --selftest needs a plugin\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int init_ok = 0;
  if (loaded) {
    drv_result_t r;
    if (o.abi == 5)
      r = ((const drv_profiler_v5_t*)g_table)->init(&g_comm.ctx, hash, &g_mask, o.comm_name, 1, size, rank, DriverLog);
    else if (o.abi == 4)
      r = ((const drv_profiler_v4_t*)g_table)->init(&g_comm.ctx, &g_mask, o.comm_name, hash, 1, size, rank, DriverLog);
    else
      r = ((const drv_profiler_v2_t*)g_table)->init(&g_comm.ctx, &g_mask);
    /* 2.28 keeps the plugin after a failed init; events then carry whatever *context holds (§1). */
    if (r != 0) fprintf(stderr, "nccl_profiler_driver: rank %d: profiler init failed (%d); continuing\n", rank, r);
    init_ok = r == 0;
  }

  pthread_t proxy;
  pthread_create(&proxy, NULL, ProxyMain, NULL);

  Driver dr;
  memset(&dr, 0, sizeof dr);
  if (o.truth != NULL) {
    g_truth_cap = 4 * o.iters;
    g_truth = (struct Truth*)calloc((size_t)g_truth_cap, sizeof *g_truth);
  }
  dr.o = &o;
  int root = o.bcast_root >= 0 ? o.bcast_root % size : (o.slow_rank >= 0 ? o.slow_rank % size : 0);
  size_t c = (size_t)o.count;
  int ring_send[1] = {(rank + 1) % size}, ring_recv[1] = {(rank + size - 1) % size};
  int a2a[MAX_TASKS];
  int na2a = 0;
  for (int p = 0; p < size && na2a < MAX_TASKS / 2; ++p)
    if (p != rank) a2a[na2a++] = p;
  /* One slot per operation: launch, the planted delay, the transfer and 1.5 ms of slack; 6
   * operations and 3 ms for the barrier per iteration. */
  int64_t period = (o.launch_us + o.slow_us + o.transfer_us + MAX_CH + 1500) * 1000;
  int64_t iter_span = 6 * period + 3000000;
  /* The anchor, agreed once every rank has its plugin initialised (the real plugin's init may
   * take a while): the latest rank's clock plus 20 ms, again through an MPI_Alltoall. */
  int64_t* nows = (int64_t*)calloc((size_t)size, sizeof(int64_t));
  int64_t* all_nows = (int64_t*)calloc((size_t)size, sizeof(int64_t));
  int64_t now0 = NowNs();
  for (int p = 0; p < size; ++p) nows[p] = now0;
  MPI_Alltoall(nows, 1, MPI_INT64_T, all_nows, 1, MPI_INT64_T, MPI_COMM_WORLD);
  ++mpi_collectives;
  int64_t anchor = 0;
  for (int p = 0; p < size; ++p)
    if (all_nows[p] > anchor) anchor = all_nows[p];
  anchor += 20000000LL;
  free(nows);
  free(all_nows);
  if (loaded) {
    for (int it = 0; it < o.iters; ++it) {
      MPI_Barrier(MPI_COMM_WORLD); /* keeps the ranks in step */
      ++mpi_collectives;
      /* Several hosts: no common clock, so each rank's iteration starts when it leaves the barrier. */
      int64_t s0 = one_host ? anchor + it * iter_span : NowNs();
      int k = 0;
      if (size > 1) { /* 1-rank communicators emit no collective events (§2a) */
        if (rank == o.hang_rank && it == o.hang_iter) {
          HangInAllReduce(&dr, c);
        }
        IssueCollective(&dr, s0 + period * k++, F_ALLREDUCE, "ncclFloat32", 4, c, 0);
        IssueCollective(&dr, s0 + period * k++, F_ALLGATHER, "ncclFloat32", 4, c / (size_t)size, 0);
        IssueCollective(&dr, s0 + period * k++, F_BROADCAST, "ncclFloat64", 8, c / 2, root);
        IssueCollective(&dr, s0 + period * k++, F_REDUCESCATTER, "ncclFloat32", 4, c / (size_t)size, 0);
      }
      IssueP2pGroup(&dr, s0 + period * k++, ring_send, 1, ring_recv, 1, "ncclFloat32", 4, c / 4);
      if (size > 1) IssueP2pGroup(&dr, s0 + period * k++, a2a, na2a, a2a, na2a, "ncclInt32", 4, c / (size_t)size);
    }
  }
  pthread_mutex_lock(&g_mu);
  g_quit = 1;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  pthread_join(proxy, NULL);

  /* finalize in commFree; skipped for a NULL context (§1). */
  if (loaded && g_comm.ctx != NULL) {
    if (o.abi == 5)
      ((const drv_profiler_v5_t*)g_table)->finalize(g_comm.ctx);
    else if (o.abi == 4)
      ((const drv_profiler_v4_t*)g_table)->finalize(g_comm.ctx);
    else
      ((const drv_profiler_v2_t*)g_table)->finalize(g_comm.ctx);
  }
  if (g_lib) dlclose(g_lib);
  if (g_truth != NULL) WriteTruth(o.truth, rank);

  MPI_Barrier(MPI_COMM_WORLD);
  ++mpi_collectives;
  if (rank == 0) {
    /* One JSON line with what was emitted, for the tests' expected counts. */
    printf("{\"driver\":\"nccl_profiler_driver\",\"abi\":\"v%d\",\"comm_hash\":%" PRIu64
           ",\"nranks\":%d,\"iters\":%d,\"plugin_loaded\":%s,\"init_ok\":%s,\"mask\":%d,"
           "\"slow_rank\":%d,\"slow_us\":%ld,\"slow_where\":\"%s\",\"bcast_root\":%d,\"count\":%ld,"
           "\"channels\":%d,\"one_host\":%s,\"ops\":{\"AllReduce\":%ld,\"AllGather\":%ld,\"Broadcast\":%ld,"
           "\"ReduceScatter\":%ld,\"Send\":%ld,\"Recv\":%ld},\"p2p_groups\":%ld,\"mpi_collectives\":%ld}\n",
           o.abi, hash, size, o.iters, loaded ? "true" : "false", init_ok ? "true" : "false", LoadMask(), o.slow_rank,
           o.slow_us, o.slow_host ? "host" : "gpu", root, o.count, o.coll_channels, one_host ? "true" : "false",
           dr.counts[F_ALLREDUCE], dr.counts[F_ALLGATHER], dr.counts[F_BROADCAST], dr.counts[F_REDUCESCATTER],
           dr.counts[F_SEND], dr.counts[F_RECV], dr.groups, mpi_collectives);
    fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
