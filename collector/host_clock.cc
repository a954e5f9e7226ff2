#include "collector/host_clock.h"

#include <cmath>
#include <string>

#include "core/hash.h"
#include "core/log.h"

namespace commprof {

ClockAnchor HostClock::Anchor() const {
  ClockAnchor a = TakeClockAnchor();
  a.steady_ns = FromSteady(a.steady_ns);
  return a;
}

std::unique_ptr<HostClock> MakeHostClock(const Config& config, uint32_t rank) {
  // The simulated host: its number, and that host's shift (items h of the per-host lists).
  double host = 0;
  bool simulated = PerRankValue(config.fake_host, rank, host) && host >= 0 && std::floor(host) == host;
  ClockShift host_shift;
  bool host_shifted = false;
  uint64_t domain = 0;
  if (simulated) {
    auto h = static_cast<uint32_t>(host);
    double v = 0;
    if (PerRankValue(config.fake_host_clock_offset_ns, h, v)) {
      host_shift.offset_ns = static_cast<int64_t>(v);
      host_shifted = true;
    }
    if (PerRankValue(config.fake_host_clock_drift_ppm, h, v)) {
      host_shift.drift_ppm = v;
      host_shifted = true;
    }
    domain = MixBits(Fnv1a64("commprof fake host " + std::to_string(h)));
    COMMPROF_LOG_WARN(
        "testing aid active: this rank is on simulated host %u, whose clock is shifted by %lld ns and "
        "drifts %.3f ppm",
        h, static_cast<long long>(host_shift.offset_ns), host_shift.drift_ppm);
  }
  double offset = 0;
  double drift = 0;
  bool has_offset = PerRankValue(config.fake_clock_offset_ns, rank, offset);
  bool has_drift = PerRankValue(config.fake_clock_drift_ppm, rank, drift);
  if (!has_offset && !has_drift && !host_shifted) {
    return simulated ? std::make_unique<SteadyHostClock>(domain) : std::make_unique<SteadyHostClock>();
  }
  if (!simulated) {
    domain = SystemClockDomain();
  }
  ClockShift rank_shift;
  if (has_offset || has_drift) {
    rank_shift = ClockShift{static_cast<int64_t>(offset), drift, SteadyNowNs()};
    domain = MixBits(domain ^ Fnv1a64("commprof fake clock rank " + std::to_string(rank)));
    COMMPROF_LOG_WARN("testing aid active: this rank's clock is shifted by %lld ns and drifts %.3f ppm",
                      static_cast<long long>(rank_shift.offset_ns), drift);
  }
  return std::make_unique<ShiftedHostClock>(host_shift, rank_shift, domain);
}

}  // namespace commprof
