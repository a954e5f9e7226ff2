#include "core/log.h"

#include <atomic>
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

}  // namespace commprof
