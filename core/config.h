// Configuration from environment variables. Every variable commprof reads, in any of its parts, is
// declared once, with its default and a one-line meaning, in kEnvironment (config.cc). That table
// is what `commprof --help-env` prints and what the `commprof run --help` footer lists, and a unit
// test (tests/unit/core/config_test.cc) fails when a variable in it is missing from docs/cli.md
// "Environment", or when the product code names a variable that is not in it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/capture_options.h"

namespace commprof {

// The part of commprof that reads a variable.
enum class EnvReader : uint8_t {
  kCollector,   // libcommprof.so in every rank (Config below, and the log level)
  kNcclPlugin,  // libnccl-profiler-commprof.so
  kCommand,     // the `commprof` command itself
  kLauncher,    // set by the MPI launcher or Slurm; read by the collector, `commprof` and the SPANK plugin
};

struct OptionSpec {
  const char* env;
  const char* default_value;  // "" = unset (an empty value can differ from unset: see the meaning)
  const char* description;
  EnvReader reader;
};

// Every environment variable commprof reads, grouped by reader in EnvReader's order.
std::span<const OptionSpec> EnvironmentVariables();
// The collector's own variables (reader kCollector): the first entries of EnvironmentVariables().
std::span<const OptionSpec> ConfigOptions();
// A heading for each reader, as `commprof --help-env` prints it.
const char* EnvReaderTitle(EnvReader reader);
// The text of `commprof --help-env`: one line per variable (name, default, meaning), by reader.
std::string EnvironmentHelp();

// Event sources `commprof run --activities` (COMMPROF_ACTIVITIES) selects, after torch.profiler's
// `activities`: a rank records only what its mask allows.
enum Activity : uint32_t {
  kActivityCpu = 1u << 0,     // the C API's ranges, marks and steps
  kActivityMpi = 1u << 1,     // MPI calls through PMPI
  kActivityNccl = 1u << 2,    // the NCCL profiler plugin
  kActivityCuda = 1u << 3,    // CUPTI kernels, memory copies, memsets, synchronization, launch calls
  kActivityMemory = 1u << 4,  // CUPTI allocations and frees
  kActivityNvtx = 1u << 5,    // NVTX injection (and NCCL's own NVTX ranges)
  kActivityAll = (1u << 6) - 1,
};

// Parses "cpu,mpi,nccl,cuda,memory,nvtx" or "all" (case-sensitive, comma-separated, each name
// once at most); false with `error` naming the bad item otherwise.
bool ParseActivities(const std::string& text, uint32_t& mask, std::string& error);
// The list form of a mask, in the canonical order ("cpu,mpi,..."), "none" for 0.
std::string ActivitiesToString(uint32_t mask);

inline constexpr uint32_t kMaxHangHistory = 1024;  // COMMPROF_HANG_HISTORY's ceiling

inline constexpr uint32_t kRelayPerNode = 0xffffffffu;  // COMMPROF_RELAY=node

struct Config {
  std::string aggregator;  // host:port; empty = spool only
  std::string secret;      // per-job secret for the hello HMAC
  std::string job_id;
  std::string spool_dir;
  // Relays (docs/scale.md#relays): ranks per relay on a node, 0 for none, kRelayPerNode for one
  // per node; the commprof executable that runs them, their shard directory and extra options.
  uint32_t relay_ranks = 0;
  std::string relay_command;
  std::string shard_dir;
  std::string relay_options;
  uint32_t buffer_events = 0;  // per-thread ring capacity (events)
  uint32_t memory_mb = 0;      // total budget for event buffers
  uint32_t flush_ms = 0;       // shipper period
  uint32_t request_slots = 0;  // in-flight non-blocking requests tracked
  uint32_t connect_timeout_ms = 0;
  // The delivery settings default to the documented values even in a Config built by hand.
  uint32_t reconnect_ms = 10000;     // how long to try to reconnect before spooling
  uint32_t retain_mb = 64;           // events sent but not acknowledged, kept for a resend
  uint32_t send_timeout_ms = 30000;  // an aggregator taking nothing this long is congested: spool
  uint32_t bye_ack_ms = 5000;        // wait at exit for the stream's acknowledgement
  bool signal_handlers = true;       // ship on fatal signals
  uint32_t hang_history = 16;  // completed collectives kept per communicator for a hang-state (1..kMaxHangHistory)
  bool clock_sync = true;
  // The aggregator's SystemClockDomain() (COMMPROF_AGGREGATOR_CLOCK, set by `commprof run`); a
  // rank without MPI whose clock has this key shares the aggregator's clock: aligned exactly,
  // without ping-pongs. nullopt: unknown.
  std::optional<uint64_t> aggregator_clock_domain;
  uint32_t clock_sync_interval_ms = 0;
  uint32_t clock_sync_rounds = 0;
  std::string fake_clock_offset_ns;  // testing aid: per-rank lists, see kOptions
  std::string fake_clock_drift_ppm;
  std::string fake_host;                  // testing aid: per-rank host numbers (simulated hosts)
  std::string fake_host_clock_offset_ns;  // testing aid: per-host lists, item h for host h
  std::string fake_host_clock_drift_ppm;
  uint32_t activities = kActivityAll;  // enum Activity bits
  std::string cuda_api;                // CUDA API calls recorded by CUPTI: launch, all, none
  uint32_t cupti_buffer_kb = 0;        // size of one CUPTI activity buffer
  uint32_t cupti_buffers = 0;          // CUPTI activity buffers at most (1..64)
  CapturePlan capture;                 // steps and capture windows (core/capture_options.h)
  uint32_t stacks = 0;                 // call-site frames per MPI/NCCL API call (0: off; collector/call_stacks.h)
};

// The deepest call stack `--stacks` / COMMPROF_STACKS may ask for.
inline constexpr uint32_t kMaxStackDepth = 64;

// Item `rank` of a comma-separated list of numbers; false when absent or not a number.
bool PerRankValue(const std::string& list, uint32_t rank, double& out);

// A declared variable as a number: its value, else its declared default (with a warning when the
// value is malformed or below `min_value`), as ConfigFromEnv reads its numbers.
uint32_t EnvNumber(const char* name, uint32_t min_value);

// Whether a switch's value turns it off: off, 0, false or no, in any case (COMMPROF_SIGNALS,
// COMMPROF_CLOCK_SYNC, COMMPROF_ANALYSIS_MPI).
bool IsOffSwitch(const std::string& value);

// Reads the environment; malformed numbers fall back to the default with a warning (the
// profiled program must run on regardless).
Config ConfigFromEnv();

}  // namespace commprof
