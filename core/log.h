// One logger for the whole product. In the profiled process it never throws or exits: a
// tracing problem is a line on stderr (prefixed so users can grep it) and a counter.
#pragma once

#include <cstdarg>

namespace commprof {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Level from COMMPROF_LOG (error|warn|info|debug), read once; default warn.
LogLevel CurrentLogLevel();
void SetLogLevel(LogLevel level);
void SetLogPrefix(const char* prefix);  // e.g. "commprof[rank 3]"

void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace commprof

#define COMMPROF_LOG_ERROR(...) ::commprof::Log(::commprof::LogLevel::kError, __VA_ARGS__)
#define COMMPROF_LOG_WARN(...) ::commprof::Log(::commprof::LogLevel::kWarn, __VA_ARGS__)
#define COMMPROF_LOG_INFO(...) ::commprof::Log(::commprof::LogLevel::kInfo, __VA_ARGS__)
#define COMMPROF_LOG_DEBUG(...) ::commprof::Log(::commprof::LogLevel::kDebug, __VA_ARGS__)
