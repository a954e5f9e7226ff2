#include "collector/runtime.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>
#include <utility>

#include "collector/event_builder.h"
#include "collector/fatal_signals.h"
#include "collector/mpi_source.h"
#include "collector/shipper.h"
#include "core/launcher_env.h"
#include "core/log.h"

namespace commprof {

thread_local Runtime::ThreadSlot Runtime::t_slot;

namespace {
std::atomic<uint64_t> g_next_runtime_id{1};
std::atomic<Runtime*> g_runtime{nullptr};
std::mutex g_runtime_mu;
bool g_runtime_ended = false;      // guarded by g_runtime_mu: never restart after shutdown
std::atomic<bool> g_inert{false};  // lock-free fast "no" once the runtime ended or never applied
Runtime* g_retired = nullptr;      // a shut-down runtime stays allocated (see ShutdownRuntime)

// A forked child (system(), popen()) inherits the pointer but not the shipper thread: it must
// neither record into the parent's runtime nor try to join its thread.
void ForgetRuntimeInChild() {
  g_runtime.store(nullptr);
  g_runtime_ended = true;
  g_inert.store(true);
  g_retired = nullptr;
}
}  // namespace

ThreadState::ThreadState() = default;
ThreadState::~ThreadState() = default;

Runtime::Runtime(Config config, Identity identity, RuntimeSeams seams)
    : id_(g_next_runtime_id.fetch_add(1)),
      config_(std::move(config)),
      identity_(std::move(identity)),
      host_clock_(seams.clock != nullptr ? std::move(seams.clock) : MakeHostClock(config_, identity_.rank)),
      transports_(seams.transports != nullptr ? std::move(seams.transports) : MakeNetworkTransports(config_)),
      start_(host_clock_->Anchor()),
      gate_(config_.capture, start_.steady_ns),
      requests_(config_.request_slots) {
  enabled_.store(gate_.open(), std::memory_order_relaxed);
  // Rings round their capacity up to a power of two: budget with what they really take.
  uint64_t ring_bytes =
      static_cast<uint64_t>(EventRing::RoundedCapacity(config_.buffer_events)) * sizeof(commprof_event);
  rings_allowed_ = static_cast<uint32_t>((static_cast<uint64_t>(config_.memory_mb) << 20) / ring_bytes);
  if (rings_allowed_ == 0) {
    rings_allowed_ = 1;
  }
  clock_.method = "none";
  clock_.anchor_local_ns = start_.steady_ns;
  if (config_.stacks > 0) {
    stacks_ = std::make_unique<CallStacks>(CollectorStackOptions(config_.stacks));
  }
}

// The MPI source goes with the runtime (its clock sync refers to it). It frees no MPI object:
// a runtime is destroyed only in tests, which never initialize MPI, or never (the process's
// runtime is retired, not freed, see ShutdownRuntime), while MPI may already be finalized.
Runtime::~Runtime() { Shutdown(); }

MpiSource* Runtime::AdoptMpiSource(std::unique_ptr<MpiSource> source) {
  std::lock_guard<std::mutex> lock(mpi_mu_);
  if (mpi_owner_ == nullptr) {
    mpi_owner_ = std::move(source);
    mpi_.store(mpi_owner_.get(), std::memory_order_release);
  }
  return mpi_owner_.get();
}

void Runtime::Start() {
  shipper_ = std::make_unique<Shipper>(*this);
  shipper_->Start();
}

void Runtime::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    // GPU records still in CUPTI's buffers go into the rings before the final drain. No lock of
    // ours is held here: CUPTI's buffer-complete callback records on this thread.
    if (GpuTracer* g = gpu_.load(std::memory_order_acquire)) {
      g->Stop();
    }
    // Non-blocking operations never seen to complete are kept, flagged, rather than lost.
    requests_.TakeAll([this](commprof_event e) {
      e.flags |= COMMPROF_FLAG_INCOMPLETE;
      dropped_requests_incomplete_.fetch_add(1, std::memory_order_relaxed);
      Record(e);
    });
    FinishCapture();
    RecordStackFrames();
    if (shipper_) {
      shipper_->Stop();
    }
  });
}

