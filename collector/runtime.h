// The collector runtime: one owned object per profiled process.
//
// Purpose: give every event source (PMPI wrappers, the C API, NVTX, CUPTI, the NCCL plugin) one
// place to record into, and ship what they record to the aggregator.
// Concepts: a ThreadState per recording thread (its ring, its string cache, its range stack),
// created on the thread's first event and owned by the runtime, so a thread that exits leaves its
// last events to be drained; a Shipper thread that drains all rings every flush period; the
// state of the MPI source (MpiSource), owned here once MPI_Init has run.
// Seams: the runtime reads time from a HostClock and gets its transports from a
// TransportFactory, both given at construction (RuntimeSeams), so a test can run several
// simulated ranks in one process on clocks it sets, shipping to an in-process aggregator.
// Budget: at most memory_mb of rings; threads beyond it record nothing and count every event they
// drop. Nothing here may abort the host process: failures are logged once and counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collector/call_stacks.h"
#include "collector/capture_gate.h"
#include "collector/event_builder.h"
#include "collector/event_ring.h"
#include "collector/gpu_tracer.h"
#include "collector/host_clock.h"
#include "collector/inflight.h"
#include "collector/request_table.h"
#include "collector/transport.h"
#include "commprof/event.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/string_table.h"
#include "core/wire.h"

namespace commprof {

class MpiSource;
struct MpiThreadScratch;
class Shipper;

struct Identity {
  uint32_t rank = 0;
  uint32_t world_size = 1;
  uint32_t pid = 0;
  std::string host;
  bool mpi = false;  // rank of an MPI job: clocks are aligned over MPI, not over TCP
};

struct ThreadState {
  ThreadState();
  ~ThreadState();  // out of line: MpiThreadScratch is complete only in the runtime's sources
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;

