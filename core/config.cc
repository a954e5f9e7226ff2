#include "core/config.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <string_view>
#include <utility>

#include "core/clock_domain.h"
#include "core/log.h"

namespace commprof {
namespace {

using enum EnvReader;

// Every environment variable commprof reads. Keep each reader's entries together, in EnvReader's
// order (the collector's first: ConfigOptions() is that prefix), and docs/cli.md "Environment" in
// step (config_test.cc checks both).
constexpr OptionSpec kEnvironment[] = {
    // The collector (libcommprof.so) in every rank.
    {"COMMPROF_AGGREGATOR", "", "host:port of the aggregator; set by `commprof run`. Set but empty: spool only.",
     kCollector},
    {"COMMPROF_SECRET", "",
     "per-job secret proving the collector belongs to the job (HMAC in the hello); set by `commprof run`. "
     "`commprof aggregate` also reads it when --secret-file is not given.",
     kCollector},
    {"COMMPROF_JOB_ID", "", "job id stored in the file; set by `commprof run`.", kCollector},
    {"COMMPROF_SPOOL_DIR", "commprof-spool", "where frames go when the aggregator cannot be reached.", kCollector},
    {"COMMPROF_RELAY", "",
     "relays (docs/scale.md#relays): `node` for one per node, N for one per N ranks of a node; unset or 0: "
     "every rank connects to COMMPROF_AGGREGATOR itself. Set by `commprof run --relay`.",
     kCollector},
    {"COMMPROF_RELAY_COMMAND", "",
     "the commprof executable a rank starts its node's relay with; set by `commprof run`.", kCollector},
    {"COMMPROF_SHARD_DIR", "",
     "where relays write their shards (visible to the aggregator's node; a relative path is taken from the "
     "rank's working directory; made if it does not exist); set by `commprof run`.",
     kCollector},
    {"COMMPROF_RELAY_OPTIONS", "",
     "more `commprof relay` options, space-separated (--queue-mb N --compression C --flush-ms MS); set by `commprof "
     "run`.",
     kCollector},
    {"COMMPROF_BUFFER_EVENTS", "65536", "per-thread ring capacity in events (64 bytes each; at least 16).", kCollector},
    {"COMMPROF_MEMORY_MB", "256", "budget for all thread rings of a process; threads past it drop (counted).",
     kCollector},
    {"COMMPROF_FLUSH_MS", "20", "how often the shipper thread drains the rings.", kCollector},
    {"COMMPROF_REQUEST_SLOTS", "65536", "non-blocking MPI requests tracked at once; more are counted as dropped.",
     kCollector},
    {"COMMPROF_CONNECT_TIMEOUT_MS", "5000",
     "how long a rank waits for the TCP connect, and again for the hello-ack, before spooling.", kCollector},
    {"COMMPROF_RECONNECT_MS", "10000",
     "after a lost connection, how long a rank keeps trying to reconnect (with back-off, holding what the "
     "aggregator has not acknowledged in memory) before it writes that to its spool file; 0: spool at once.",
     kCollector},
    {"COMMPROF_SEND_TIMEOUT_MS", "30000",
     "when a send to the aggregator (or relay) does not complete within this many ms (its writer far behind), the "
     "rank writes the rest to its spool, merged at the end; 0: wait as long as it takes.",
     kCollector},
    {"COMMPROF_RETAIN_MB", "64",
     "memory for events sent but not yet acknowledged as stored; beyond it the oldest are forgotten (counted as "
     "unconfirmed_batches).",
     kCollector},
    {"COMMPROF_BYE_ACK_MS", "5000",
     "how long a rank waits at exit for the aggregator to confirm its whole stream is on disk before it writes "
     "what is unconfirmed to its spool file.",
     kCollector},
    {"COMMPROF_SIGNALS", "on",
     "on SIGSEGV, SIGBUS, SIGABRT or SIGTERM ship the rank's buffered events and record the signal before the "
     "program's own handling goes on; off, 0, false or no turn it off.",
     kCollector},
    {"COMMPROF_HANG_HISTORY", "16",
     "completed collectives kept per communicator (1-1024) for a hang diagnosis's history; a hang-query asking "
     "for more gets these.",
     kCollector},
    {"COMMPROF_LOG", "warn", "log level on stderr: error, warn, info, debug (every part of commprof reads it).",
     kCollector},
    {"COMMPROF_CLOCK_SYNC", "on",
     "clock alignment against rank 0 (MPI) or the aggregator (TCP); off, 0, false or no turn it off.", kCollector},
    {"COMMPROF_AGGREGATOR_CLOCK", "",
     "which clock the aggregator reads (16 hex digits); set by `commprof run`. A rank without MPI on the "
     "aggregator's clock takes offset 0, drift 0 and bound 0 instead of measuring.",
     kCollector},
    {"COMMPROF_CLOCK_SYNC_INTERVAL_MS", "2000",
     "period of re-synchronization during the run (0: only at start and end).", kCollector},
    {"COMMPROF_CLOCK_SYNC_ROUNDS", "64",
     "ping-pong rounds of the first and last epoch, half in periodic ones (the minimum round trip is kept).",
     kCollector},
    {"COMMPROF_ACTIVITIES", "all",
     "event sources to record, comma-separated: cpu, mpi, nccl, cuda, memory, nvtx, or all; set by `commprof run "
     "--activities` and by the SPANK plugin's activities= option.",
     kCollector},
    {"COMMPROF_CUDA_API", "launch",
     "CUDA API calls recorded (kind 24) with the cuda activity: launch (kernel, host-function and graph launches), "
     "all (every runtime and driver call), none.",
     kCollector},
    {"COMMPROF_STACKS", "0",
     "call sites: the calling stack of every MPI and NCCL API call, at most this many frames (1-64; 0: off); set "
     "by `commprof run --stacks[=DEPTH]`.",
     kCollector},
    {"COMMPROF_CUPTI_BUFFER_KB", "4096", "size of one CUPTI activity buffer in KiB (at least 64).", kCollector},
    {"COMMPROF_CUPTI_BUFFERS", "16",
     "CUPTI activity buffers lent at most (1-64); when all are in use CUPTI drops records (counted).", kCollector},
    {"COMMPROF_SCHEDULE", "",
     "record only the steps torch.profiler.schedule would: wait=W,warmup=U,active=A,repeat=R[,skip_first=S]; set by "
     "`commprof run --schedule`.",
     kCollector},
    {"COMMPROF_DELAY", "", "seconds after the collector starts before recording begins; set by `commprof run --delay`.",
     kCollector},
    {"COMMPROF_DURATION", "",
     "seconds of recording from then on (unset: until the process ends); set by `commprof run --duration`.",
     kCollector},
    {"COMMPROF_STEP_RANGE", "",
     "NVTX ranges named this (or this#N) begin a step, as ProfilerStep#N does; set by `commprof run --step-range`.",
     kCollector},
    {"COMMPROF_STEP_EVERY", "",
     "N[:COMM]: collective 0, N, 2N, ... of communicator COMM (world, or a name given with MPI_Comm_set_name) "
     "begins step 0, 1, 2, ...; set by `commprof run --step-every`.",
     kCollector},
    {"COMMPROF_FAKE_CLOCK_OFFSET_NS", "",
     "TESTING AID: comma-separated offsets in ns, item i for rank i, added to the clock.", kCollector},
    {"COMMPROF_FAKE_CLOCK_DRIFT_PPM", "", "TESTING AID: comma-separated drifts in ppm, item i for rank i.", kCollector},
    {"COMMPROF_FAKE_HOST", "",
     "TESTING AID: comma-separated host numbers, item i for rank i: ranks with equal numbers are one simulated "
     "host (one clock), the others different ones.",
     kCollector},
    {"COMMPROF_FAKE_HOST_CLOCK_OFFSET_NS", "",
     "TESTING AID: comma-separated offsets in ns, item h for simulated host h, added to its ranks' clock.", kCollector},
    {"COMMPROF_FAKE_HOST_CLOCK_DRIFT_PPM", "",
     "TESTING AID: comma-separated drifts in ppm, item h for simulated host h, applied to the steady clock's reading.",
     kCollector},

    // The NCCL profiler plugin.
    {"COMMPROF_NCCL_DETAIL", "",
     "proxy: also ask NCCL for proxy-op and proxy-step events and store them (kinds 21, 22); other values: off.",
     kNcclPlugin},
    {"COMMPROF_NCCL_EVENTS", "4096",
     "event slots per NCCL communicator (64 to 16777216; other values: the default); events past it are dropped "
     "(counted).",
     kNcclPlugin},

    // The commprof command.
    {"COMMPROF_LIBRARY", "", "the libcommprof.so `commprof run` preloads when --library is not given.", kCommand},
    {"COMMPROF_ANALYSIS_MPI", "",
     "off (or 0, false, no): a `commprof report`, `stats` or `export` started by an MPI launcher runs alone in "
     "each process, not as one distributed command.",
     kCommand},
    {"COMMPROF_READ_STALL_S", "60",
     "seconds a read of a file inside the HDF5 library may make no progress before the file is called damaged "
     "(exit code 2, naming it: a damaged file can make libhdf5 loop forever); 0: no limit.",
     kCommand},
    {"COMMPROF_TEST_WRITER_DELAY_US", "",
     "TESTING AID: `commprof run` and `commprof aggregate` make their writer sleep this many microseconds per "
     "1000 events written, standing for a slow disk, and give each connection a 64 KiB receive buffer (the "
     "back-pressure tests).",
     kCommand},

    // Set by the launcher or Slurm.
    {"PMIX_RANK", "",
     "the rank, when the collector starts before MPI_Init or without MPI: the first set of PMIX_RANK, "
     "OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID (none: rank 0).",
     kLauncher},
    {"OMPI_COMM_WORLD_RANK", "", "the rank without MPI_Init, as PMIX_RANK.", kLauncher},
    {"PMI_RANK", "", "the rank without MPI_Init, as PMIX_RANK.", kLauncher},
    {"OMPI_COMM_WORLD_SIZE", "",
     "the world size, when the collector starts before MPI_Init or without MPI: the first set of "
     "OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS (none: 1).",
     kLauncher},
    {"PMI_SIZE", "", "the world size without MPI_Init, as OMPI_COMM_WORLD_SIZE.", kLauncher},
    // (OMPI_COMM_WORLD_SIZE or PMI_SIZE above 1, or PMIX_RANK set, also make `commprof report` one
    // process of a distributed report: docs/scale.md#distributed-analysis.)
    {"SLURM_JOB_ID", "",
     "the default job id of `commprof run` and `commprof aggregate`; stored per rank as slurm_job_id.", kLauncher},
    {"SLURM_STEP_ID", "", "stored per rank as slurm_step_id (when a number); names the SPANK plugin's files.",
     kLauncher},
    {"SLURM_PROCID", "", "stored per rank as slurm_procid; the rank without MPI_Init, as PMIX_RANK.", kLauncher},
    {"SLURM_LOCALID", "", "stored per rank as slurm_localid; the rank's place on its node (relay groups).", kLauncher},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "",
     "the rank's place on its node, which picks its relay with COMMPROF_RELAY=N: the first set of "
     "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK, MPI_LOCALRANKID (none: 0).",
     kLauncher},
    {"LOCAL_RANK", "",
     "the rank's place on its node (torchrun); a torch launcher's worker's own (docs/torchrun.md), else as "
     "OMPI_COMM_WORLD_LOCAL_RANK.",
     kLauncher},
    {"RANK", "",
     "a torch launcher's worker's rank (torchrun, DeepSpeed, Accelerate): with WORLD_SIZE and one of MASTER_ADDR, "
     "GROUP_RANK, TORCHELASTIC_RUN_ID it wins over the MPI and Slurm variables (docs/torchrun.md).",
     kLauncher},
    {"WORLD_SIZE", "", "a torch launcher's world size, with RANK.", kLauncher},
    {"MASTER_ADDR", "", "set by the torch launchers: with RANK and WORLD_SIZE, marks a torch launcher's worker.",
     kLauncher},
    {"GROUP_RANK", "", "torchrun's node index: stored per rank as group_rank.", kLauncher},
    {"TORCHELASTIC_RUN_ID", "", "set by torchrun: with RANK and WORLD_SIZE, marks a torch launcher's worker.",
     kLauncher},
    {"TORCHELASTIC_RESTART_COUNT", "", "torch elastic's restart count: stored per rank as restart_count.", kLauncher},
    {"MPI_LOCALRANKID", "", "the rank's place on its node (MPICH's Hydra), as OMPI_COMM_WORLD_LOCAL_RANK.", kLauncher},
    {"SLURM_NODEID", "", "stored per rank as slurm_nodeid.", kLauncher},
    {"SLURM_STEP_NUM_TASKS", "",
     "the tasks of the srun step: more than 1 without PMI variables (srun without --mpi=pmix) makes `commprof "
     "report` refuse (they cannot make one report) and `export`, `stats` refuse as for mpirun.",
     kLauncher},
    {"SLURMD_NODENAME", "", "the node a rank's relay serves (COMMPROF_RELAY), before the host name.", kLauncher},
    {"SLURM_NTASKS", "",
     "the world size without MPI_Init, as OMPI_COMM_WORLD_SIZE; the ranks the SPANK plugin's aggregator expects.",
     kLauncher},
    {"LD_PRELOAD", "", "kept by `commprof run` and the SPANK plugin after the libcommprof.so they put first.",
     kLauncher},
    {"PATH", "", "where `commprof run` looks for the command before it creates anything (exit 127 when absent).",
     kLauncher},
    {"TMPDIR", "", "where a node's relay rendezvous directory goes (commprof-relays-UID; unset: /tmp).", kLauncher},
    {"NCCL_PROFILER_PLUGIN", "",
     "set by `commprof run` and the SPANK plugin to commprof's NCCL plugin (nccl activity); a value already set "
     "is kept and commprof's plugin is not loaded.",
     kLauncher},
    {"NVTX_INJECTION64_PATH", "",
     "set by `commprof run` and the SPANK plugin to libcommprof.so (nvtx activity); a value already set is kept.",
     kLauncher},
    {"CUDA_INJECTION64_PATH", "",
     "set by `commprof run` and the SPANK plugin to libcommprof.so (cuda, memory activities); a value already "
     "set is kept.",
     kLauncher},
};

constexpr size_t CountCollectorOptions() {
  size_t n = 0;
  while (n < std::size(kEnvironment) && kEnvironment[n].reader == kCollector) {
    ++n;
  }
  return n;
}
constexpr size_t kCollectorOptions = CountCollectorOptions();

// Readers appear in EnvReader's order, each in one run of entries.
constexpr bool ReadersGrouped() {
  for (size_t i = 1; i < std::size(kEnvironment); ++i) {
    if (kEnvironment[i].reader < kEnvironment[i - 1].reader) {
      return false;
    }
  }
  return true;
}
static_assert(ReadersGrouped(), "kEnvironment: keep each reader's variables together, in EnvReader's order");

const OptionSpec* FindOption(std::string_view name) {
  for (const auto& o : kEnvironment) {
    if (name == o.env) {
      return &o;
    }
  }
  return nullptr;
}

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  if (v != nullptr) {
    return v;
  }
  const OptionSpec* o = FindOption(name);
  return o != nullptr ? o->default_value : "";
}

