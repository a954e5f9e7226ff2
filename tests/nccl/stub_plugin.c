/* A test-only profiler plugin: exports ncclProfiler_v5, _v4 and _v2 (our own declarations,
 * nccl_abi_driver.h) and logs every call, with every descriptor field, to
 * $NCCL_STUB_LOG.<pid>, one line per call, so tests/nccl/selftest.py can check the calling sequence
 * nccl_profiler_driver emits against §4 of docs/nccl-plugin.md.
 *
 * Environment: NCCL_STUB_LOG (path prefix, required for logging), NCCL_STUB_MASK (the activation
 * mask init sets; default all bits of the table's version), NCCL_STUB_INIT_FAIL=1 (init returns
 * an error and leaves the context NULL), NCCL_STUB_MASK_SEQUENCE=m1,m2,... (after the i-th stop of a
 * legacy Group event, store m_i into the activation mask, as a plugin may at any time; §2a). Line
 * format: "<thread> <call> key=value ..." where thread
 * is "app" for the thread that called init and "bg" for any other; handles are logged as small
 * integers (1, 2, ... in start order), 0 for NULL and -1 for a pointer that is not one of ours. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_abi_driver.h"

#define STUB_MAGIC 0x5354554232u

typedef struct {
  uint64_t magic;
  long id;
  uint64_t type;
} StubHandle;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE* g_log;
static pthread_t g_init_thread;
static long g_next_id = 1;
static int g_ctx_token = 42; /* the context we hand out */
static int* g_mask_ptr;
static long g_group_stops;

static int64_t NowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void Log(const char* fmt, ...) {
  if (g_log == NULL) return;
  const char* thr = pthread_equal(pthread_self(), g_init_thread) ? "app" : "bg";
  va_list ap;
  va_start(ap, fmt);
  fprintf(g_log, "%s t=%" PRId64 " ", thr, NowNs());
  vfprintf(g_log, fmt, ap);
  fputc('\n', g_log);
  va_end(ap);
}

static long Id(const void* p) {
  if (p == NULL) return 0;
  const StubHandle* h = (const StubHandle*)p;
  return h->magic == STUB_MAGIC ? h->id : -1;
}

static const char* S(const char* s) { return s ? s : "(null)"; }

static int CtxTag(const void* ctx) { return ctx == NULL ? 0 : (ctx == &g_ctx_token ? 1 : -1); }

static int InitCommon(void** context, int* mask, int default_mask) {
  pthread_mutex_lock(&g_mu);
  g_init_thread = pthread_self();
  if (g_log == NULL) {
    const char* prefix = getenv("NCCL_STUB_LOG");
    if (prefix) {
      char path[4096];
      snprintf(path, sizeof path, "%s.%d", prefix, (int)getpid());
      g_log = fopen(path, "w");
      if (g_log) setvbuf(g_log, NULL, _IOLBF, 0);
    }
  }
  g_mask_ptr = mask;
  const char* m = getenv("NCCL_STUB_MASK");
  *mask = m ? atoi(m) : default_mask;
  const char* fail = getenv("NCCL_STUB_INIT_FAIL");
  int failed = fail && strcmp(fail, "1") == 0;
  *context = failed ? NULL : &g_ctx_token;
  return failed;
}

static StubHandle* NewHandle(uint64_t type) {
  StubHandle* h = (StubHandle*)malloc(sizeof *h);
  h->magic = STUB_MAGIC;
  h->id = g_next_id++;
  h->type = type;
  return h; /* never freed: a stop may come before the last record in a buggy driver */
}

/* ---- v5 ---- */
static drv_result_t InitV5(void** context, uint64_t commId, int* mask, const char* commName, int nNodes, int nranks,
                           int rank, drv_logger_t logfn) {
  int failed = InitCommon(context, mask, 4095);
  Log("init abi=5 commId=%" PRIu64 " name=%s nNodes=%d nranks=%d rank=%d logfn=%d mask=%d failed=%d", commId,
      S(commName), nNodes, nranks, rank, logfn != NULL, *mask, failed);
  pthread_mutex_unlock(&g_mu);
  return failed ? 3 : 0;
}