void Runtime::ApplyGate(const std::optional<CaptureWindow>& closed) {
  enabled_.store(user_enabled_.load(std::memory_order_relaxed) && gate_.open(), std::memory_order_relaxed);
  if (!closed) {
    return;
  }
  commprof_event e = BlankEvent(COMMPROF_KIND_WINDOW, closed->start_ns, closed->end_ns);
  e.subtype = closed->subtype;
  e.seq = closed->index;
  e.bytes = closed->first_step;
  e.correlation = static_cast<uint32_t>(closed->steps);
  e.name_id = Intern("window");
  ThreadState* t = Thread();
  e.thread_id = t->index;
  Push(t, e);
}

void Runtime::SetUserEnabled(bool on) {
  std::lock_guard<std::mutex> lock(capture_mu_);
  user_enabled_.store(on, std::memory_order_relaxed);
  ApplyGate(std::nullopt);
}

void Runtime::BeginStep(uint64_t step, uint8_t source, uint64_t now, bool record_event) {
  // A step boundary is where users look at the GPU work of the step just ended: hand CUPTI's
  // completed buffers over now, under the gate of that step (no lock of ours is held here).
  FlushGpuTracing();
  {
    std::lock_guard<std::mutex> lock(capture_mu_);
    ApplyGate(gate_.OnStep(step, now));
  }
  if (record_event) {
    commprof_event e = BlankEvent(COMMPROF_KIND_STEP, now, now);
    e.subtype = source;
    e.seq = step;
    e.name_id = Intern("step");
    Record(e);
  }
}

void Runtime::CaptureTick() {
  if (!config_.capture.timed) {
    return;
  }
  std::lock_guard<std::mutex> lock(capture_mu_);
  ApplyGate(gate_.OnTime(Now()));
}

uint64_t Runtime::CaptureDeadline() const {
  if (!config_.capture.timed) {
    return UINT64_MAX;
  }
  std::lock_guard<std::mutex> lock(capture_mu_);
  return gate_.next_deadline();
}

void Runtime::FinishCapture() {
  std::lock_guard<std::mutex> lock(capture_mu_);
  if (config_.capture.has_schedule && !gate_.saw_step() && identity_.rank == 0) {
    COMMPROF_LOG_WARN(
        "--schedule: no step boundary was seen, so nothing was recorded (mark steps with commprof_step, "
        "MPI_Pcontrol(2), an NVTX range ProfilerStep#N or --step-range, or use --step-every)");
  }
  ApplyGate(gate_.Finish(Now()));
}

void Runtime::ShipForSignal(int signo, bool final, uint32_t wait_ms) {
  if (shipper_) {
    shipper_->ShipForSignal(signo, final, wait_ms);
  }
}

void Runtime::RequestFlush() {
  if (shipper_) {
    shipper_->Flush();
  }
}

void Runtime::RecordStackFrames() {
  if (stacks_ == nullptr) {
    return;
  }
  ThreadState* t = Thread();
  uint64_t frames = 0;
  uint64_t lost = 0;
  int wait_left_ms = 2000;
  const uint64_t now = Now();
  stacks_->ForEachStack([&](uint32_t id, std::span<const uintptr_t> pcs) {
    for (size_t depth = 0; depth < pcs.size(); ++depth) {
      const FrameOrigin where = ResolveFrame(pcs[depth]);
      commprof_event e{};
      e.kind = COMMPROF_KIND_STACK_FRAME;
      e.start_ns = now;
      e.end_ns = now;
      e.seq = id;
      e.peer = static_cast<int32_t>(depth);
      e.bytes = where.offset;
      e.name_id = Intern(where.module.c_str());
      e.correlation = where.symbol.empty() ? 0 : Intern(where.symbol.c_str());
      e.device = COMMPROF_HOST_DEVICE;
      e.thread_id = t->index;
      // A full ring waits for the shipper (this is the end of the process, not a hot path), at
      // most 2 s in all: a shipper that does not drain it makes the rest count as lost at once.
      bool pushed = t->ring != nullptr && t->ring->HasRoom();
      for (; !pushed && t->ring != nullptr && wait_left_ms > 0; --wait_left_ms) {
        RequestFlush();
        timespec ts{0, 1000000};
        ::nanosleep(&ts, nullptr);
        pushed = t->ring->HasRoom();
      }
      if (pushed && t->ring->Push(e)) {
        ++frames;
      } else {
        ++lost;
      }
    }
  });
  SetCounter("stacks_unique", stacks_->unique());
  SetCounter("stacks_dropped", stacks_->dropped());
  SetCounter("stack_frames_lost", lost);
  COMMPROF_LOG_DEBUG("%llu call-stack frames recorded, %llu lost", static_cast<unsigned long long>(frames),
                     static_cast<unsigned long long>(lost));
}