uint32_t EnvU32(const char* name, uint32_t min_value) {
  std::string text = EnvOr(name);
  char* end = nullptr;
  unsigned long v = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || v < min_value || v > 0xFFFFFFFFul) {
    const OptionSpec* o = FindOption(name);
    std::string def = o != nullptr ? o->default_value : "";
    COMMPROF_LOG_WARN("%s=%s is not a number >= %u; using %s", name, text.c_str(), min_value, def.c_str());
    v = std::strtoul(def.c_str(), nullptr, 10);
  }
  return static_cast<uint32_t>(v);
}

}  // namespace

uint32_t EnvNumber(const char* name, uint32_t min_value) { return EnvU32(name, min_value); }

std::span<const OptionSpec> EnvironmentVariables() { return kEnvironment; }

std::span<const OptionSpec> ConfigOptions() { return std::span<const OptionSpec>(kEnvironment, kCollectorOptions); }

const char* EnvReaderTitle(EnvReader reader) {
  switch (reader) {
    case kCollector:
      return "The collector (libcommprof.so) in every rank; `commprof run` forwards every COMMPROF_* it has";
    case kNcclPlugin:
      return "The NCCL profiler plugin (libnccl-profiler-commprof.so)";
    case kCommand:
      return "The commprof command";
    case kLauncher:
      return "Set by the MPI launcher, Slurm or the user; read by commprof";
  }
  return "";
}