static drv_result_t StartV5(void* ctx, void** eHandle, drv_descr_v5_t* d) {
  pthread_mutex_lock(&g_mu);
  StubHandle* h = NewHandle(d->type);
  char buf[768];
  buf[0] = '\0';
  switch (d->type) {
    case DRV_GROUP_API:
      snprintf(buf, sizeof buf, "depth=%d captured=%d", d->groupApi.groupDepth, (int)d->groupApi.graphCaptured);
      break;
    case DRV_COLL_API:
      snprintf(buf, sizeof buf, "func=%s count=%zu dtype=%s root=%d stream=%d captured=%d", S(d->collApi.func),
               d->collApi.count, S(d->collApi.datatype), d->collApi.root, d->collApi.stream != NULL,
               (int)d->collApi.graphCaptured);
      break;
    case DRV_P2P_API:
      snprintf(buf, sizeof buf, "func=%s count=%zu dtype=%s stream=%d captured=%d", S(d->p2pApi.func), d->p2pApi.count,
               S(d->p2pApi.datatype), d->p2pApi.stream != NULL, (int)d->p2pApi.graphCaptured);
      break;
    case DRV_KERNEL_LAUNCH:
      snprintf(buf, sizeof buf, "stream=%d", d->kernelLaunch.stream != NULL);
      break;
    case DRV_GROUP:
      break;
    case DRV_COLL:
      snprintf(buf, sizeof buf,
               "seq=%" PRIu64
               " func=%s count=%zu dtype=%s root=%d nch=%d nwarps=%d algo=%s proto=%s pgroup=%ld send=%d recv=%d",
               d->coll.seqNumber, S(d->coll.func), d->coll.count, S(d->coll.datatype), d->coll.root, d->coll.nChannels,
               d->coll.nWarps, S(d->coll.algo), S(d->coll.proto), Id(d->coll.parentGroup), d->coll.sendBuff != NULL,
               d->coll.recvBuff != NULL);
      break;
    case DRV_P2P:
      snprintf(buf, sizeof buf, "func=%s count=%zu dtype=%s peer=%d nch=%d pgroup=%ld buff=%d", S(d->p2p.func),
               d->p2p.count, S(d->p2p.datatype), d->p2p.peer, d->p2p.nChannels, Id(d->p2p.parentGroup),
               d->p2p.buff != NULL);
      break;
    case DRV_PROXY_OP:
      snprintf(buf, sizeof buf, "pid_ok=%d ch=%d peer=%d nsteps=%d chunk=%d send=%d", d->proxyOp.pid == getpid(),
               d->proxyOp.channelId, d->proxyOp.peer, d->proxyOp.nSteps, d->proxyOp.chunkSize, d->proxyOp.isSend);
      break;
    case DRV_PROXY_STEP:
      snprintf(buf, sizeof buf, "step=%d", d->proxyStep.step);
      break;
    case DRV_KERNEL_CH:
      snprintf(buf, sizeof buf, "ch=%d ptimer=%" PRIu64, d->kernelCh.channelId, d->kernelCh.pTimer);
      break;
    default:
      snprintf(buf, sizeof buf, "unknown=1");
      break;
  }
  Log("start type=%" PRIu64 " h=%ld parent=%ld rank=%d ctx=%d %s", d->type, h->id, Id(d->parentObj), d->rank,
      CtxTag(ctx), buf);
  *eHandle = h;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static drv_result_t StopAny(void* eHandle) {
  pthread_mutex_lock(&g_mu);
  Log("stop h=%ld", Id(eHandle));
  const char* seq = getenv("NCCL_STUB_MASK_SEQUENCE");
  if (seq && eHandle && Id(eHandle) > 0 && ((StubHandle*)eHandle)->type == DRV_GROUP && g_mask_ptr) {
    long i = g_group_stops++;
    const char* c = seq;
    for (long k = 0; k < i && c; ++k) { /* skip to the i-th entry */
      c = strchr(c, ',');
      if (c) ++c;
    }
    if (c && *c) {
      int m = atoi(c);
      __atomic_store_n(g_mask_ptr, m, __ATOMIC_RELAXED);
      Log("setmask mask=%d", m);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static drv_result_t RecordV5(void* eHandle, drv_state_t s, drv_state_args_v5_t* a) {
  pthread_mutex_lock(&g_mu);
  if (a == NULL)
    Log("record h=%ld state=%d args=null", Id(eHandle), (int)s);
  else if (s == DRV_ST_KERNEL_CH_STOP)
    Log("record h=%ld state=%d ptimer=%" PRIu64, Id(eHandle), (int)s, a->kernelCh.pTimer);
  else
    Log("record h=%ld state=%d transSize=%zu", Id(eHandle), (int)s, a->proxyStep.transSize);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static drv_result_t FinalizeAny(void* ctx) {
  pthread_mutex_lock(&g_mu);
  Log("finalize ctx=%d", CtxTag(ctx));
  if (g_log) fclose(g_log);
  g_log = NULL;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

/* ---- v4 ---- */
static drv_result_t InitV4(void** context, int* mask, const char* commName, uint64_t commHash, int nNodes, int nranks,
                           int rank, drv_logger_t logfn) {
  int failed = InitCommon(context, mask, 255);
  Log("init abi=4 commId=%" PRIu64 " name=%s nNodes=%d nranks=%d rank=%d logfn=%d mask=%d failed=%d", commHash,
      S(commName), nNodes, nranks, rank, logfn != NULL, *mask, failed);
  pthread_mutex_unlock(&g_mu);
  return failed ? 3 : 0;
}

static drv_result_t StartV4(void* ctx, void** eHandle, drv_descr_v4_t* d) {
  /* Re-expressed as a v5 descriptor for one logging path; the type field is 1 byte here. */
  drv_descr_v5_t e;
  memset(&e, 0, sizeof e);
  e.type = d->type;
  e.parentObj = d->parentObj;
  e.rank = d->rank;
  switch (d->type) {
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
      e.coll.parentGroup = NULL;
      break;
    case DRV_P2P:
      e.p2p.func = d->p2p.func;
      e.p2p.buff = d->p2p.buff;
      e.p2p.datatype = d->p2p.datatype;
      e.p2p.count = d->p2p.count;
      e.p2p.peer = d->p2p.peer;
      e.p2p.nChannels = d->p2p.nChannels;
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
    case DRV_GROUP:
      break;
    default:
      e.type = 1u << 20;
      break; /* not a v4 type: logged as unknown */
  }
  return StartV5(ctx, eHandle, &e);
}

/* ---- v2 ---- */
static drv_result_t InitV2(void** context, int* mask) {
  int failed = InitCommon(context, mask, 63);
  /* v2's init has no rank: log Open MPI's, so the self-test can tell whose log this is. */
  const char* envrank = getenv("OMPI_COMM_WORLD_RANK");
  Log("init abi=2 mask=%d failed=%d envrank=%s", *mask, failed, envrank ? envrank : "-1");
  pthread_mutex_unlock(&g_mu);
  return failed ? 3 : 0;
}

static drv_result_t StartV2(void* ctx, void** eHandle, drv_descr_v2_t* d) {
  pthread_mutex_lock(&g_mu);
  StubHandle* h = NewHandle(d->type);
  char buf[768];
  buf[0] = '\0';
  switch (d->type) {
    case DRV_GROUP:
      break;
    case DRV_COLL:
      snprintf(buf, sizeof buf,
               "name=%s hash=%" PRIu64 " seq=%" PRIu64
               " func=%s count=%zu dtype=%s root=%d traffic=%zu nch=%d nwarps=%d algo=%s proto=%s",
               S(d->coll.name), d->coll.commHash, d->coll.seqNumber, S(d->coll.func), d->coll.count,
               S(d->coll.datatype), d->coll.root, d->coll.trafficBytes, d->coll.nMaxChannels, d->coll.nWarps,
               S(d->coll.algo), S(d->coll.proto));
      break;
    case DRV_P2P:
      snprintf(buf, sizeof buf, "name=%s hash=%" PRIu64 " func=%s count=%zu dtype=%s peer=%d", S(d->p2p.name),
               d->p2p.commHash, S(d->p2p.func), d->p2p.count, S(d->p2p.datatype), d->p2p.peer);
      break;
    case DRV_PROXY_OP:
      snprintf(buf, sizeof buf, "pid_ok=%d ch=%d peer=%d nsteps=%d chunk=%d send=%d", d->proxyOp.pid == getpid(),
               d->proxyOp.channelId, d->proxyOp.peer, d->proxyOp.nSteps, d->proxyOp.chunkSize, d->proxyOp.isSend);
      break;
    case DRV_PROXY_STEP:
      snprintf(buf, sizeof buf, "step=%d", d->proxyStep.step);
      break;
    default:
      snprintf(buf, sizeof buf, "unknown=1");
      break;
  }
  Log("start type=%d h=%ld parent=%ld rank=%d ctx=%d %s", (int)d->type, h->id, Id(d->parentObj), d->rank, CtxTag(ctx),
      buf);
  *eHandle = h;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static drv_result_t RecordV2(void* eHandle, drv_state_t s, drv_state_args_v2_t* a) {
  pthread_mutex_lock(&g_mu);
  if (a == NULL)
    Log("record h=%ld state=%d args=null", Id(eHandle), (int)s);
  else
    Log("record h=%ld state=%d steps=%d transSize=%zu", Id(eHandle), (int)s, a->proxyOp.steps, a->proxyOp.transSize);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

#define STUB_EXPORT __attribute__((visibility("default")))
STUB_EXPORT const drv_profiler_v5_t ncclProfiler_v5 = {"commprof-test-stub", InitV5, StartV5, StopAny, RecordV5,
                                                       FinalizeAny};
STUB_EXPORT const drv_profiler_v4_t ncclProfiler_v4 = {"commprof-test-stub", InitV4, StartV4, StopAny, RecordV5,
                                                       FinalizeAny};
STUB_EXPORT const drv_profiler_v2_t ncclProfiler_v2 = {"commprof-test-stub", InitV2, StartV2, StopAny, RecordV2,
                                                       FinalizeAny};
