// The exported tables ncclProfiler_v5/_v4/_v2 (docs/nccl-plugin.md §1, §7): thin C shims that normalise each
// version's descriptor and call the one implementation in profiler_plugin.cc, plus the sink that
// records through libcommprof.so's runtime. Only these three data objects leave the library
// (nccl_hooks/exports.map, -fvisibility=hidden).
#include <dlfcn.h>

#include <cstring>

#include "collector/internal_api.h"
#include "core/config.h"
#include "nccl_hooks/nccl_profiler_abi.h"
#include "nccl_hooks/profiler_plugin.h"

namespace commprof::nccl {
namespace {

class RuntimeSink final : public RecordSink {
 public:
  void Record(const commprof_event& e) override { commprof_internal_record(&e); }
  uint32_t Intern(const char* text) override { return commprof_internal_intern(text); }
  uint64_t Now() override { return commprof_internal_now(); }
  void AddCounter(const char* name, uint64_t delta) override { commprof_internal_add_counter(name, delta); }
  bool CapturesStacks() override { return commprof_internal_stacks() != 0; }
  void CallSite(const commprof_event& api) override { commprof_internal_call_site(&api); }
  void AddInflightProvider(InflightProvider provider, void* ctx) override {
    commprof_internal_add_inflight_provider(provider, ctx);
  }
  void RemoveInflightProvider(void* ctx) override { commprof_internal_remove_inflight_provider(ctx); }
};

// The loader needs one sink object for the library's lifetime: stateless, so one constant.
RuntimeSink g_sink;

// The CUDA device of the calling thread's current context, through libcuda.so.1 if NCCL already
// loaded it (init runs on a thread with the communicator's device current); 0 otherwise.
uint16_t CurrentDevice() {
  void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda == nullptr) {
    return 0;
  }
  using GetDevice = int (*)(int*);
  auto fn = reinterpret_cast<GetDevice>(::dlsym(cuda, "cuCtxGetDevice"));
  int dev = 0;
  uint16_t out = 0;
  if (fn != nullptr && fn(&dev) == 0 && dev >= 0 && dev < 0xFFFF) {
    out = static_cast<uint16_t>(dev);
  }
  ::dlclose(cuda);
  return out;
}

PluginContext* Init(AbiVersion version, const CommInfo& info, int* mask) {
  // The plugin may be loaded before MPI_Init: make the runtime now. Not a profiled process: ask
  // NCCL for no events at all and give it a NULL context (it tolerates one), so a plugin left in
  // NCCL_PROFILER_PLUGIN costs nothing outside commprof (or in a run without the nccl activity).
  if (commprof_internal_attach(commprof::kActivityNccl) == 0) {
    if (mask != nullptr) {
      __atomic_store_n(mask, 0, __ATOMIC_RELAXED);
    }
    return nullptr;
  }
  PluginOptions options = PluginOptionsFromEnv();
  // The mask is one process-global int shared by every communicator (docs/nccl-plugin.md §2a): atomic store.
  if (mask != nullptr) {
    __atomic_store_n(mask, ActivationMask(version, options), __ATOMIC_RELAXED);
  }
  return CreateContext(version, info, &g_sink, options);
}

CpNcclResult InitV5(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks, int rank,
                    CpNcclDebugLogger) {
  if (context == nullptr) {
    return kCpNcclSuccess;
  }
  CommInfo info{true, comm_id, name, nnodes, nranks, rank, CurrentDevice()};
  *context = Init(AbiVersion::kV5, info, mask);
  return kCpNcclSuccess;
}

CpNcclResult InitV4(void** context, int* mask, const char* name, uint64_t comm_hash, int nnodes, int nranks, int rank,
                    CpNcclDebugLogger) {
  if (context == nullptr) {
    return kCpNcclSuccess;
  }
  CommInfo info{true, comm_hash, name, nnodes, nranks, rank, CurrentDevice()};
  *context = Init(AbiVersion::kV4, info, mask);
  return kCpNcclSuccess;
}

CpNcclResult InitV2(void** context, int* mask) {
  if (context == nullptr) {
    return kCpNcclSuccess;
  }
  CommInfo info;
  info.device = CurrentDevice();
  *context = Init(AbiVersion::kV2, info, mask);
  return kCpNcclSuccess;
}

// v5 and v4 share every union member we read at the same offsets; only the header type differs.
template <typename D>
void FillCommon(EventDescr& e, const D& d) {
  e.parent = d.parentObj;
  e.rank = d.rank;
  switch (e.type) {
    case kCpNcclColl:
      e.seq_number = d.coll.seqNumber;
      e.func = d.coll.func;
      e.count = d.coll.count;
      e.root = d.coll.root;
      e.datatype = d.coll.datatype;
      e.n_channels = d.coll.nChannels;
      e.algo = d.coll.algo;
      e.proto = d.coll.proto;
      break;
    case kCpNcclP2p:
      e.func = d.p2p.func;
      e.datatype = d.p2p.datatype;
      e.count = d.p2p.count;
      e.peer = d.p2p.peer;
      e.n_channels = d.p2p.nChannels;
      break;
    case kCpNcclProxyOp:
      e.pid = d.proxyOp.pid;
      e.channel_id = d.proxyOp.channelId;
      e.peer = d.proxyOp.peer;
      e.is_send = d.proxyOp.isSend;
      break;
    case kCpNcclProxyStep:
      e.step = d.proxyStep.step;
      break;
    case kCpNcclKernelCh:
      e.channel_id = d.kernelCh.channelId;
      e.ptimer = d.kernelCh.pTimer;
      break;
    default:
      break;
  }
}

CpNcclResult StartV5(void* context, void** handle, CpNcclEventDescrV5* d) {
  if (handle == nullptr) {
    return kCpNcclSuccess;
  }
  *handle = nullptr;
  if (d == nullptr || context == nullptr) {
    return kCpNcclSuccess;
  }
  EventDescr e;
  e.type = d->type;
  FillCommon(e, *d);
  switch (d->type) {
    case kCpNcclGroupApi:
      e.group_depth = d->groupApi.groupDepth;
      break;
    case kCpNcclCollApi:
      e.func = d->collApi.func;
      e.count = d->collApi.count;
      e.datatype = d->collApi.datatype;
      e.root = d->collApi.root;
      break;
    case kCpNcclP2pApi:
      e.func = d->p2pApi.func;
      e.count = d->p2pApi.count;
      e.datatype = d->p2pApi.datatype;
      break;
    default:
      break;
  }
  StartEvent(static_cast<PluginContext*>(context), handle, e);
  return kCpNcclSuccess;
}

CpNcclResult StartV4(void* context, void** handle, CpNcclEventDescrV4* d) {
  if (handle == nullptr) {
    return kCpNcclSuccess;
  }
  *handle = nullptr;  // the v4 adapter does not clear it (docs/nccl-plugin.md §7)
  if (d == nullptr || context == nullptr) {
    return kCpNcclSuccess;
  }
  EventDescr e;
  e.type = d->type;
  FillCommon(e, *d);
  StartEvent(static_cast<PluginContext*>(context), handle, e);
  return kCpNcclSuccess;
}

CpNcclResult StartV2(void* context, void** handle, CpNcclEventDescrV2* d) {
  if (handle == nullptr) {
    return kCpNcclSuccess;
  }
  *handle = nullptr;
  if (d == nullptr || context == nullptr) {
    return kCpNcclSuccess;
  }
  EventDescr e;
  e.type = d->type;
  e.parent = d->parentObj;
  e.rank = d->rank;
  switch (d->type) {
    case kCpNcclColl:
      e.comm_hash = d->coll.commHash;
      e.seq_number = d->coll.seqNumber;
      e.func = d->coll.func;
      e.count = d->coll.count;
      e.root = d->coll.root;
      e.datatype = d->coll.datatype;
      e.n_channels = d->coll.nMaxChannels;
      e.algo = d->coll.algo;
      e.proto = d->coll.proto;
      break;
    case kCpNcclP2p:
      e.comm_hash = d->p2p.commHash;
      e.func = d->p2p.func;
      e.datatype = d->p2p.datatype;
      e.count = d->p2p.count;
      e.peer = d->p2p.peer;
      break;
    case kCpNcclProxyOp:
      e.pid = d->proxyOp.pid;
      e.channel_id = d->proxyOp.channelId;
      e.peer = d->proxyOp.peer;
      e.is_send = d->proxyOp.isSend;
      break;
    case kCpNcclProxyStep:
      e.step = d->proxyStep.step;
      break;
    default:
      break;
  }
  StartEvent(static_cast<PluginContext*>(context), handle, e);
  return kCpNcclSuccess;
}

CpNcclResult Stop(void* handle) {
  StopEvent(handle);
  return kCpNcclSuccess;
}

CpNcclResult StateV5(void* handle, CpNcclEventState state, CpNcclStateArgsV5* args) {
  // We read kernelCh.pTimer of state 22 and proxyStep.transSize of the ProxyStep states (8-12,
  // 20); GroupApi states pass NULL args (docs/nccl-plugin.md §2a).
  if (args != nullptr && state == kCpNcclStateKernelChStop) {
    RecordEventState(handle, state, args->kernelCh.pTimer, true);
  } else if (args != nullptr && ((state >= kCpNcclStateProxyStepFirst && state <= kCpNcclStateProxyStepLast) ||
                                 state == kCpNcclStateProxyStepSendPeerWait)) {
    RecordEventState(handle, state, args->proxyStep.transSize, true);
  } else {
    RecordEventState(handle, state, 0, false);
  }
  return kCpNcclSuccess;
}

CpNcclResult StateV2(void* handle, CpNcclEventState state, CpNcclStateArgsV2* args) {
  // 2.24/2.25: the ProxyOp states 0-7 carry proxyOp{transSize, steps}; ProxyStep states pass NULL
  // (docs/nccl-plugin.md §2c).
  bool has = args != nullptr && state >= kCpNcclStateProxyOpFirst && state <= kCpNcclStateProxyOpLast;
  RecordEventState(handle, state, has ? args->proxyOp.transSize : 0, has);
  return kCpNcclSuccess;
}

CpNcclResult Finalize(void* context) {
  FinalizeContext(static_cast<PluginContext*>(context));
  return kCpNcclSuccess;
}

}  // namespace
}  // namespace commprof::nccl

extern "C" {

__attribute__((visibility("default")))
CpNcclProfilerV5 ncclProfiler_v5 = {"commprof",           commprof::nccl::InitV5,  commprof::nccl::StartV5,
                                    commprof::nccl::Stop, commprof::nccl::StateV5, commprof::nccl::Finalize};

__attribute__((visibility("default")))
CpNcclProfilerV4 ncclProfiler_v4 = {"commprof",           commprof::nccl::InitV4,  commprof::nccl::StartV4,
                                    commprof::nccl::Stop, commprof::nccl::StateV5, commprof::nccl::Finalize};

__attribute__((visibility("default")))
CpNcclProfilerV2 ncclProfiler_v2 = {"commprof",           commprof::nccl::InitV2,  commprof::nccl::StartV2,
                                    commprof::nccl::Stop, commprof::nccl::StateV2, commprof::nccl::Finalize};

}  // extern "C"
