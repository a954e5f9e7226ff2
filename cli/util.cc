#include <ctime>
#include <string>

#include "cli/commands.h"

namespace commprof::cli {

std::string FormatUtc(uint64_t epoch_ns) {
  time_t secs = static_cast<time_t>(epoch_ns / 1000000000ull);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09lluZ", static_cast<unsigned long long>(epoch_ns % 1000000000ull));
  return buf;
}

}  // namespace commprof::cli
