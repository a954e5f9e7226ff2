// Which processes read one clock (docs/clock-alignment.md): the key that the collector (the
// ranks of an MPI job, grouped into hosts) and `commprof run` (the aggregator, for ranks without
// MPI, COMMPROF_AGGREGATOR_CLOCK) compare.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace commprof {

// A hash of the kernel's boot id, the clock source and the time namespace's offsets (a container
// with its own CLOCK_MONOTONIC offset is another clock), read from /proc and /sys. Processes with
// equal keys read the very same CLOCK_MONOTONIC. Where none of these can be read the key is the
// host name's hash.
uint64_t SystemClockDomain();

// The key as COMMPROF_AGGREGATOR_CLOCK carries it: 16 lower-case hex digits.
std::string FormatClockDomain(uint64_t domain);
// Its inverse: nullopt unless `text` is exactly 16 hex digits.
std::optional<uint64_t> ParseClockDomain(std::string_view text);

}  // namespace commprof
