#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace commprof {
namespace {

LogLevel LevelFromEnv() {
  const char* v = std::getenv("COMMPROF_LOG");
  if (v == nullptr) {
    return LogLevel::kWarn;
  }
  if (std::strcmp(v, "error") == 0) {
    return LogLevel::kError;
  }
  if (std::strcmp(v, "info") == 0) {
    return LogLevel::kInfo;
  }
  if (std::strcmp(v, "debug") == 0) {
    return LogLevel::kDebug;
  }
  return LogLevel::kWarn;
}

std::atomic<int>& LevelStore() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

char g_prefix[64] = "commprof";
std::mutex g_log_mutex;

}  // namespace

LogLevel CurrentLogLevel() { return static_cast<LogLevel>(LevelStore().load(std::memory_order_relaxed)); }
void SetLogLevel(LogLevel level) { LevelStore().store(static_cast<int>(level)); }

void SetLogPrefix(const char* prefix) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::snprintf(g_prefix, sizeof g_prefix, "%s", prefix);
}

void Log(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) > LevelStore().load(std::memory_order_relaxed)) {
    return;
  }
  static const char* kNames[] = {"error", "warning", "info", "debug"};
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::fprintf(stderr, "%s: %s: %s\n", g_prefix, kNames[static_cast<int>(level)], line);
}

RateLimitedLog::RateLimitedLog(uint32_t burst, uint64_t window_ms, Clock now_ns)
    : burst_(burst), window_ns_(window_ms * 1000000ull), now_ns_(std::move(now_ns)) {
  if (!now_ns_) {
    now_ns_ = [] {
      return static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
              .count());
    };
  }
}

bool RateLimitedLog::Log(LogLevel level, const char* key, const char* fmt, ...) {
  if (static_cast<int>(level) > LevelStore().load(std::memory_order_relaxed)) {
    return false;
  }
  const uint64_t now = now_ns_();
  uint64_t told = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    KeyState& k = keys_[key];
    k.level = level;
    if (k.printed == 0 || now - k.window_start_ns >= window_ns_) {
      k.window_start_ns = now;
      k.printed = 0;
    }
    if (k.printed >= burst_) {
      ++k.suppressed;
      ++suppressed_total_;
      return false;
    }
    ++k.printed;
    told = k.suppressed;
    k.suppressed = 0;
  }
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (told > 0) {
    ::commprof::Log(level, "%s (%llu similar messages suppressed)", line, static_cast<unsigned long long>(told));
  } else {
    ::commprof::Log(level, "%s", line);
  }
  return true;
}

void RateLimitedLog::Flush() {
  std::map<std::string, KeyState> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, k] : keys_) {
      if (k.suppressed > 0) {
        pending[key] = k;
        k.suppressed = 0;
      }
    }
  }
  for (const auto& [key, k] : pending) {
    ::commprof::Log(k.level, "%llu similar messages suppressed (%s)", static_cast<unsigned long long>(k.suppressed),
                    key.c_str());
  }
}

uint64_t RateLimitedLog::suppressed_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return suppressed_total_;
}

}  // namespace commprof