void Runtime::AddInflightProvider(InflightProvider fn, void* ctx) {
  if (fn == nullptr) {
    return;
  }
  std::lock_guard<std::mutex> lock(providers_mu_);
  providers_.emplace_back(fn, ctx);
}

void Runtime::RemoveInflightProvider(void* ctx) {
  std::lock_guard<std::mutex> lock(providers_mu_);
  std::erase_if(providers_, [ctx](const auto& p) { return p.second == ctx; });
}

std::vector<wire::InflightOp> Runtime::Inflight(uint64_t& last_completion_ns, bool from_signal) {
  std::vector<wire::InflightOp> out;
  last_completion_ns = 0;
  // From a signal the thread it stopped may hold either lock (registering a thread, making a
  // communicator) and waits for us: try them, and leave out what they guard rather than deadlock.
  auto take = [from_signal](std::unique_lock<std::mutex>& lock) {
    if (from_signal) {
      return lock.try_lock();
    }
    lock.lock();
    return true;
  };
  if (std::unique_lock<std::mutex> lock(threads_mu_, std::defer_lock); take(lock)) {
    for (const auto& t : threads_) {
      last_completion_ns = std::max(last_completion_ns, t->inflight.last_completion_ns());
      wire::InflightOp op;
      if (t->inflight.Read(op.event, op.stack) == EventSeqlock::ReadResult::kCopied) {
        op.event.thread_id = t->index;
        op.event.end_ns = op.event.start_ns;
        out.push_back(op);
      }
    }
  }
  requests_.ForEachPending([&out](const commprof_event& e, uint32_t stack) {
    wire::InflightOp op{e, stack};
    op.event.end_ns = op.event.start_ns;
    out.push_back(op);
  });
  std::unique_lock<std::mutex> lock(providers_mu_, std::defer_lock);
  if (!take(lock)) {
    return out;
  }
  auto emit = [](void* arg, const commprof_event* e) {
    if (e != nullptr) {
      wire::InflightOp op{*e, 0};
      op.event.end_ns = op.event.start_ns;
      static_cast<std::vector<wire::InflightOp>*>(arg)->push_back(op);
    }
  };
  for (const auto& [fn, ctx] : providers_) {
    fn(ctx, emit, &out);
  }
  return out;
}

uint64_t Runtime::RecordInflightAsIncomplete(uint64_t now) {
  uint64_t last = 0;
  uint64_t n = 0;
  ThreadState* self = Thread();
  auto push = [&](commprof_event e) {
    e.end_ns = std::max(now, e.start_ns);
    e.flags |= COMMPROF_FLAG_INCOMPLETE;
    Push(self, e);
    ++n;
  };
  // Blocking calls and providers' operations from the in-flight view; parked requests taken out
  // of the table instead, so the shutdown that may still follow does not record them twice.
  for (const wire::InflightOp& op : Inflight(last, true)) {
    if ((op.event.flags & COMMPROF_FLAG_NONBLOCKING) == 0) {
      push(op.event);
    }
  }
  requests_.TakeAll([&](commprof_event e) {
    dropped_requests_incomplete_.fetch_add(1, std::memory_order_relaxed);
    push(e);
  });
  return n;
}

