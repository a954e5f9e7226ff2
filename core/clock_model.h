// Clock alignment math (docs/clock-alignment.md).
//
// Purpose: place every rank's local steady clock on one reference time base (rank 0's clock for
// MPI jobs, the aggregator's for jobs without MPI) with a stated error bound.
// Concepts: a *sample* is one ping-pong: the rank reads its clock (t_send), the reference answers
// with its clock (t_ref), the rank reads again (t_recv). Whatever the delays, the true offset
// (reference - local) lies in [t_ref - t_recv, t_ref - t_send]; the midpoint is off by at most half
// the round trip. An *epoch* is a burst of samples (at MPI_Init, periodically, at MPI_Finalize);
// it keeps its minimum-round-trip sample, which gives a point (local time, offset, half RTT), and
// narrows it to the intersection of all its samples' intervals when that is tighter (it still
// holds the truth whatever the delays, each interval widened by what an unmeasured drift may have
// moved the offset between its sample and the kept one).
// The *model* is piecewise linear through the epoch points (one segment per pair of consecutive
// epochs, extended flat-slope beyond the ends), so drift is tracked as it changes.
// Error bound: the largest half round trip among the points plus the residual of the points
// around the straight line through the first and last ones (a figure for how far the drift
// strayed from linear between epochs).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace commprof {

// One ping-pong, all three readings in nanoseconds of the clocks named.
struct ClockSample {
  uint64_t local_send_ns = 0;
  uint64_t reference_ns = 0;
  uint64_t local_recv_ns = 0;
};

// One epoch's result: at local time local_ns, reference - local = offset_ns, +- half_rtt_ns.
struct ClockPoint {
  int64_t local_ns = 0;
  int64_t offset_ns = 0;
  int64_t half_rtt_ns = 0;
};

// The rate difference between a clock and the reference that a bound allows for where nothing
// measured it: between the samples of one epoch, and in a parent's reading extrapolated past its
// newest point. Quartz oscillators are specified to tens of ppm; two of them, or a clock that NTP
// is slewing, may differ by more, and then the bound may not hold (docs/clock-alignment.md).
inline constexpr int64_t kUnmeasuredDriftPpm = 100;

// How far a clock may move against the reference in `elapsed_ns` at kUnmeasuredDriftPpm, rounded
// up: 100 ns per ms. On an idle machine an epoch lasts about a millisecond; on a loaded one a
// descheduled rank stretches it to tens of milliseconds, and this is what keeps its bound honest.
int64_t DriftAllowanceNs(int64_t elapsed_ns);

// One epoch's point: the minimum-round-trip sample (ties: the earliest), narrowed to the
// intersection of all samples' feasible intervals when that is non-empty and tighter; half_rtt_ns
// is then half the intersection's width. Each interval holds the offset at the moment the
// reference read its clock (within its round trip), so before intersecting it is widened by
// DriftAllowanceNs of the most that moment can lie from the kept midpoint; the kept sample's half
// round trip carries the allowance of itself. Samples with a negative round trip (a broken clock)
// are ignored; returns false when none is usable.
bool EstimateEpoch(std::span<const ClockSample> samples, ClockPoint& out);

class ClockModel {
 public:
  ClockModel() = default;
  explicit ClockModel(std::vector<ClockPoint> points);  // sorted by local_ns inside

  // reference = local + Offset(local)
  int64_t Offset(int64_t local_ns) const;
  int64_t ToReference(int64_t local_ns) const { return local_ns + Offset(local_ns); }

  // Summary figures: offset at `at_local_ns` (the rank's job start), drift of the straight line
  // through the first and last points in ppm (reference runs faster by this much), error bound.
  int64_t OffsetAt(int64_t at_local_ns) const { return Offset(at_local_ns); }
  double DriftPpm() const;
  int64_t ErrorBoundNs() const;  // -1 without points
  const std::vector<ClockPoint>& points() const { return points_; }
  bool empty() const { return points_.empty(); }

 private:
  std::vector<ClockPoint> points_;
  std::vector<long double> slopes_;  // of the segment from points_[i] to points_[i + 1] (0 where flat)
};

}  // namespace commprof
