// The NCCL profiler plugin's one implementation, behind the thin per-version C shims
// (plugin_exports.cc). The records it writes and why: docs/nccl-plugin.md; the ABI it implements:
// nccl_profiler_abi.h.
//
// Purpose: turn NCCL's profiler events into commprof records: the communicator (kind 6 subtype
// 67), API calls (kind 16), one record per completed collective or point-to-point operation
// (kind 17) and one per kernel channel (kind 11), with GPU times calibrated to the host clock.
// Concepts: every piece of state lives in the per-communicator PluginContext; events are slots of a
// pool preallocated at init and handed out through a lock-free free list, so the hot path takes no
// lock and allocates nothing (the GPU clock calibration too: a lock-free sample queue that the fit
// drains when due, and a published fit read without waiting: SharedGpuClock).
// A collective completes when its Coll stop ("enqueued") and the stops of its nChannels kernel
// channels (or, without kernel timing, of its proxy ops) have all arrived: a pending count reaches
// zero and whoever brings it there writes the record. Children keep their parent's generation, so
// a late child of a recycled slot is detected and dropped (counted).
// Failure policy: nothing here aborts or returns an error to NCCL; a NULL context or handle is a
// no-op, internal trouble is counted and reported as runtime counters at finalize.
#pragma once

#include <cstddef>
#include <cstdint>

#include "commprof/event.h"
#include "nccl_hooks/gpu_clock_calibration.h"

namespace commprof::nccl {

// Where records go: the libcommprof.so runtime in the plugin, a capture in the unit tests.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void Record(const commprof_event& e) = 0;
  virtual uint32_t Intern(const char* text) = 0;
  virtual uint64_t Now() = 0;
  virtual void AddCounter(const char* name, uint64_t delta) = 0;
  // Call sites (--stacks): whether the runtime captures them, asked once per communicator; then,
  // at the start of each API event, the calling stack's CALL_SITE for `api` (kind, start, comm).
  virtual bool CapturesStacks() { return false; }
  virtual void CallSite(const commprof_event& /*api*/) {}
  // Hang diagnosis (docs/hangs.md): each context registers itself at creation and is removed at
  // FinalizeContext (removal waits for a running call); the runtime's shipper thread calls
  // provider(ctx, emit, arg), which is InflightOps.
  using InflightEmit = void (*)(void* arg, const commprof_event* e);
  using InflightProvider = void (*)(void* ctx, InflightEmit emit, void* arg);
  virtual void AddInflightProvider(InflightProvider /*provider*/, void* /*ctx*/) {}
  virtual void RemoveInflightProvider(void* /*ctx*/) {}
};

enum class AbiVersion { kV2, kV4, kV5 };

struct PluginOptions {
  bool proxy_detail = false;    // COMMPROF_NCCL_DETAIL=proxy: record ProxyOp/ProxyStep events (kinds 21, 22)
  uint32_t pool_events = 4096;  // COMMPROF_NCCL_EVENTS: event slots per communicator
  CalibrationOptions calibration;
};
PluginOptions PluginOptionsFromEnv();

struct CommInfo {
  bool known = false;  // false for v2: the hash arrives with each Coll/P2p event
  uint64_t comm_hash = 0;
  const char* name = nullptr;
  int nnodes = 0;
  int nranks = 0;
  int rank = 0;
  uint16_t device = 0;
};

// A descriptor of any ABI version, normalised by the shims (unused fields stay zero).
struct EventDescr {
  uint64_t type = 0;  // kCpNccl* bit
  void* parent = nullptr;
  int rank = 0;
  const char* func = nullptr;
  const char* datatype = nullptr;
  size_t count = 0;
  int root = 0;
  int peer = 0;
  uint64_t seq_number = 0;
  uint8_t n_channels = 0;
  int group_depth = 0;
  uint8_t channel_id = 0;
  uint64_t ptimer = 0;
  int pid = 0;
  int is_send = 0;              // ProxyOp
  int step = 0;                 // ProxyStep
  uint64_t comm_hash = 0;       // v2 only
  const char* algo = nullptr;   // Coll: "RING", "TREE", ...
  const char* proto = nullptr;  // Coll: "LL", "LL128", "SIMPLE"
};

class PluginContext;

// The activation mask this plugin asks for, per ABI version.
int ActivationMask(AbiVersion version, const PluginOptions& options);
// Never fails: returns null only if the pool cannot be allocated (counted by the caller's log).
PluginContext* CreateContext(AbiVersion version, const CommInfo& info, RecordSink* sink, const PluginOptions& options);
void StartEvent(PluginContext* ctx, void** handle, const EventDescr& d);
void StopEvent(void* handle);
// `value` is the one state-args field we read, when `has_value`: kernelCh.pTimer for state 22,
// proxyStep.transSize for the ProxyStep states (v5, v4), proxyOp.transSize for the v2 ProxyOp
// states 0-7. The shims pick it; unused otherwise.
void RecordEventState(void* handle, int state, uint64_t value, bool has_value);
// A ProxyOp or ProxyStep start may come from another process's proxy thread (PXN) with that
// process's context and parent pointers (docs/nccl-plugin.md §2a): true when the descriptor shows it, so the
// shims never dereference the context. Counted process-wide (nccl_foreign_proxy_op).
bool ForeignProxyEvent(const EventDescr& d);
// Calls emit(arg, e) for each collective or p2p operation of `ctx` started (Coll/P2p start) whose
// record is not written yet (its kernel has not finished): kind 17 with the seq, comm, op, bytes,
// datatype and root it will be recorded with, start_ns = end_ns = its start. Safe from any thread
// against NCCL's (a per-slot seqlock: an operation changing meanwhile is skipped, never torn).
void InflightOps(PluginContext* ctx, RecordSink::InflightEmit emit, void* arg);
// Writes what is still pending (flagged INCOMPLETE), reports counters, frees the context.
void FinalizeContext(PluginContext* ctx);

// Byte size and commprof datatype of an NCCL datatype string ("Unknown" is ncclUint8: the only
// type 2.28 has no string for).
uint32_t DatatypeSize(const char* datatype);
uint8_t DatatypeCode(const char* datatype);
// A collective's algorithm and protocol as one byte, stored in the kind-17 record's `reduce_op`
// (NCCL gives the profiler no reduction op): algorithm in the low 4 bits (TREE 1, RING 2,
// COLLNET_DIRECT 3, COLLNET_CHAIN 4, NVLS 5, NVLS_TREE 6, PAT 7, another name 15, none 0), protocol
// in the high 4 bits (LL 1, LL128 2, SIMPLE 3, another name 15, none 0). docs/file-format.md.
uint8_t AlgoProtoCode(const char* algo, const char* proto);
// commprof_op_type of an NCCL func string ("AllReduce", ...); COMMPROF_OP_NONE if unknown.
uint8_t OpCode(const char* func);

}  // namespace commprof::nccl
