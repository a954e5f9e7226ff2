// The capture gate: whether a rank records now, from its step boundaries and its clock.
//
// Purpose: `commprof run --schedule` (torch.profiler.schedule) and `--delay/--duration` (nsys)
// record only inside active windows (docs/cli.md "Steps and capture windows").
// Concepts: a window is one active span: for a schedule, the active steps of one cycle (its index
// is the cycle's, from 0, so step N lands in the same window on every rank); for --delay and
// --duration, the one span of time they give (index 0). The gate only decides; the runtime keeps
// the hot path's flag in step with it and records the WINDOW event of each window it closes.
// Operation: OnStep at every step boundary, OnTime from the shipper's wake-ups (time windows
// only), Finish at process end. Not thread-safe: the runtime calls it under its capture lock.
// Example: wait=1,warmup=1,active=2,repeat=1: steps 0 (wait) and 1 (warmup) record nothing,
// step 2 opens window 0, step 3 is in it, step 4 closes it with first step 2 and 2 steps.
#pragma once

#include <cstdint>
#include <optional>

#include "core/capture_options.h"

namespace commprof {

// One window, as the WINDOW event (kind 30) stores it.
struct CaptureWindow {
  uint64_t index = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t first_step = 0;  // the first step that began inside it (0 when none did)
  uint64_t steps = 0;       // steps that began inside it
  uint8_t subtype = 0;      // 1 schedule, 2 delay/duration
};

class CaptureGate {
 public:
  // `origin_ns`: the collector's start on the rank's clock, from which --delay counts.
  CaptureGate(const CapturePlan& plan, uint64_t origin_ns);

  // Whether events are recorded now (always, without a schedule or time window).
  bool open() const { return open_; }
  // Step `step` begins at `now`: returns the window this closes, if any.
  std::optional<CaptureWindow> OnStep(uint64_t step, uint64_t now);
  // The time is `now` (time windows): returns the window this closes, if any.
  std::optional<CaptureWindow> OnTime(uint64_t now);
  // The process ends: the window still open, if any; the gate stays closed from then on.
  std::optional<CaptureWindow> Finish(uint64_t now);
  // When OnTime next has something to do (UINT64_MAX: never).
  uint64_t next_deadline() const;
  // Whether any step boundary was seen.
  bool saw_step() const { return saw_step_; }

 private:
  void Open(uint64_t index, uint64_t now);
  CaptureWindow Close(uint64_t now);

  const CapturePlan plan_;
  const uint64_t origin_ns_;
  bool open_ = true;
  bool finished_ = false;
  bool time_window_done_ = false;
  bool saw_step_ = false;
  CaptureWindow current_;
};

}  // namespace commprof
