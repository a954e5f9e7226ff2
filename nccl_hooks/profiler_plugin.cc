#include "nccl_hooks/profiler_plugin.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "collector/inflight.h"
#include "nccl_hooks/nccl_profiler_abi.h"

namespace commprof::nccl {

namespace {

struct NameCode {
  const char* name;
  uint8_t code;
};
// NCCL's string values (docs/nccl-plugin.md §2a).
constexpr NameCode kOps[] = {
    {"AllReduce", COMMPROF_OP_ALLREDUCE},
    {"AllGather", COMMPROF_OP_ALLGATHER},
    {"Broadcast", COMMPROF_OP_BCAST},
    {"Reduce", COMMPROF_OP_REDUCE},
    {"ReduceScatter", COMMPROF_OP_REDUCE_SCATTER},
    {"Send", COMMPROF_OP_SEND},
    {"Recv", COMMPROF_OP_RECV},
    {"AlltoAll", COMMPROF_OP_ALLTOALL},
    {"Gather", COMMPROF_OP_GATHER},
    {"Scatter", COMMPROF_OP_SCATTER},
    {"SendRecv", COMMPROF_OP_SENDRECV},
};
constexpr size_t kNumOps = sizeof(kOps) / sizeof(kOps[0]);

struct TypeInfo {
  const char* name;
  uint8_t code;
  uint32_t size;
};
constexpr TypeInfo kTypes[] = {
    {"ncclInt8", COMMPROF_DT_INT8, 1},         {"ncclInt32", COMMPROF_DT_INT32, 4},
    {"ncclUint32", COMMPROF_DT_UINT32, 4},     {"ncclInt64", COMMPROF_DT_INT64, 8},
    {"ncclUint64", COMMPROF_DT_UINT64, 8},     {"ncclFloat16", COMMPROF_DT_FLOAT16, 2},
    {"ncclFloat32", COMMPROF_DT_FLOAT32, 4},   {"ncclFloat64", COMMPROF_DT_FLOAT64, 8},
    {"ncclBfloat16", COMMPROF_DT_BFLOAT16, 2}, {"ncclFloat8e4m3", COMMPROF_DT_OTHER, 1},
    {"ncclFloat8e5m2", COMMPROF_DT_OTHER, 1},  {"Unknown", COMMPROF_DT_UINT8, 1},
};

// Name lookups compare lengths first: one strlen, then memcmp only against names of that length
// (the datatype names share the prefix "ncclFloat", which makes strcmp walk far on each).
constexpr size_t Len(const char* s) { return std::char_traits<char>::length(s); }
constexpr auto kOpLens = [] {
  std::array<size_t, kNumOps> a{};
  for (size_t i = 0; i < kNumOps; ++i) {
    a[i] = Len(kOps[i].name);
  }
  return a;
}();
constexpr size_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);
constexpr auto kTypeLens = [] {
  std::array<size_t, kNumTypes> a{};
  for (size_t i = 0; i < kNumTypes; ++i) {
    a[i] = Len(kTypes[i].name);
  }
  return a;
}();

int OpIndex(const char* func) {
  if (func == nullptr) {
    return -1;
  }
  const size_t n = std::strlen(func);
  for (size_t i = 0; i < kNumOps; ++i) {
    if (kOpLens[i] == n && std::memcmp(func, kOps[i].name, n) == 0) {
      return static_cast<int>(i);
    }
  }
  return -1;
}
uint8_t OpCodeOf(int op_index) { return op_index >= 0 ? kOps[op_index].code : static_cast<uint8_t>(COMMPROF_OP_NONE); }

// One lookup for both the code and the size of an NCCL datatype string (DatatypeCode, DatatypeSize).
struct TypeLookup {
  uint8_t code;
  uint32_t size;
};
TypeLookup LookupType(const char* datatype) {
  if (datatype == nullptr) {
    return {COMMPROF_DT_NONE, 1};
  }
  const size_t n = std::strlen(datatype);
  for (size_t i = 0; i < kNumTypes; ++i) {
    if (kTypeLens[i] == n && std::memcmp(datatype, kTypes[i].name, n) == 0) {
      return {kTypes[i].code, kTypes[i].size};
    }
  }
  return {COMMPROF_DT_OTHER, 1};
}

bool Rooted(uint8_t op) { return op == COMMPROF_OP_BCAST || op == COMMPROF_OP_REDUCE; }

template <typename T>
void AtomicMin(std::atomic<T>& a, T v) {
  T cur = a.load(std::memory_order_relaxed);
  while ((cur == 0 || v < cur) && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
template <typename T>
void AtomicMax(std::atomic<T>& a, T v) {
  T cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

enum Counter : int {
  kPoolEmpty,       // an event got no slot (pool exhausted): NULL handle, nothing recorded
  kStaleParent,     // a child whose parent slot was already completed/recycled
  kForeignProxyOp,  // a PXN proxy op from another process (its pointers are not ours)
  kNoTiming,        // a collective completed with neither kernel nor proxy timing
  kUnfinished,      // still pending at finalize: written with the INCOMPLETE flag
  kPeerOutOfRange,  // a p2p peer outside the per-peer counters
  kCounterCount
};
constexpr const char* kCounterNames[kCounterCount] = {
    "nccl_pool_empty",     "nccl_stale_parent",           "nccl_foreign_proxy_op",
    "nccl_coll_no_timing", "nccl_unfinished_at_finalize", "nccl_peer_out_of_range"};

constexpr int kV2Peers = 4096;  // v2 init gets no nranks: per-peer counters for this many peers

// PXN proxy events from another process arrive with that process's context pointer, so they
// cannot be counted in "our" context: one process-wide count, reported by the next finalize.
std::atomic<uint64_t> g_foreign_proxy_events{0};
// This process's pid, read at each communicator init rather than by a system call per ProxyOp
// (init runs in the process that owns the communicator, after any fork).
std::atomic<int> g_pid{0};

// The direction of a proxy op or step in its record's `reduce_op` (docs/file-format.md).
constexpr uint8_t kProxySend = 1, kProxyRecv = 2;

}  // namespace

struct Slot {
  std::atomic<uint32_t> next{0};  // free list: index + 1 of the next free slot, 0 = none
  std::atomic<uint32_t> gen{0};   // bumped on every release
  std::atomic<bool> live{false};
  PluginContext* ctx = nullptr;
  uint64_t type = 0;
  uint64_t host_start = 0;
  // API, Coll, P2p (and copied into children for their records)
  uint64_t comm_id = 0;
  uint64_t bytes = 0;
  uint64_t seq = 0;
  int32_t peer = COMMPROF_NO_PEER;
  uint32_t name_id = 0;
  uint8_t op = 0;
  uint8_t dtype = 0;
  uint8_t n_channels = 0;
  uint8_t algo_proto = 0;  // AlgoProtoCode, for collectives
  uint8_t is_send = 0;     // ProxyOp, ProxyStep: the direction
  int32_t step = 0;        // ProxyStep: NCCL's step number
  // ProxyOp: bytes NCCL reported moved (the sum of its steps' transSize; v2: its own states' last
  // transSize); ProxyStep: its transSize
  std::atomic<uint64_t> trans_bytes{0};
  bool kernel_timing = false;
  std::atomic<bool> proxy_seen{false};
  // Coll, P2p completion: one word, so a kernel channel's stop is one atomic update of it.
  // Low 32 bits: references still pending (our stop, each kernel channel or the first proxy op,
  // each live proxy op); the last to drop one completes the operation. High 32 bits: kernel
  // channels stopped (only the first nChannels drop a reference).
  std::atomic<uint64_t> refs{0};
  std::atomic<uint64_t> gpu_first{0}, gpu_last{0};  // raw pTimer: earliest start, latest stop
  std::atomic<uint64_t> kch_host_first{0}, kch_host_last{0};
  std::atomic<uint64_t> proxy_first{0}, proxy_last{0};
  // children (KernelCh, ProxyOp)
  Slot* parent = nullptr;
  uint32_t parent_gen = 0;
  uint8_t channel = 0;
  uint64_t gpu_start = 0;
  uint64_t gpu_stop = 0;
  // Coll, P2p: the record it will write, from its start until it is written, for the hang
  // diagnosis's reader on another thread (InflightOps).
  EventSeqlock inflight;
};

class PluginContext {
 public:
  PluginContext(AbiVersion version, const CommInfo& info, RecordSink* sink, const PluginOptions& options)
      : version_(version),
        info_(info),
        sink_(sink),
        mask_(ActivationMask(version, options)),
        proxy_detail_(options.proxy_detail),
        stacks_(sink->CapturesStacks()),
        slots_(options.pool_events >= 2 ? options.pool_events : 2),
        p2p_seq_(2 * static_cast<size_t>(info.known && info.nranks > 0 ? info.nranks : kV2Peers)),
        clock_(options.calibration) {
    // Two free lists: parents (API, Coll, P2p) in [0, parents_), their short-lived children
    // (KernelCh, ProxyOp) in the last quarter, so a burst of enqueued collectives can never leave
    // no slot for the kernel channels that complete them (then nothing would be freed again).
    const auto n = static_cast<uint32_t>(slots_.size());
    parents_ = n - std::max<uint32_t>(1, n / 4);
    for (uint32_t i = 0; i < n; ++i) {
      slots_[i].ctx = this;
      bool last = i + 1 == parents_ || i + 1 == n;
      slots_[i].next.store(last ? 0 : i + 2, std::memory_order_relaxed);
    }
    free_head_[0].store(1, std::memory_order_relaxed);
    free_head_[1].store(parents_ + 1, std::memory_order_relaxed);
    for (size_t i = 0; i < kNumOps; ++i) {
      op_name_[i] = sink_->Intern(kOps[i].name);
      api_name_[i] = sink_->Intern((std::string("nccl") + kOps[i].name).c_str());
    }
    group_name_ = sink_->Intern("ncclGroup");
    launch_name_ = sink_->Intern("ncclKernelLaunch");
    unknown_name_ = sink_->Intern("ncclUnknown");
    comm_id_.store(info.comm_hash, std::memory_order_relaxed);
    if (info.known) {
      commprof_event e = Base(COMMPROF_KIND_MPI_COMM, sink_->Now());
      e.subtype = COMMPROF_OP_NCCL_COMM_INIT;
      e.comm_id = info.comm_hash;
      e.peer = info.rank;
      e.bytes = static_cast<uint64_t>(info.nranks);
      e.name_id = sink_->Intern(info.name != nullptr ? info.name : "");
      e.device = info.device;
      sink_->Record(e);
    }
    sink_->AddInflightProvider([](void* ctx, RecordSink::InflightEmit emit,
                                  void* arg) { InflightOps(static_cast<PluginContext*>(ctx), emit, arg); },
                               this);
  }

  void Start(void** handle, const EventDescr& d);
  void ForEachInflight(RecordSink::InflightEmit emit, void* arg) const;
  void Unregister() { sink_->RemoveInflightProvider(this); }
  void Stop(Slot* s);
  void State(Slot* s, int state, uint64_t ptimer, bool has_ptimer);
  void Finalize();

 private:
  Slot* Acquire(uint64_t type) {
    const bool child = type == kCpNcclKernelCh || type == kCpNcclProxyOp || type == kCpNcclProxyStep;
    std::atomic<uint64_t>& head = free_head_[child ? 1 : 0];
    uint64_t h = head.load(std::memory_order_acquire);
    for (;;) {
      auto idx1 = static_cast<uint32_t>(h);
      if (idx1 == 0) {
        Count(kPoolEmpty);
        return nullptr;
      }
      Slot& s = slots_[idx1 - 1];
      uint64_t next = s.next.load(std::memory_order_relaxed);
      uint64_t nh = (((h >> 32) + 1) << 32) | next;  // tag against ABA
      if (head.compare_exchange_weak(h, nh, std::memory_order_acq_rel)) {
        s.type = type;
        s.parent = nullptr;
        s.refs.store(0, std::memory_order_relaxed);
        s.gpu_first.store(0, std::memory_order_relaxed);
        s.gpu_last.store(0, std::memory_order_relaxed);
        s.kch_host_first.store(0, std::memory_order_relaxed);
        s.kch_host_last.store(0, std::memory_order_relaxed);
        s.proxy_first.store(0, std::memory_order_relaxed);
        s.proxy_last.store(0, std::memory_order_relaxed);
        s.trans_bytes.store(0, std::memory_order_relaxed);
        s.gpu_start = s.gpu_stop = 0;
        s.live.store(true, std::memory_order_release);
        return &s;
      }
    }
  }
  void Release(Slot* s) {
    s->live.store(false, std::memory_order_relaxed);
    s->gen.store(s->gen.load(std::memory_order_relaxed) + 1, std::memory_order_release);  // owner only
    auto idx1 = static_cast<uint32_t>(s - slots_.data()) + 1;
    std::atomic<uint64_t>& head = free_head_[idx1 > parents_ ? 1 : 0];
    uint64_t h = head.load(std::memory_order_acquire);
    for (;;) {
      s->next.store(static_cast<uint32_t>(h), std::memory_order_relaxed);
      uint64_t nh = (((h >> 32) + 1) << 32) | idx1;
      if (head.compare_exchange_weak(h, nh, std::memory_order_acq_rel)) {
        return;
      }
    }
  }
  void Count(Counter c) { counters_[c].fetch_add(1, std::memory_order_relaxed); }

  commprof_event Base(uint8_t kind, uint64_t start) const {
    commprof_event e{};
    e.kind = kind;
    e.start_ns = start;
    e.end_ns = start;
    e.peer = COMMPROF_NO_PEER;
    e.device = info_.device;
    return e;
  }
  // Base plus what every record of an operation carries from its slot (API, channel, collective).
  // A collective's kind 17 record as far as its start knows it (times: the Coll start).
  commprof_event CollRecord(const Slot& s) const {
    commprof_event e = FromSlot(COMMPROF_KIND_NCCL_COLLECTIVE, s);
    e.bytes = s.bytes;
    e.datatype = s.dtype;
    e.correlation = s.n_channels;
    e.reduce_op = s.algo_proto;
    return e;
  }
  commprof_event FromSlot(uint8_t kind, const Slot& s) const {
    commprof_event e = Base(kind, s.host_start);
    e.comm_id = s.comm_id;
    e.seq = s.seq;
    e.subtype = s.op;
    e.peer = s.peer;
    e.name_id = s.name_id;
    return e;
  }
  uint32_t NameOf(int op_index, bool api, const char* func) {
    if (op_index >= 0) {
      return api ? api_name_[op_index] : op_name_[op_index];
    }
    return func != nullptr ? sink_->Intern(func) : unknown_name_;
  }
  uint64_t CommOf(const EventDescr& d) {
    if (version_ != AbiVersion::kV2) {
      return info_.comm_hash;
    }
    // v2: the hash rides on each Coll/P2p descriptor (0 under the 2.28 adapter).
    if (d.comm_hash != 0) {
      comm_id_.store(d.comm_hash, std::memory_order_relaxed);
    }
    return comm_id_.load(std::memory_order_relaxed);
  }
  // Takes a reference on a live Coll/P2p parent, or fails (stale/recycled/NULL parent).
  bool RefParent(Slot* p) {
    if (p == nullptr || !p->live.load(std::memory_order_acquire) || (p->type & (kCpNcclColl | kCpNcclP2p)) == 0) {
      return false;
    }
    uint64_t cur = p->refs.load(std::memory_order_relaxed);
    while (static_cast<uint32_t>(cur) > 0) {
      if (p->refs.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) {
        return true;
      }
    }
    return false;
  }
  void Unref(Slot* p) {
    if (static_cast<uint32_t>(p->refs.fetch_sub(1, std::memory_order_acq_rel)) == 1) {
      Complete(p, false);
    }
  }
  // A kernel channel of `p` stopped (or found no slot): count it and, if it is one of the first
  // nChannels of a collective timed by its kernel channels, drop its reference; one CAS.
  void ChannelDone(Slot* p) {
    constexpr uint64_t kOneDone = uint64_t{1} << 32;
    uint64_t cur = p->refs.load(std::memory_order_relaxed);
    for (;;) {
      const bool holds = (cur >> 32) < p->n_channels && p->kernel_timing;
      if (p->refs.compare_exchange_weak(cur, cur + kOneDone - (holds ? 1 : 0), std::memory_order_acq_rel)) {
        if (holds && static_cast<uint32_t>(cur) == 1) {
          Complete(p, false);
        }
        return;
      }
    }
  }
  void Complete(Slot* p, bool unfinished);

  const AbiVersion version_;
  const CommInfo info_;
  RecordSink* const sink_;
  const int mask_;
  const bool proxy_detail_;  // record ProxyOp/ProxyStep events (kinds 21, 22)
  const bool stacks_;        // --stacks: a CALL_SITE at each API event's start
  std::vector<Slot> slots_;
  std::atomic<uint64_t> free_head_[2] = {};     // parents, children: (tag << 32) | (index + 1)
  uint32_t parents_ = 0;                        // slots [0, parents_) are for parents
  std::vector<std::atomic<uint64_t>> p2p_seq_;  // [peer * 2 + (recv ? 1 : 0)]
  std::atomic<uint64_t> comm_id_{0};
  std::atomic<uint64_t> counters_[kCounterCount] = {};
  SharedGpuClock clock_;  // KernelCh pTimer -> host clock, shared without a lock
  uint32_t op_name_[kNumOps] = {};
  uint32_t api_name_[kNumOps] = {};
  uint32_t group_name_ = 0, launch_name_ = 0, unknown_name_ = 0;
};

void PluginContext::Start(void** handle, const EventDescr& d) {
  *handle = nullptr;
  const uint64_t t = d.type;
  if ((t & mask_) == 0) {
    return;
  }
  const uint64_t now = sink_->Now();
  if (t == kCpNcclGroupApi || t == kCpNcclKernelLaunch) {
    Slot* s = Acquire(t);
    if (s == nullptr) {
      return;
    }
    s->host_start = now;
    s->comm_id = info_.comm_hash;
    s->op = COMMPROF_OP_NONE;
    s->dtype = COMMPROF_DT_NONE;
    s->bytes = 0;
    s->peer = COMMPROF_NO_PEER;
    s->seq = t == kCpNcclGroupApi ? static_cast<uint64_t>(d.group_depth) : 0;
    s->name_id = t == kCpNcclGroupApi ? group_name_ : launch_name_;
    *handle = s;
    if (stacks_) {
      sink_->CallSite(FromSlot(COMMPROF_KIND_NCCL_API, *s));
    }
  } else if (t == kCpNcclCollApi || t == kCpNcclP2pApi) {
    Slot* s = Acquire(t);
    if (s == nullptr) {
      return;
    }
    const int oi = OpIndex(d.func);
    const TypeLookup type = LookupType(d.datatype);
    s->host_start = now;
    s->comm_id = info_.comm_hash;
    s->op = OpCodeOf(oi);
    s->dtype = type.code;
    s->bytes = static_cast<uint64_t>(d.count) * type.size;
    s->peer = t == kCpNcclCollApi && Rooted(s->op) ? d.root : COMMPROF_NO_PEER;
    s->seq = 0;
    s->name_id = NameOf(oi, true, d.func);
    *handle = s;
    if (stacks_) {
      sink_->CallSite(FromSlot(COMMPROF_KIND_NCCL_API, *s));
    }
  } else if (t == kCpNcclColl || t == kCpNcclP2p) {
    Slot* s = Acquire(t);
    if (s == nullptr) {
      return;
    }
    const int oi = OpIndex(d.func);
    const TypeLookup type = LookupType(d.datatype);
    s->host_start = now;
    s->comm_id = CommOf(d);
    s->op = OpCodeOf(oi);
    s->dtype = type.code;
    s->algo_proto = t == kCpNcclColl ? AlgoProtoCode(d.algo, d.proto) : 0;
    // AllGather/Broadcast Coll events carry bytes as ncclInt8 (docs/nccl-plugin.md §2a): size 1 keeps it right.
    s->bytes = static_cast<uint64_t>(d.count) * type.size;
    s->n_channels = d.n_channels;
    s->name_id = NameOf(oi, false, d.func);
    if (t == kCpNcclColl) {
      s->seq = d.seq_number;
      s->peer = Rooted(s->op) ? d.root : COMMPROF_NO_PEER;
    } else {
      s->peer = d.peer;
      size_t slot = static_cast<size_t>(d.peer) * 2 + (s->op == COMMPROF_OP_RECV ? 1 : 0);
      if (d.peer >= 0 && slot < p2p_seq_.size()) {
        s->seq = p2p_seq_[slot].fetch_add(1, std::memory_order_relaxed);
      } else {
        Count(kPeerOutOfRange);
        s->seq = UINT64_MAX;
      }
    }
    s->kernel_timing = (mask_ & kCpNcclKernelCh) != 0 && d.n_channels > 0;
    // One reference for our own stop, one per kernel channel to come; without kernel timing, one
    // held until the first proxy op arrives (proxy ops may start after the Coll stop, or never:
    // then it completes only at finalize, INCOMPLETE).
    s->proxy_seen.store(false, std::memory_order_relaxed);
    s->refs.store(1u + (s->kernel_timing ? d.n_channels : 1u), std::memory_order_release);
    s->inflight.Store(CollRecord(*s), 0);
    *handle = s;
  } else if (t == kCpNcclKernelCh) {
    auto* p = static_cast<Slot*>(d.parent);
    if (p == nullptr || !p->live.load(std::memory_order_acquire) || (p->type & (kCpNcclColl | kCpNcclP2p)) == 0 ||
        p->ctx != this) {
      Count(kStaleParent);
      return;
    }
    Slot* s = Acquire(t);
    if (s == nullptr) {
      // No slot: the channel counts as done without timing, so its collective still completes.
      ChannelDone(p);
      return;
    }
    s->parent = p;
    s->parent_gen = p->gen.load(std::memory_order_acquire);
    s->comm_id = p->comm_id;
    s->seq = p->seq;
    s->op = p->op;
    s->peer = p->peer;
    s->name_id = p->name_id;
    s->channel = d.channel_id;
    s->host_start = now;
    s->gpu_start = d.ptimer;  // paired with host_start for the calibration at the stop
    *handle = s;
  } else if (t == kCpNcclProxyOp) {
    // (A PXN op from another process was turned away before its context was touched: StartEvent.)
    auto* p = static_cast<Slot*>(d.parent);
    if (p == nullptr || p->ctx != this || !RefParent(p)) {
      Count(kStaleParent);
      return;
    }
    Slot* s = Acquire(t);
    if (s == nullptr) {
      Unref(p);
      return;
    }
    s->parent = p;
    s->parent_gen = p->gen.load(std::memory_order_acquire);
    s->host_start = now;
    s->comm_id = p->comm_id;
    s->seq = p->seq;
    s->op = p->op;
    s->name_id = p->name_id;
    s->peer = d.peer;  // the proxy's peer, not the collective's root
    s->channel = d.channel_id;
    s->is_send = d.is_send != 0 ? 1 : 0;
    AtomicMin(p->proxy_first, now);
    // The first proxy op of a collective without kernel timing drops the reference that waited
    // for it (ours, just taken, keeps the parent alive).
    if (!p->kernel_timing && !p->proxy_seen.exchange(true, std::memory_order_acq_rel)) {
      Unref(p);
    }
    *handle = s;
  } else if (t == kCpNcclProxyStep) {
    // Asked for only with COMMPROF_NCCL_DETAIL=proxy. The step copies what its record needs from
    // its proxy op now, so its stop never depends on the op still being live.
    auto* op = static_cast<Slot*>(d.parent);
    if (op == nullptr || op->ctx != this || !op->live.load(std::memory_order_acquire) || op->type != kCpNcclProxyOp) {
      Count(kStaleParent);
      return;
    }
    Slot* s = Acquire(t);
    if (s == nullptr) {
      return;
    }
    s->parent = op;
    s->parent_gen = op->gen.load(std::memory_order_acquire);
    s->host_start = now;
    s->comm_id = op->comm_id;
    s->seq = op->seq;
    s->op = op->op;
    s->name_id = op->name_id;
    s->peer = op->peer;
    s->channel = op->channel;
    s->is_send = op->is_send;
    s->step = d.step;
    *handle = s;
  }
  // Group (legacy), ProxyCtrl, NetPlugin: nothing recorded, NULL handle.
}

void PluginContext::State(Slot* s, int state, uint64_t value, bool has_value) {
  if (!has_value) {
    return;
  }
  if (s->type == kCpNcclKernelCh && state == kCpNcclStateKernelChStop) {
    // State 22 comes immediately before the stop (docs/nccl-plugin.md §3): the stop pairs the value with its
    // own host reading, which is later still, so the pair stays "late, never early".
    s->gpu_stop = value;
  } else if (s->type == kCpNcclProxyStep || s->type == kCpNcclProxyOp) {
    AtomicMax(s->trans_bytes, value);  // a step repeats its transSize in each state
  }
}

void PluginContext::Stop(Slot* s) {
  // The clock is read only where the stop's time is used (not for a Coll/P2p "enqueued" stop).
  switch (s->type) {
    case kCpNcclGroupApi:
    case kCpNcclKernelLaunch:
    case kCpNcclCollApi:
    case kCpNcclP2pApi: {
      const uint64_t now = sink_->Now();
      commprof_event e = FromSlot(COMMPROF_KIND_NCCL_API, *s);
      e.end_ns = now;
      e.bytes = s->bytes;
      e.datatype = s->dtype;
      sink_->Record(e);
      Release(s);
      return;
    }
    case kCpNcclColl:
    case kCpNcclP2p:
      Unref(s);  // "enqueued": completion comes from the children
      return;
    case kCpNcclKernelCh: {
      const bool gpu_times = s->gpu_start != 0 && s->gpu_stop != 0;
      // The stop's host time pairs with state 22's pTimer while the fit is young (every pair
      // helps it settle) or when the start had no pTimer, and is the fallback end without GPU
      // times. Once the fit is warm, a channel with both GPU times reads no clock at its stop:
      // its start's pair calibrates (docs/nccl-plugin.md).
      const bool stop_pair = !gpu_times || !clock_.warm();
      const uint64_t now = stop_pair ? sink_->Now() : 0;
      Slot* p = s->parent;
      commprof_event e = FromSlot(COMMPROF_KIND_COMM_KERNEL, *s);
      e.end_ns = now;
      if (s->gpu_start != 0 || s->gpu_stop != 0) {
        // The pairs into the lock-free queue (fitted now if due and no other thread is fitting),
        // then the newest published fit converts.
        clock_.Add({s->gpu_start, s->host_start, stop_pair ? s->gpu_stop : 0, now});
        if (gpu_times) {
          const SharedGpuClock::Fit fit = clock_.Current();
          e.start_ns = fit.ToHost(s->gpu_start);
          e.end_ns = fit.ToHost(s->gpu_stop);
        }
      }
      e.correlation = s->channel;
      sink_->Record(e);
      if (p->gen.load(std::memory_order_acquire) == s->parent_gen && p->live.load(std::memory_order_acquire)) {
        if (gpu_times) {
          AtomicMin(p->gpu_first, s->gpu_start);
          AtomicMax(p->gpu_last, s->gpu_stop);
        } else {  // the fallback: host times of the callbacks
          AtomicMin(p->kch_host_first, s->host_start);
          AtomicMax(p->kch_host_last, now);
        }
        // Only the first nChannels stops hold a reference (an extra channel must not free it).
        ChannelDone(p);
      } else {
        Count(kStaleParent);
      }
      Release(s);
      return;
    }
    case kCpNcclProxyOp: {
      const uint64_t now = sink_->Now();
      Slot* p = s->parent;  // referenced at start: still live
      AtomicMax(p->proxy_last, now);
      if (proxy_detail_) {
        commprof_event e = FromSlot(COMMPROF_KIND_NCCL_PROXY_OP, *s);
        e.end_ns = now;
        e.bytes = s->trans_bytes.load(std::memory_order_acquire);
        e.correlation = s->channel;
        e.reduce_op = s->is_send != 0 ? kProxySend : kProxyRecv;
        sink_->Record(e);
      }
      Release(s);
      Unref(p);
      return;
    }
    case kCpNcclProxyStep: {
      commprof_event e = FromSlot(COMMPROF_KIND_NCCL_PROXY_STEP, *s);
      e.end_ns = sink_->Now();
      e.bytes = s->trans_bytes.load(std::memory_order_acquire);
      // channel in the low 8 bits, NCCL's step number above (24 bits; larger steps wrap)
      e.correlation = (static_cast<uint32_t>(s->step) << 8) | s->channel;
      e.reduce_op = s->is_send != 0 ? kProxySend : kProxyRecv;
      sink_->Record(e);
      Slot* op = s->parent;
      if (op->gen.load(std::memory_order_acquire) == s->parent_gen && op->live.load(std::memory_order_acquire)) {
        op->trans_bytes.fetch_add(e.bytes, std::memory_order_acq_rel);
      }
      Release(s);
      return;
    }
    default:
      Release(s);
  }
}

void PluginContext::ForEachInflight(RecordSink::InflightEmit emit, void* arg) const {
  for (uint32_t i = 0; i < parents_; ++i) {
    commprof_event e;
    uint32_t tag = 0;
    if (slots_[i].inflight.Read(e, tag) == EventSeqlock::ReadResult::kCopied) {
      emit(arg, &e);
    }
  }
}

void PluginContext::Complete(Slot* p, bool unfinished) {
  commprof_event e = CollRecord(*p);
  uint64_t g0 = p->gpu_first.load(std::memory_order_acquire), g1 = p->gpu_last.load(std::memory_order_acquire);
  uint64_t k0 = p->kch_host_first.load(std::memory_order_acquire),
           k1 = p->kch_host_last.load(std::memory_order_acquire);
  uint64_t x0 = p->proxy_first.load(std::memory_order_acquire), x1 = p->proxy_last.load(std::memory_order_acquire);
  if (g0 != 0 && g1 != 0) {
    const SharedGpuClock::Fit fit = clock_.Current();
    e.start_ns = fit.ToHost(g0);
    e.end_ns = fit.ToHost(g1);
  } else if (k0 != 0 && k1 != 0) {
    e.start_ns = k0;
    e.end_ns = k1;
  } else if (x0 != 0 && x1 != 0) {
    e.start_ns = x0;
    e.end_ns = x1;
  } else {
    Count(kNoTiming);
    unfinished = true;  // start = end = the Coll start: no completion was observed
  }
  if (unfinished) {
    e.flags = COMMPROF_FLAG_INCOMPLETE;
  }
  sink_->Record(e);
  // Cleared after the record is written: a reader between the two sees it in flight and recorded
  // (a duplicate the diagnosis tolerates), never in neither place.
  p->inflight.Clear();
  Release(p);
}

void PluginContext::Finalize() {
  // NCCL has stopped its proxy thread by now (commFree): what is still pending never completes.
  for (Slot& s : slots_) {
    if (!s.live.load(std::memory_order_acquire)) {
      continue;
    }
    if ((s.type & (kCpNcclColl | kCpNcclP2p)) != 0) {
      Count(kUnfinished);
      Complete(&s, true);
    }
  }
  counters_[kForeignProxyOp].fetch_add(g_foreign_proxy_events.exchange(0, std::memory_order_relaxed),
                                       std::memory_order_relaxed);
  for (int c = 0; c < kCounterCount; ++c) {
    uint64_t v = counters_[c].load(std::memory_order_relaxed);
    if (v != 0) {
      sink_->AddCounter(kCounterNames[c], v);
    }
  }
  clock_.Flush();  // the pairs still queued
  sink_->AddCounter("nccl_calibration_pairs", clock_.pairs_seen());
  sink_->AddCounter("nccl_calibration_outliers", clock_.outliers_rejected());
  if (clock_.samples_dropped() != 0) {
    sink_->AddCounter("nccl_calibration_dropped", clock_.samples_dropped());
  }
}

// ------------------------------------------------------------------ free functions

PluginOptions PluginOptionsFromEnv() {
  PluginOptions o;
  if (const char* d = std::getenv("COMMPROF_NCCL_DETAIL"); d != nullptr && std::strcmp(d, "proxy") == 0) {
    o.proxy_detail = true;
  }
  if (const char* n = std::getenv("COMMPROF_NCCL_EVENTS"); n != nullptr) {
    char* end = nullptr;
    unsigned long v = std::strtoul(n, &end, 10);
    if (end != n && *end == '\0' && v >= 64 && v <= (1ul << 24)) {
      o.pool_events = static_cast<uint32_t>(v);
    }
  }
  return o;
}

int ActivationMask(AbiVersion version, const PluginOptions& options) {
  uint64_t m = 0;
  switch (version) {
    case AbiVersion::kV5:
      m = kCpNcclGroupApi | kCpNcclCollApi | kCpNcclP2pApi | kCpNcclKernelLaunch | kCpNcclColl | kCpNcclP2p |
          kCpNcclKernelCh;
      break;
    case AbiVersion::kV4:
      m = kCpNcclColl | kCpNcclP2p | kCpNcclKernelCh;
      break;
    case AbiVersion::kV2:
      m = kCpNcclColl | kCpNcclP2p | kCpNcclProxyOp;  // no KernelCh before v3: proxy ops time completion
      break;
  }
  if (options.proxy_detail) {
    m |= kCpNcclProxyOp | kCpNcclProxyStep;
  }
  return static_cast<int>(m);
}

PluginContext* CreateContext(AbiVersion version, const CommInfo& info, RecordSink* sink, const PluginOptions& options) {
  if (sink == nullptr) {
    return nullptr;
  }
  g_pid.store(static_cast<int>(::getpid()), std::memory_order_relaxed);
  return new (std::nothrow) PluginContext(version, info, sink, options);
}

bool ForeignProxyEvent(const EventDescr& d) {
  // A foreign op got a NULL handle from us, so its steps arrive with a NULL parent.
  if (d.type == kCpNcclProxyStep) {
    return d.parent == nullptr;
  }
  if (d.type != kCpNcclProxyOp) {
    return false;
  }
  int pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<int>(::getpid());
  }
  if (d.pid == pid) {
    return false;
  }
  g_foreign_proxy_events.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void StartEvent(PluginContext* ctx, void** handle, const EventDescr& d) {
  if (handle == nullptr) {
    return;
  }
  *handle = nullptr;
  // PXN: the context may be another process's pointer; decide from the descriptor alone.
  if (ctx != nullptr && !ForeignProxyEvent(d)) {
    ctx->Start(handle, d);
  }
}

void StopEvent(void* handle) {
  if (handle != nullptr) {
    auto* s = static_cast<Slot*>(handle);
    s->ctx->Stop(s);
  }
}

void RecordEventState(void* handle, int state, uint64_t value, bool has_value) {
  if (handle != nullptr) {
    auto* s = static_cast<Slot*>(handle);
    s->ctx->State(s, state, value, has_value);
  }
}

void InflightOps(PluginContext* ctx, RecordSink::InflightEmit emit, void* arg) {
  if (ctx != nullptr && emit != nullptr) {
    ctx->ForEachInflight(emit, arg);
  }
}

void FinalizeContext(PluginContext* ctx) {
  if (ctx == nullptr) {
    return;
  }
  ctx->Unregister();  // no reader of its slots from here on
  ctx->Finalize();
  delete ctx;
}

uint32_t DatatypeSize(const char* datatype) { return LookupType(datatype).size; }

uint8_t DatatypeCode(const char* datatype) { return LookupType(datatype).code; }

uint8_t AlgoProtoCode(const char* algo, const char* proto) {
  static constexpr const char* kAlgos[] = {"TREE",      "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS",
                                           "NVLS_TREE", "PAT"};
  static constexpr const char* kProtos[] = {"LL", "LL128", "SIMPLE"};
  auto code = [](const char* name, const auto& names) -> uint8_t {
    if (name == nullptr) {
      return 0;
    }
    for (size_t i = 0; i < std::size(names); ++i) {
      if (std::strcmp(name, names[i]) == 0) {
        return static_cast<uint8_t>(i + 1);
      }
    }
    return 15;
  };
  return static_cast<uint8_t>(code(algo, kAlgos) | (code(proto, kProtos) << 4));
}

uint8_t OpCode(const char* func) { return OpCodeOf(OpIndex(func)); }

}  // namespace commprof::nccl