std::string EnvironmentHelp() {
  std::string out = "Environment variables commprof reads (docs/cli.md \"Environment\"):\n";
  for (size_t i = 0; i < std::size(kEnvironment); ++i) {
    const OptionSpec& o = kEnvironment[i];
    if (i == 0 || o.reader != kEnvironment[i - 1].reader) {
      out += std::string("\n") + EnvReaderTitle(o.reader) + ":\n";
    }
    out += "  " + std::string(o.env);
    if (*o.default_value != '\0') {
      out += std::string(" (default ") + o.default_value + ")";
    }
    out += std::string(": ") + o.description + "\n";
  }
  return out;
}

namespace {
constexpr std::pair<const char*, Activity> kActivityNames[] = {
    {"cpu", kActivityCpu},   {"mpi", kActivityMpi},       {"nccl", kActivityNccl},
    {"cuda", kActivityCuda}, {"memory", kActivityMemory}, {"nvtx", kActivityNvtx},
};
}  // namespace

bool ParseActivities(const std::string& text, uint32_t& mask, std::string& error) {
  if (text == "all") {
    mask = kActivityAll;
    return true;
  }
  uint32_t m = 0;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    uint32_t bit = 0;
    for (const auto& [name, b] : kActivityNames) {
      if (item == name) {
        bit = b;
      }
    }
    if (bit == 0) {
      error = "unknown activity '" + item + "' (known: cpu, mpi, nccl, cuda, memory, nvtx, all)";
      return false;
    }
    if ((m & bit) != 0) {
      error = "activity '" + item + "' is listed twice";
      return false;
    }
    m |= bit;
    if (comma == std::string::npos) {
      break;
    }
    start = comma + 1;
  }
  mask = m;
  return true;
}

