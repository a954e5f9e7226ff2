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
#include "core/clock_domain.h"
#include "core/config.h"

namespace commprof {

// SystemClockDomain() (core/clock_domain.h) says which ranks read one clock: ranks with equal keys
// are aligned exactly to each other (docs/clock-alignment.md, "Hosts and the tree").

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
  // Ranks whose clocks give equal keys read the very same clock (SystemClockDomain by default).
  virtual uint64_t Domain() const { return SystemClockDomain(); }
};

// CLOCK_MONOTONIC as it is (core/clock.h).
// Its domain is the machine's (read when asked: only MPI jobs ask, once, in MPI_Init), or a
// simulated host's.
class SteadyHostClock final : public HostClock {
 public:
  SteadyHostClock() = default;
  explicit SteadyHostClock(uint64_t domain) : domain_(domain), simulated_(true) {}
  uint64_t Now() const override { return SteadyNowNs(); }
  uint64_t FromSteady(uint64_t steady_ns) const override { return steady_ns; }
  uint64_t Domain() const override { return simulated_ ? domain_ : SystemClockDomain(); }

 private:
  const uint64_t domain_ = 0;
  const bool simulated_ = false;
};

// The testing aid: local = steady + offset + trunc((steady - base) * drift * 1e-6), once for the
// simulated host (base 0, so every rank of that host computes the same clock) and once for the
// rank (base: the steady time at construction, the collector's start), so alignment can be
// checked against a known truth.
struct ClockShift {
  int64_t offset_ns = 0;
  double drift_ppm = 0;
  uint64_t base_ns = 0;
  int64_t At(uint64_t steady_ns) const {
    auto elapsed = static_cast<double>(static_cast<int64_t>(steady_ns - base_ns));
    return offset_ns + static_cast<int64_t>(elapsed * drift_ppm / 1e6);
  }
};

class ShiftedHostClock final : public HostClock {
 public:
  // A rank's own shift, from now on.
  ShiftedHostClock(int64_t offset_ns, double drift_ppm)
      : host_{}, rank_{offset_ns, drift_ppm, SteadyNowNs()}, domain_(SystemClockDomain()) {}
  ShiftedHostClock(ClockShift host, ClockShift rank, uint64_t domain) : host_(host), rank_(rank), domain_(domain) {}
  uint64_t Now() const override { return FromSteady(SteadyNowNs()); }
  uint64_t FromSteady(uint64_t steady_ns) const override {
    return steady_ns + static_cast<uint64_t>(host_.At(steady_ns) + rank_.At(steady_ns));
  }
  uint64_t Domain() const override { return domain_; }

 private:
  const ClockShift host_;
  const ClockShift rank_;
  const uint64_t domain_;
};

// The clock `config` asks for on rank `rank`: shifted when COMMPROF_FAKE_CLOCK_OFFSET_NS or
// COMMPROF_FAKE_CLOCK_DRIFT_PPM has an item for the rank, or when COMMPROF_FAKE_HOST puts the
// rank on a simulated host with an item in COMMPROF_FAKE_HOST_CLOCK_OFFSET_NS or _DRIFT_PPM
// (logged once), else steady. Its Domain(): the simulated host's when the rank has one, else the
// system's; a rank with a shift of its own is a clock of its own (the rank is mixed in).
std::unique_ptr<HostClock> MakeHostClock(const Config& config, uint32_t rank);

}  // namespace commprof
