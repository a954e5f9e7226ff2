#include "core/config.h"

#include <cstdlib>
#include <string_view>
#include <utility>

#include "core/log.h"

namespace commprof {
namespace {

constexpr OptionSpec kOptions[] = {
    {"COMMPROF_AGGREGATOR", "", "host:port of the aggregator; set by `commprof run`. Empty: spool only."},
    {"COMMPROF_SECRET", "", "per-job secret proving the collector belongs to the job (HMAC in the hello)."},
    {"COMMPROF_JOB_ID", "", "job id stored in the file; set by `commprof run`."},
    {"COMMPROF_SPOOL_DIR", "commprof-spool", "where frames go when the aggregator cannot be reached."},
    {"COMMPROF_BUFFER_EVENTS", "65536", "per-thread ring capacity in events (64 bytes each)."},
    {"COMMPROF_MEMORY_MB", "256", "budget for all thread rings of a process; threads past it drop (counted)."},
    {"COMMPROF_FLUSH_MS", "20", "how often the shipper thread drains the rings."},
    {"COMMPROF_REQUEST_SLOTS", "65536", "non-blocking MPI requests tracked at once; more are counted as dropped."},
    {"COMMPROF_CONNECT_TIMEOUT_MS", "5000", "how long a rank waits for the aggregator before spooling."},
    {"COMMPROF_LOG", "warn", "log level on stderr: error, warn, info, debug."},
    {"COMMPROF_CLOCK_SYNC", "on", "clock alignment against rank 0 (MPI) or the aggregator (TCP): on or off."},
    {"COMMPROF_CLOCK_SYNC_INTERVAL_MS", "2000",
     "period of re-synchronization during the run (0: only at start and end)."},
    {"COMMPROF_CLOCK_SYNC_ROUNDS", "64",
     "ping-pong rounds per synchronization epoch (the minimum round trip is kept)."},
    {"COMMPROF_ACTIVITIES", "all",
     "event sources to record, comma-separated: cpu, mpi, nccl, cuda, memory, nvtx, or all; set by `commprof run "
     "--activities`."},
    {"COMMPROF_CUDA_API", "launch",
     "CUDA API calls recorded (kind 24) with the cuda activity: launch (kernel, host-function and graph launches), "
     "all (every runtime and driver call), none."},
    {"COMMPROF_CUPTI_BUFFER_KB", "4096", "size of one CUPTI activity buffer in KiB (CUPTI recommends 1-10 MiB)."},
    {"COMMPROF_CUPTI_BUFFERS", "16",
     "CUPTI activity buffers lent at most (1-64); when all are in use CUPTI drops records (counted)."},
    {"COMMPROF_FAKE_CLOCK_OFFSET_NS", "",
     "TESTING AID: comma-separated offsets, item i for rank i, added to the clock."},
    {"COMMPROF_FAKE_CLOCK_DRIFT_PPM", "", "TESTING AID: comma-separated drifts in ppm, item i for rank i."},
};

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  if (v != nullptr) return v;
  for (const auto& o : kOptions) {
    if (std::string_view(o.env) == name) return o.default_value;
  }
  return {};
}

uint32_t EnvU32(const char* name, uint32_t min_value) {
  std::string text = EnvOr(name);
  char* end = nullptr;
  unsigned long v = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || v < min_value || v > 0xFFFFFFFFul) {
    std::string def;
    for (const auto& o : kOptions) {
      if (std::string_view(o.env) == name) def = o.default_value;
    }
    COMMPROF_LOG_WARN("%s=%s is not a number >= %u; using %s", name, text.c_str(), min_value, def.c_str());
    v = std::strtoul(def.c_str(), nullptr, 10);
  }
  return static_cast<uint32_t>(v);
}

}  // namespace

std::span<const OptionSpec> ConfigOptions() { return kOptions; }

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
      if (item == name) bit = b;
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
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  mask = m;
  return true;
}

std::string ActivitiesToString(uint32_t mask) {
  std::string out;
  for (const auto& [name, b] : kActivityNames) {
    if ((mask & b) == 0) continue;
    if (!out.empty()) out += ',';
    out += name;
  }
  return out.empty() ? "none" : out;
}

bool PerRankValue(const std::string& list, uint32_t rank, double& out) {
  size_t start = 0;
  for (uint32_t i = 0;; ++i) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (i == rank) {
      char* end = nullptr;
      double v = std::strtod(item.c_str(), &end);
      if (item.empty() || end == nullptr || *end != '\0') return false;
      out = v;
      return true;
    }
    if (comma == std::string::npos) return false;
    start = comma + 1;
  }
}

Config ConfigFromEnv() {
  Config c;
  c.aggregator = EnvOr("COMMPROF_AGGREGATOR");
  c.secret = EnvOr("COMMPROF_SECRET");
  c.job_id = EnvOr("COMMPROF_JOB_ID");
  c.spool_dir = EnvOr("COMMPROF_SPOOL_DIR");
  c.buffer_events = EnvU32("COMMPROF_BUFFER_EVENTS", 16);
  c.memory_mb = EnvU32("COMMPROF_MEMORY_MB", 1);
  c.flush_ms = EnvU32("COMMPROF_FLUSH_MS", 1);
  c.request_slots = EnvU32("COMMPROF_REQUEST_SLOTS", 16);
  c.connect_timeout_ms = EnvU32("COMMPROF_CONNECT_TIMEOUT_MS", 0);
  std::string sync = EnvOr("COMMPROF_CLOCK_SYNC");
  c.clock_sync = !(sync == "off" || sync == "0" || sync == "false" || sync == "no");
  c.clock_sync_interval_ms = EnvU32("COMMPROF_CLOCK_SYNC_INTERVAL_MS", 0);
  c.clock_sync_rounds = EnvU32("COMMPROF_CLOCK_SYNC_ROUNDS", 1);
  c.fake_clock_offset_ns = EnvOr("COMMPROF_FAKE_CLOCK_OFFSET_NS");
  c.fake_clock_drift_ppm = EnvOr("COMMPROF_FAKE_CLOCK_DRIFT_PPM");
  std::string error;
  if (std::string acts = EnvOr("COMMPROF_ACTIVITIES"); !ParseActivities(acts, c.activities, error)) {
    COMMPROF_LOG_WARN("COMMPROF_ACTIVITIES=%s: %s; recording all", acts.c_str(), error.c_str());
    c.activities = kActivityAll;
  }
  c.cuda_api = EnvOr("COMMPROF_CUDA_API");
  c.cupti_buffer_kb = EnvU32("COMMPROF_CUPTI_BUFFER_KB", 64);
  c.cupti_buffers = EnvU32("COMMPROF_CUPTI_BUFFERS", 1);
  if (c.cupti_buffers > 64) {
    COMMPROF_LOG_WARN("COMMPROF_CUPTI_BUFFERS=%u is above 64; using 64", c.cupti_buffers);
    c.cupti_buffers = 64;
  }
  return c;
}

}  // namespace commprof
