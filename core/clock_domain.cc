#include "core/clock_domain.h"

#include <unistd.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/hash.h"

namespace commprof {
namespace {

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

uint64_t SystemClockDomain() {
  // The boot id changes at every boot of every machine; CLOCK_MONOTONIC counts from that boot, and
  // the clock source is what it is read from. A time namespace may offset CLOCK_MONOTONIC.
  std::string id = ReadSmallFile("/proc/sys/kernel/random/boot_id");
  std::string source = ReadSmallFile("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string timens = ReadSmallFile("/proc/self/timens_offsets");
  if (id.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    id = std::string("host:") + host;
  }
  return MixBits(Fnv1a64(id + "\n" + source + "\n" + timens));
}

std::string FormatClockDomain(uint64_t domain) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, domain);
  return text;
}

std::optional<uint64_t> ParseClockDomain(std::string_view text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  if (text.size() != 16 || std::from_chars(text.data(), end, v, 16).ptr != end) {
    return std::nullopt;
  }
  return v;
}

}  // namespace commprof