std::vector<std::pair<uint32_t, std::string>> Runtime::CallSiteTexts(std::vector<uint32_t> ids) const {
  std::vector<std::pair<uint32_t, std::string>> out;
  std::erase(ids, 0u);
  if (stacks_ == nullptr || ids.empty()) {
    return out;
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  stacks_->ForEachStack([&](uint32_t id, std::span<const uintptr_t> pcs) {
    if (!std::binary_search(ids.begin(), ids.end(), id)) {
      return;
    }
    out.emplace_back(id, CallSiteText(pcs, wire::kMaxStringLen));
  });
  return out;
}

ThreadState* Runtime::RegisterThread() {
  // Once per thread per runtime: the only allocation on a recording thread.
  auto state = std::make_unique<ThreadState>();
  state->os_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  state->pthread_low = static_cast<uint32_t>(static_cast<uint64_t>(::pthread_self()));
  std::lock_guard<std::mutex> lock(threads_mu_);
  state->index = static_cast<uint32_t>(threads_.size());
  if (threads_.size() < rings_allowed_) {
    state->ring = std::make_unique<EventRing>(config_.buffer_events);
  } else {
    COMMPROF_LOG_WARN("memory budget (%u MB) allows %u thread buffers; thread %u records nothing (counted)",
                      config_.memory_mb, rings_allowed_, state->index);
  }
  threads_.push_back(std::move(state));
  t_slot = ThreadSlot{id_, threads_.back().get()};
  return t_slot.state;
}

uint32_t Runtime::HostThreadIndex(uint32_t os_thread_id) const {
  std::lock_guard<std::mutex> lock(threads_mu_);
  for (const auto& t : threads_) {
    if (t->os_tid == os_thread_id || t->pthread_low == os_thread_id) {
      return t->index;
    }
  }
  return kForeignThread | (os_thread_id & ~kForeignThread);
}

void Runtime::StartGpuTracing() {
  int expected = 0;
  if (!gpu_state_.compare_exchange_strong(expected, 1)) {
    return;
  }
  if (Records(kActivityCuda) || Records(kActivityMemory)) {
    gpu_owner_ = StartGpuTracer(*this);
    gpu_.store(gpu_owner_.get(), std::memory_order_release);
  }
  gpu_state_.store(2);
}

void Runtime::SetClock(const wire::Clock& clock) {
  std::lock_guard<std::mutex> lock(clock_mu_);
  clock_ = clock;
  pending_samples_.insert(pending_samples_.end(), clock.samples.begin(), clock.samples.end());
  clock_.samples.clear();
  clock_version_.fetch_add(1, std::memory_order_release);
}

wire::Clock Runtime::TakeClockFrame() {
  std::lock_guard<std::mutex> lock(clock_mu_);
  wire::Clock c = clock_;
  c.samples.swap(pending_samples_);
  return c;
}

void Runtime::PublishClock(std::vector<ClockPoint> points, std::vector<ClockSample> epoch_samples, const char* method) {
  ClockModel model(std::move(points));
  wire::Clock c;
  // "At job start" is the first epoch (MPI_Init, or the connection): the offset is measured there
  // rather than extrapolated back to the collector's start, so the error bound holds for it.
  c.anchor_local_ns = model.empty() ? start_.steady_ns : static_cast<uint64_t>(model.points().front().local_ns);
  c.offset_ns = model.OffsetAt(static_cast<int64_t>(c.anchor_local_ns));
  c.drift_ppm = model.DriftPpm();
  c.error_bound_ns = model.ErrorBoundNs();
  c.method = method;
  c.points = model.points();
  c.samples = std::move(epoch_samples);
  SetClock(c);
}

namespace {
// The value stored under `name` in a small (name, value) list, added with a zero value if absent.
template <typename V>
V& CounterSlot(std::vector<std::pair<std::string, V>>& counters, const std::string& name) {
  for (auto& [n, v] : counters) {
    if (n == name) {
      return v;
    }
  }
  return counters.emplace_back(name, V{}).second;
}
}  // namespace

void Runtime::SetCounter(const std::string& name, uint64_t value) {
  std::lock_guard<std::mutex> lock(clock_mu_);
  CounterSlot(extra_counters_, name) = value;
}

void Runtime::AddCounter(const std::string& name, uint64_t delta) {
  std::lock_guard<std::mutex> lock(clock_mu_);
  CounterSlot(extra_counters_, name) += delta;
}

void Runtime::ExportCounter(const std::string& name, const std::atomic<uint64_t>* value) {
  std::lock_guard<std::mutex> lock(clock_mu_);
  CounterSlot(exported_counters_, name) = value;
}

wire::Bye Runtime::Counters() const {
  uint64_t recorded = 0, ring_full = 0;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    for (const auto& t : threads_) {
      if (t->ring == nullptr) {
        continue;
      }
      recorded += t->ring->pushed();
      ring_full += t->ring->dropped();
    }
  }
  wire::Bye bye;
  bye.counters = {
      {"events_recorded", recorded},
      {"dropped_ring_full", ring_full},
      {"dropped_no_buffer", dropped_no_buffer_.load()},
      {"dropped_range_depth", dropped_range_depth_.load()},
      {"dropped_requests", requests_.overflow() + dropped_requests_.load()},
      {"dropped_strings", strings_.overflow_count()},
      {"requests_incomplete", dropped_requests_incomplete_.load()},
  };
  std::lock_guard<std::mutex> lock(clock_mu_);
  bye.counters.insert(bye.counters.end(), extra_counters_.begin(), extra_counters_.end());
  for (const auto& [name, value] : exported_counters_) {
    bye.counters.emplace_back(name, value->load());
  }
  return bye;
}