  static constexpr int kMaxRangeDepth = 64;
  std::unique_ptr<EventRing> ring;  // null when the memory budget was exhausted
  StringCache strings;
  uint32_t index = 0;
  // The thread's OS id (gettid) and the low 32 bits of pthread_self(), taken at registration, so
  // the thread id in a CUPTI API record can be mapped to `index` (HostThreadIndex).
  uint32_t os_tid = 0;
  uint32_t pthread_low = 0;
  int range_depth = 0;
  uint64_t range_start[kMaxRangeDepth] = {};
  uint32_t range_name[kMaxRangeDepth] = {};
  // The MPI source's per-thread scratch (request-array calls), made on first use. Kept here rather
  // than in a thread_local so it lives as long as the runtime: a thread_local of the main thread is
  // destroyed at exit before static destructors, which may still make MPI calls.
  std::unique_ptr<MpiThreadScratch> mpi_scratch;
  std::unique_ptr<StackCache> stack_cache;  // --stacks: made on the thread's first capture
  InflightSlot inflight;                    // the blocking call this thread is in (collector/inflight.h)
};

// What a runtime is given instead of reaching for the steady clock and the network itself; a
// null member means the production choice.
struct RuntimeSeams {
  std::unique_ptr<HostClock> clock;              // null: MakeHostClock (steady, or the fake-clock testing aid)
  std::unique_ptr<TransportFactory> transports;  // null: MakeNetworkTransports (TCP, spool files)
};

class Runtime {
 public:
  Runtime(Config config, Identity identity, RuntimeSeams seams = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  void Start();     // launches the shipper thread
  void Shutdown();  // final drain, clock and bye frames, close; idempotent
  // From a fatal-signal handler (fatal_signals.h): a last shipment, async-signal-safe.
  void ShipForSignal(int signo, bool final, uint32_t wait_ms);

  // Hot path: stamps the thread index and pushes into this thread's ring. One relaxed load decides
  // whether anything is recorded: `enabled_` combines the user's pause (commprof_disable,
  // MPI_Pcontrol(0)) with the capture gate, recomputed when either changes.
  void Record(commprof_event e) {
    if (!enabled_.load(std::memory_order_relaxed)) {
      return;
    }
    ThreadState* t = Thread();
    e.thread_id = t->index;
    Push(t, e);
  }
  // The same for sources whose events are not about the calling thread (GPU records delivered on
  // CUPTI's thread carry the CUDA stream in thread_id): thread_id is kept as given.
  void RecordAsGiven(const commprof_event& e) {
    if (!enabled_.load(std::memory_order_relaxed)) {
      return;
    }
    Push(Thread(), e);
  }
  // The job's structure (MPI_Init, MPI_Finalize, communicator creation): recorded outside capture
  // windows too, since the analysis needs every communicator's members; still not while the user
  // paused recording. Rare events: no hot path.
  void RecordStructural(commprof_event e) {
    if (!user_enabled_.load(std::memory_order_relaxed)) {
      return;
    }
    ThreadState* t = Thread();
    e.thread_id = t->index;
    Push(t, e);
  }
  // Attributed to the thread with index `thread_index` (an NVTX start/end range that ended on
  // another thread belongs to the thread that started it); stored in this thread's ring.
  void RecordAs(commprof_event e, uint32_t thread_index) {
    e.thread_id = thread_index;
    RecordAsGiven(e);
  }
  // Call sites (--stacks, collector/call_stacks.h). CaptureStack: the id of the calling thread's
  // stack, 0 when --stacks is off (one branch) or nothing outside commprof/MPI/NCCL is on it.
  // Called first in an API call's wrapper, before its start time is taken.
  uint32_t CaptureStack() {
    if (stacks_ == nullptr || !enabled_.load(std::memory_order_relaxed)) {
      return 0;  // off, or nothing recorded now: no unwinding either
    }
    ThreadState* t = Thread();
    if (t->stack_cache == nullptr) {
      t->stack_cache = std::make_unique<StackCache>();
    }
    return stacks_->Capture(*t->stack_cache);
  }
  // The kind 31 CALL_SITE of `api` (an MPI or NCCL API event) whose stack is `stack`; none for 0.
  void RecordCallSite(uint32_t stack, const commprof_event& api) {
    if (stack != 0) {
      Record(CallSiteEvent(stack, api));
    }
  }
  const CallStacks* call_stacks() const { return stacks_.get(); }

  // Our index of the thread whose gettid() or low 32 bits of pthread_self() is `os_thread_id`;
  // kForeignThread | (id & 0x7FFFFFFF) for a thread that never recorded here. Takes the thread
  // list's lock: for cache misses only (docs/cupti.md "Host threads").
  static constexpr uint32_t kForeignThread = 0x80000000u;
  uint32_t HostThreadIndex(uint32_t os_thread_id) const;

  // GPU activity (collector/gpu_tracer.h): starts at most once per runtime, from whichever of the
  // driver's injection call and the runtime's own start comes first; re-entrant calls (CUPTI may
  // initialize the driver, which calls the injection) return at once.
  void StartGpuTracing();
  // Step boundaries: CUPTI's completed buffers become events now. Never call with a lock held.
  void FlushGpuTracing() {
    if (GpuTracer* g = gpu_.load(std::memory_order_acquire)) {
      g->Flush();
    }
  }

  uint32_t Intern(const char* text) { return Thread()->strings.Intern(strings_, text != nullptr ? text : "(null)"); }
  // The rank's local clock (host_clock.h): every timestamp the runtime and its sources take.
  uint64_t Now() const { return host_clock_->Now(); }
  // A steady-clock reading taken before the runtime existed, on the rank's clock.
  uint64_t ToLocal(uint64_t steady_ns) const { return host_clock_->FromSteady(steady_ns); }
  const HostClock& host_clock() const { return *host_clock_; }
  TransportFactory& transports() { return *transports_; }

  // The MPI source's state, handed over once after PMPI_Init (mpi_source.h); null before that and
  // in a process that never initializes MPI. The runtime owns it from then on.
  MpiSource* mpi() const { return mpi_.load(std::memory_order_acquire); }
  // Takes `source` unless one is already adopted (a second MPI_Init is an error MPI reports).
  MpiSource* AdoptMpiSource(std::unique_ptr<MpiSource> source);

  ThreadState* Thread() {
    if (t_slot.owner_id == id_) {
      return t_slot.state;
    }
    return RegisterThread();
  }

  // Whether `commprof run --activities` asked for this source (enum Activity in core/config.h).
  bool Records(uint32_t activity) const { return (config_.activities & activity) != 0; }
  // commprof_enable/commprof_disable and MPI_Pcontrol(1)/(0): the user's pause, combined with the
  // capture gate (recording happens when the user has not paused it and a window is open).
  void SetUserEnabled(bool on);
  // Step `step` begins at `now` (a step boundary from `source`, enum commprof_step_source): the
  // capture gate moves on (recording the WINDOW event of a window this closes), then the STEP
  // event is recorded when `record_event` and the gate lets it. Flushes CUPTI's completed buffers
  // first, so a step's finished GPU work is judged by the gate of that step. Never call with a
  // lock held.
  void BeginStep(uint64_t step, uint8_t source, uint64_t now, bool record_event = true);
  // Time windows (--delay, --duration): the shipper's wake-ups move the gate on; the time of the
  // next change (UINT64_MAX: none) tells it when to wake.
  void CaptureTick();
  uint64_t CaptureDeadline() const;
  // MPI_Pcontrol(2): the next step of this process, from 0.
  uint64_t NextPcontrolStep() { return pcontrol_steps_.fetch_add(1, std::memory_order_relaxed); }
  void RequestFlush();
  void CountRangeOverflow() { dropped_range_depth_.fetch_add(1, std::memory_order_relaxed); }
  void CountUntrackedRequest() { dropped_requests_.fetch_add(1, std::memory_order_relaxed); }
  void SetClock(const wire::Clock& clock);  // bumps clock_version()
  // Builds the clock model from a sync method's epoch points and sets it, queueing the new
  // epoch's samples for the next clock frame.
  void PublishClock(std::vector<ClockPoint> points, std::vector<ClockSample> epoch_samples, const char* method);
  uint64_t clock_version() const { return clock_version_.load(std::memory_order_acquire); }
  // Counters a source reports once in a while (e.g. clock sync cost); sent in the bye.
  void SetCounter(const std::string& name, uint64_t value);
  void AddCounter(const std::string& name, uint64_t delta);  // several sources summing into one
  // A counter a source keeps itself (lock-free, counted on its hot path) and that outlives this
  // runtime (the NVTX tool's): read when the bye is built. Registering a name again replaces it.
  void ExportCounter(const std::string& name, const std::atomic<uint64_t>* value);

  // Hang diagnosis (docs/hangs.md). Sources whose operations are in flight outside any thread's
  // blocking call (the NCCL plugin's collectives whose kernels have not finished) register a
  // provider: called on the shipper thread with `ctx`, it calls emit(arg, e) for each such operation
  // (as it will be recorded, start_ns = its start). Removing waits for a running call to return.
  using InflightEmit = void (*)(void* arg, const commprof_event* e);
  using InflightProvider = void (*)(void* ctx, InflightEmit emit, void* arg);
  void AddInflightProvider(InflightProvider fn, void* ctx);
  void RemoveInflightProvider(void* ctx);
  // Every operation of this rank in flight now, with end_ns == start_ns: each thread's blocking
  // call (thread_id = its thread), each parked non-blocking operation, each provider's. And the
  // latest exit of a communication call on any thread (0: none yet). `from_signal`: a fatal
  // signal's flush, which skips the providers when their lock is held rather than wait.
  std::vector<wire::InflightOp> Inflight(uint64_t& last_completion_ns, bool from_signal = false);
  // A fatal signal's final flush: every operation in flight is recorded as its event ending at
  // `now`, flagged INCOMPLETE, past the capture gate (the file's diagnosis needs it); parked
  // requests are taken out of the table. Returns how many.
  uint64_t RecordInflightAsIncomplete(uint64_t now);

  // The call-site text of each stack in `ids` (--stacks): "symbol (module+0xOFF) <- caller ...",
  // innermost first; none without --stacks or for an unknown id.
  std::vector<std::pair<uint32_t, std::string>> CallSiteTexts(std::vector<uint32_t> ids) const;

  RequestTable& requests() { return requests_; }
  StringTable& strings() { return strings_; }
  const Identity& identity() const { return identity_; }
  const Config& config() const { return config_; }
  const ClockAnchor& start_anchor() const { return start_; }

  // For the shipper: drain every ring through `sink(events, n)`.
  template <typename Sink>
  void DrainAll(commprof_event* scratch, uint32_t scratch_len, Sink&& sink) {
    std::lock_guard<std::mutex> lock(threads_mu_);
    for (auto& t : threads_) {
      if (t->ring == nullptr) {
        continue;
      }
      while (uint32_t n = t->ring->Drain(scratch, scratch_len)) {
        sink(scratch, n);
      }
    }
  }
  wire::Bye Counters() const;
  // The clock frame to send: the current model with the samples taken since the last call.
  wire::Clock TakeClockFrame();
  // MPI alignment takes over from the TCP exchange (a rank that used the C API before MPI_Init).
  void ClaimClockForMpi() { clock_by_mpi_.store(true, std::memory_order_release); }
  bool clock_by_mpi() const { return clock_by_mpi_.load(std::memory_order_acquire); }

 private:
  struct ThreadSlot {
    uint64_t owner_id = 0;
    ThreadState* state = nullptr;
  };
  static thread_local ThreadSlot t_slot;

  ThreadState* RegisterThread();
  void Push(ThreadState* t, const commprof_event& e) {
    if (t->ring != nullptr) {
      t->ring->Push(e);  // a full ring counts its own drops
    } else {
      dropped_no_buffer_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Under capture_mu_: the hot path's flag from the user's pause and the gate; the WINDOW event of
  // `closed`, recorded past the (then closed) gate.
  void ApplyGate(const std::optional<CaptureWindow>& closed);
  void FinishCapture();
  // At shutdown: kind 32 STACK_FRAME events for every frame of every unique stack, past the
  // recording gate (CALL_SITEs recorded in any window refer to them).
  void RecordStackFrames();

  const uint64_t id_;  // distinguishes runtimes created one after another at one address
  Config config_;
  Identity identity_;
  const std::unique_ptr<HostClock> host_clock_;
  const std::unique_ptr<TransportFactory> transports_;
  ClockAnchor start_;
  std::atomic<bool> enabled_{true};  // user_enabled_ && the capture gate is open
  std::atomic<bool> user_enabled_{true};
  mutable std::mutex capture_mu_;  // the gate and enabled_'s writers; step boundaries only
  CaptureGate gate_;               // guarded by capture_mu_
  std::atomic<uint64_t> pcontrol_steps_{0};
  StringTable strings_;
  RequestTable requests_;

  mutable std::mutex threads_mu_;
  std::vector<std::unique_ptr<ThreadState>> threads_;
  uint32_t rings_allowed_ = 0;

  std::atomic<uint64_t> dropped_no_buffer_{0};
  std::atomic<uint64_t> dropped_range_depth_{0};
  std::atomic<uint64_t> dropped_requests_{0};
  std::atomic<uint64_t> dropped_requests_incomplete_{0};  // recorded with the INCOMPLETE flag

  mutable std::mutex clock_mu_;
  wire::Clock clock_;
  std::atomic<uint64_t> clock_version_{0};
  std::vector<ClockSample> pending_samples_;  // guarded by clock_mu_
  std::atomic<bool> clock_by_mpi_{false};
  std::vector<std::pair<std::string, uint64_t>> extra_counters_;                         // guarded by clock_mu_
  std::vector<std::pair<std::string, const std::atomic<uint64_t>*>> exported_counters_;  // guarded by clock_mu_

  std::unique_ptr<CallStacks> stacks_;  // null unless config_.stacks > 0

  std::mutex providers_mu_;  // registration (communicator init/finalize) and the shipper's calls
  std::vector<std::pair<InflightProvider, void*>> providers_;

  std::unique_ptr<Shipper> shipper_;
  std::once_flag shutdown_once_;

  std::atomic<int> gpu_state_{0};  // 0 not started, 1 starting, 2 started (or unavailable)
  std::unique_ptr<GpuTracer> gpu_owner_;
  std::atomic<GpuTracer*> gpu_{nullptr};

  std::mutex mpi_mu_;  // serializes adoption only; readers load mpi_
  std::unique_ptr<MpiSource> mpi_owner_;
  std::atomic<MpiSource*> mpi_{nullptr};
};

// The process's runtime, for the C entry points (PMPI wrappers, C API). Null while inactive.
Runtime* ActiveRuntime();
// Creates the process runtime if the environment asks for profiling (COMMPROF_AGGREGATOR or
// COMMPROF_SPOOL_DIR set). `mpi_rank`/`mpi_size` < 0: take the rank from the launcher's
// environment. Thread-safe; returns the runtime or null when profiling is off.
Runtime* EnsureRuntime(int mpi_rank, int mpi_size);
// Ends the process runtime (MPI_Finalize, exit).
void ShutdownRuntime();

// Rank identity from the launcher's environment (PMIX_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
// SLURM_PROCID, in that order), or -1.
int RankFromEnvironment();
int WorldSizeFromEnvironment();

}  // namespace commprof
