#include "collector/host_clock.h"

#include "core/log.h"

namespace commprof {

ClockAnchor HostClock::Anchor() const {
  ClockAnchor a = TakeClockAnchor();
  a.steady_ns = FromSteady(a.steady_ns);
  return a;
}

std::unique_ptr<HostClock> MakeHostClock(const Config& config, uint32_t rank) {
  double offset = 0;
  double drift = 0;
  bool has_offset = PerRankValue(config.fake_clock_offset_ns, rank, offset);
  bool has_drift = PerRankValue(config.fake_clock_drift_ppm, rank, drift);
  if (!has_offset && !has_drift) {
    return std::make_unique<SteadyHostClock>();
  }
  auto offset_ns = static_cast<int64_t>(offset);
  COMMPROF_LOG_WARN("testing aid active: this rank's clock is shifted by %lld ns and drifts %.3f ppm",
                    static_cast<long long>(offset_ns), drift);
  return std::make_unique<ShiftedHostClock>(offset_ns, drift);
}

}  // namespace commprof