int RankFromEnvironment() {
  const std::optional<uint32_t> rank = LauncherRank();
  return rank ? static_cast<int>(*rank) : -1;
}

int WorldSizeFromEnvironment() {
  const std::optional<uint32_t> size = LauncherWorldSize();
  return size ? static_cast<int>(*size) : -1;
}

namespace {
// Slurm's view of the rank, kept as bye counters (so /ranks/<r> attributes slurm_job_id,
// slurm_step_id, slurm_procid, slurm_localid, slurm_nodeid; docs/file-format.md): a file from
// `srun --commprof` or a batch job then says which job step, task and node each rank was. Only
// numeric values (a batch script's step is not a number) are kept.
void RecordSlurmIdentity(Runtime& rt) {
  static constexpr std::pair<const char*, const char*> kVars[] = {{"SLURM_JOB_ID", "slurm_job_id"},
                                                                  {"SLURM_STEP_ID", "slurm_step_id"},
                                                                  {"SLURM_PROCID", "slurm_procid"},
                                                                  {"SLURM_LOCALID", "slurm_localid"},
                                                                  {"SLURM_NODEID", "slurm_nodeid"}};
  for (const auto& [env, counter] : kVars) {
    const char* v = std::getenv(env);
    if (v == nullptr || *v == '\0') {
      continue;
    }
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    if (*end == '\0') {
      rt.SetCounter(counter, n);
    }
  }
}

// The rank's place (docs/file-format.md, rank attributes): its local rank on its node, and for a
// torch launcher's worker its node index and incarnation (TORCHELASTIC_RESTART_COUNT).
void RecordLauncherPlace(Runtime& rt) {
  rt.SetCounter("local_rank", LauncherLocalRank());
  if (TorchLaunched()) {
    rt.SetCounter("torch_launched", 1);
  }
  if (auto g = TorchGroupRank()) {
    rt.SetCounter("group_rank", *g);
  }
  if (auto n = TorchRestartCount()) {
    rt.SetCounter("restart_count", *n);
  }
}
}  // namespace

Runtime* ActiveRuntime() { return g_runtime.load(std::memory_order_acquire); }

namespace {
Runtime* CreateRuntime(int mpi_rank, int mpi_size);
}

Runtime* EnsureRuntime(int mpi_rank, int mpi_size) {
  if (Runtime* rt = ActiveRuntime()) {
    if (mpi_rank >= 0) {
      InstallFatalSignalHandlers(rt);  // after MPI_Init: chain to the handlers it installed
    }
    return rt;
  }
  Runtime* rt = CreateRuntime(mpi_rank, mpi_size);
  // MPI_Init may have installed its own handlers (Open MPI's backtrace printer) since the runtime
  // was created: chain to them.
  InstallFatalSignalHandlers(rt);
  // Outside the runtime lock and after the runtime is published: enabling CUPTI may initialize the
  // CUDA driver, whose injection call (InitializeInjection) comes back here on this thread.
  if (rt != nullptr && ProcessHasCuda()) {
    rt->StartGpuTracing();
  }
  return rt;
}

