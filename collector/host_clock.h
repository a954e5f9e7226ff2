// The clock a rank stamps its events with, as an interface the runtime is given.
//
// Production picks one implementation at start-up (MakeHostClock): the steady clock, or, as the
// testing aid of docs/clock-alignment.md ("a fake clock"), the steady clock shifted by a per-rank
// offset and drift. Tests hand the runtime a clock they drive themselves, so several simulated
// ranks in one process see exactly the times the test sets.
//
// Every method is called from any thread (recording threads, the shipper, MPI clock sync) and
// must be lock-free: Now() is on the per-event path.
#pragma once

#include <cstdint>
#include <memory>

#include "core/clock.h"
#include "core/config.h"

namespace commprof {

class HostClock {
 public:
  virtual ~HostClock() = default;
  // The rank's local time in ns.
  virtual uint64_t Now() const = 0;
  // A steady-clock reading taken before this clock existed (MPI_Init's entry, read before the
  // runtime is created), on this clock's axis.
  virtual uint64_t FromSteady(uint64_t steady_ns) const = 0;
  // The local time and UTC read together: where the rank's times sit on the wall-clock axis.
  virtual ClockAnchor Anchor() const;
};

// CLOCK_MONOTONIC as it is (core/clock.h).
class SteadyHostClock final : public HostClock {
 public:
  uint64_t Now() const override { return SteadyNowNs(); }
  uint64_t FromSteady(uint64_t steady_ns) const override { return steady_ns; }
};

// The testing aid: local = steady + offset + trunc((steady - t0) * drift * 1e-6), t0 the steady
// time at construction (the collector's start), so alignment can be checked against a known truth.
class ShiftedHostClock final : public HostClock {
 public:
  ShiftedHostClock(int64_t offset_ns, double drift_ppm)
      : offset_ns_(offset_ns), drift_ppm_(drift_ppm), base_ns_(SteadyNowNs()) {}
  uint64_t Now() const override { return FromSteady(SteadyNowNs()); }
  uint64_t FromSteady(uint64_t steady_ns) const override {
    auto elapsed = static_cast<double>(static_cast<int64_t>(steady_ns - base_ns_));
    return steady_ns + static_cast<uint64_t>(offset_ns_ + static_cast<int64_t>(elapsed * drift_ppm_ * 1e-6));
  }

 private:
  const int64_t offset_ns_;
  const double drift_ppm_;
  const uint64_t base_ns_;
};

// The clock `config` asks for on rank `rank`: shifted when COMMPROF_FAKE_CLOCK_OFFSET_NS or
// COMMPROF_FAKE_CLOCK_DRIFT_PPM has an item for the rank (logged once), else steady.
std::unique_ptr<HostClock> MakeHostClock(const Config& config, uint32_t rank);

}  // namespace commprof