std::string ActivitiesToString(uint32_t mask) {
  std::string out;
  for (const auto& [name, b] : kActivityNames) {
    if ((mask & b) == 0) {
      continue;
    }
    if (!out.empty()) {
      out += ',';
    }
    out += name;
  }
  return out.empty() ? "none" : out;
}

bool IsOffSwitch(const std::string& value) {
  std::string v;
  for (char ch : value) {
    v += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return v == "off" || v == "0" || v == "false" || v == "no";
}

bool PerRankValue(const std::string& list, uint32_t rank, double& out) {
  size_t start = 0;
  for (uint32_t i = 0;; ++i) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (i == rank) {
      char* end = nullptr;
      double v = std::strtod(item.c_str(), &end);
      if (item.empty() || end == nullptr || *end != '\0') {
        return false;
      }
      out = v;
      return true;
    }
    if (comma == std::string::npos) {
      return false;
    }
    start = comma + 1;
  }
}

Config ConfigFromEnv() {
  Config c;
  c.aggregator = EnvOr("COMMPROF_AGGREGATOR");
  c.secret = EnvOr("COMMPROF_SECRET");
  c.job_id = EnvOr("COMMPROF_JOB_ID");
  c.spool_dir = EnvOr("COMMPROF_SPOOL_DIR");
  if (std::string relay = EnvOr("COMMPROF_RELAY"); relay == "node") {
    c.relay_ranks = kRelayPerNode;
  } else if (!relay.empty()) {
    c.relay_ranks = EnvU32("COMMPROF_RELAY", 0);
  }
  c.relay_command = EnvOr("COMMPROF_RELAY_COMMAND");
  c.shard_dir = EnvOr("COMMPROF_SHARD_DIR");
  if (!c.shard_dir.empty() && c.shard_dir.front() != '/') {
    // The relay reports its shard's path to the job's aggregator, which links it from its own
    // directory: a path relative to this rank's would name another file there.
    std::array<char, 4096> cwd{};
    if (::getcwd(cwd.data(), cwd.size()) != nullptr) {
      c.shard_dir = std::string(cwd.data()) + "/" + c.shard_dir;
    }
  }
  c.relay_options = EnvOr("COMMPROF_RELAY_OPTIONS");
  c.buffer_events = EnvU32("COMMPROF_BUFFER_EVENTS", 16);
  c.memory_mb = EnvU32("COMMPROF_MEMORY_MB", 1);
  c.flush_ms = EnvU32("COMMPROF_FLUSH_MS", 1);
  c.request_slots = EnvU32("COMMPROF_REQUEST_SLOTS", 16);
  c.connect_timeout_ms = EnvU32("COMMPROF_CONNECT_TIMEOUT_MS", 0);
  c.reconnect_ms = EnvU32("COMMPROF_RECONNECT_MS", 0);
  c.retain_mb = EnvU32("COMMPROF_RETAIN_MB", 1);
  c.send_timeout_ms = EnvU32("COMMPROF_SEND_TIMEOUT_MS", 0);
  c.bye_ack_ms = EnvU32("COMMPROF_BYE_ACK_MS", 0);
  c.hang_history = EnvU32("COMMPROF_HANG_HISTORY", 1);
  if (c.hang_history > kMaxHangHistory) {
    COMMPROF_LOG_WARN("COMMPROF_HANG_HISTORY=%u is above %u; using %u", c.hang_history, kMaxHangHistory,
                      kMaxHangHistory);
    c.hang_history = kMaxHangHistory;
  }
  std::string signals = EnvOr("COMMPROF_SIGNALS");
  c.signal_handlers = !IsOffSwitch(signals);
  std::string sync = EnvOr("COMMPROF_CLOCK_SYNC");
  c.clock_sync = !IsOffSwitch(sync);
  if (std::string key = EnvOr("COMMPROF_AGGREGATOR_CLOCK"); !key.empty()) {
    c.aggregator_clock_domain = ParseClockDomain(key);
    if (!c.aggregator_clock_domain) {
      COMMPROF_LOG_WARN("COMMPROF_AGGREGATOR_CLOCK=%s is not 16 hex digits; ignored (clocks aligned by ping-pong)",
                        key.c_str());
    }
  }
  c.clock_sync_interval_ms = EnvU32("COMMPROF_CLOCK_SYNC_INTERVAL_MS", 0);
  c.clock_sync_rounds = EnvU32("COMMPROF_CLOCK_SYNC_ROUNDS", 1);
  c.fake_clock_offset_ns = EnvOr("COMMPROF_FAKE_CLOCK_OFFSET_NS");
  c.fake_clock_drift_ppm = EnvOr("COMMPROF_FAKE_CLOCK_DRIFT_PPM");
  c.fake_host = EnvOr("COMMPROF_FAKE_HOST");
  c.fake_host_clock_offset_ns = EnvOr("COMMPROF_FAKE_HOST_CLOCK_OFFSET_NS");
  c.fake_host_clock_drift_ppm = EnvOr("COMMPROF_FAKE_HOST_CLOCK_DRIFT_PPM");
  std::string error;
  if (std::string acts = EnvOr("COMMPROF_ACTIVITIES"); !ParseActivities(acts, c.activities, error)) {
    COMMPROF_LOG_WARN("COMMPROF_ACTIVITIES=%s: %s; recording all", acts.c_str(), error.c_str());
    c.activities = kActivityAll;
  }
  c.cuda_api = EnvOr("COMMPROF_CUDA_API");
  c.stacks = EnvU32("COMMPROF_STACKS", 0);
  if (c.stacks > kMaxStackDepth) {
    COMMPROF_LOG_WARN("COMMPROF_STACKS=%u is above %u; using %u", c.stacks, kMaxStackDepth, kMaxStackDepth);
    c.stacks = kMaxStackDepth;
  }
  c.cupti_buffer_kb = EnvU32("COMMPROF_CUPTI_BUFFER_KB", 64);
  const CaptureTexts names = CaptureEnvironmentNames();
  const CaptureTexts texts = {EnvOr(names.schedule.c_str()), EnvOr(names.delay.c_str()), EnvOr(names.duration.c_str()),
                              EnvOr(names.step_range.c_str()), EnvOr(names.step_every.c_str())};
  if (!ParseCapturePlan(texts, names, c.capture, error)) {
    COMMPROF_LOG_WARN("%s; recording without steps or capture windows", error.c_str());
  }
  c.cupti_buffers = EnvU32("COMMPROF_CUPTI_BUFFERS", 1);
  if (c.cupti_buffers > 64) {
    COMMPROF_LOG_WARN("COMMPROF_CUPTI_BUFFERS=%u is above 64; using 64", c.cupti_buffers);
    c.cupti_buffers = 64;
  }
  return c;
}

}  // namespace commprof