namespace {
// The MPI launchers and daemons (mpirun, Open MPI's orted, PRRTE, Hydra) inherit the variables that
// load us (a singleton MPI_Init forks orted from the profiled program; hwloc in mpirun or orted may
// load the CUDA driver, which then loads us through CUDA_INJECTION64_PATH) but are not ranks: a
// runtime there would claim rank 0's place at the aggregator.
bool IsMpiLauncherProcess() {
  static constexpr const char* kLaunchers[] = {"orted",   "orterun", "mpirun",          "mpiexec",       "prted",
                                               "prterun", "prte",    "hydra_pmi_proxy", "mpiexec.hydra", "slurmstepd"};
  const std::string_view self = program_invocation_short_name;
  for (const char* l : kLaunchers) {
    const std::string_view name = l;
    // "mpirun.openmpi" and the like are the same launcher under Debian's alternatives.
    if (self == name || (self.size() > name.size() && self.starts_with(name) && self[name.size()] == '.')) {
      return true;
    }
  }
  return false;
}

Runtime* CreateRuntime(int mpi_rank, int mpi_size) {
  if (Runtime* rt = ActiveRuntime()) {
    return rt;
  }
  if (g_inert.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_runtime_mu);
  if (Runtime* rt = g_runtime.load()) {
    return rt;
  }
  if (g_runtime_ended) {
    g_inert.store(true);
    return nullptr;
  }
  if ((std::getenv("COMMPROF_AGGREGATOR") == nullptr && std::getenv("COMMPROF_SPOOL_DIR") == nullptr) ||
      IsMpiLauncherProcess()) {
    g_runtime_ended = true;  // not a profiled run, or a launcher: stay inert for the process's life
    g_inert.store(true);
    return nullptr;
  }
  Identity id;
  int env_rank = RankFromEnvironment();
  int env_size = WorldSizeFromEnvironment();
  id.rank = static_cast<uint32_t>(mpi_rank >= 0 ? mpi_rank : (env_rank >= 0 ? env_rank : 0));
  id.world_size = static_cast<uint32_t>(mpi_size > 0 ? mpi_size : (env_size > 0 ? env_size : 1));
  id.mpi = mpi_rank >= 0;
  id.pid = static_cast<uint32_t>(::getpid());
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  id.host = host;
  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "commprof[rank %u]", id.rank);
  SetLogPrefix(prefix);
  static bool atfork_registered = false;
  if (!atfork_registered) {
    pthread_atfork(nullptr, nullptr, ForgetRuntimeInChild);
    atfork_registered = true;
  }
  auto* rt = new Runtime(ConfigFromEnv(), id);  // owned by g_runtime until ShutdownRuntime
  RecordSlurmIdentity(*rt);
  RecordLauncherPlace(*rt);
  rt->Start();
  g_runtime.store(rt, std::memory_order_release);
  // Registered after the libraries the runtime uses have set up their own exit handlers (OpenSSL
  // during the hello), so ours runs first and ships the last events while they still work.
  static bool atexit_registered = false;
  if (!atexit_registered) {
    std::atexit(ShutdownRuntime);
    atexit_registered = true;
  }
  return rt;
}
}  // namespace

void ShutdownRuntime() {
  Runtime* rt = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_runtime_mu);
    rt = g_runtime.exchange(nullptr);
    g_runtime_ended = true;
    g_inert.store(true);
  }
  // Threads that loaded the pointer just before the exchange may still record: the object is
  // shut down (final flush) but deliberately not freed, so such a late write stays harmless.
  if (rt != nullptr) {
    ForgetFatalSignalRuntime();
    rt->Shutdown();
    g_retired = rt;
  }
}

namespace {
// A program that exits without MPI_Finalize (or never used MPI) still sends its last events.
struct ExitFlush {
  ~ExitFlush() { ShutdownRuntime(); }
} g_exit_flush;
}  // namespace

}  // namespace commprof
