// One logger for the whole product. In the profiled process it never throws or exits: a
// tracing problem is a line on stderr (prefixed so users can grep it) and a counter.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace commprof {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Level from COMMPROF_LOG (error|warn|info|debug), read once; default warn.
LogLevel CurrentLogLevel();
void SetLogLevel(LogLevel level);
void SetLogPrefix(const char* prefix);  // e.g. "commprof[rank 3]"

void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// A logger for lines a peer can provoke at will (refused connections, accept errors): per key,
// at most `burst` lines per `window_ms`; the rest are counted, and the next line printed for
// that key ends with "(N similar messages suppressed)". So a flood of bad peers costs a few lines
// a second, and the count of what was not printed is still told. Thread-safe.
class RateLimitedLog {
 public:
  using Clock = std::function<uint64_t()>;  // monotonic ns; tests pass a fake one
  explicit RateLimitedLog(uint32_t burst = 5, uint64_t window_ms = 1000, Clock now_ns = {});

  // Returns true when the line was printed (false: suppressed, or below the log level).
  bool Log(LogLevel level, const char* key, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
  // Prints "N similar messages suppressed" for every key with a count not yet told (at shutdown).
  void Flush();
  uint64_t suppressed_total() const;

 private:
  struct KeyState {
    uint64_t window_start_ns = 0;
    uint32_t printed = 0;
    uint64_t suppressed = 0;  // not yet told
    LogLevel level = LogLevel::kWarn;
  };
  const uint32_t burst_;
  const uint64_t window_ns_;
  Clock now_ns_;
  mutable std::mutex mu_;
  std::map<std::string, KeyState> keys_;
  uint64_t suppressed_total_ = 0;
};

}  // namespace commprof

#define COMMPROF_LOG_ERROR(...) ::commprof::Log(::commprof::LogLevel::kError, __VA_ARGS__)
#define COMMPROF_LOG_WARN(...) ::commprof::Log(::commprof::LogLevel::kWarn, __VA_ARGS__)
#define COMMPROF_LOG_INFO(...) ::commprof::Log(::commprof::LogLevel::kInfo, __VA_ARGS__)
#define COMMPROF_LOG_DEBUG(...) ::commprof::Log(::commprof::LogLevel::kDebug, __VA_ARGS__)
