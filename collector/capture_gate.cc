#include "collector/capture_gate.h"

namespace commprof {

namespace {
constexpr uint8_t kWindowSchedule = 1;
constexpr uint8_t kWindowTimed = 2;
}  // namespace

CaptureGate::CaptureGate(const CapturePlan& plan, uint64_t origin_ns) : plan_(plan), origin_ns_(origin_ns) {
  if (plan_.has_schedule) {
    open_ = false;  // nothing before the first recorded step
  } else if (plan_.timed) {
    open_ = false;
    if (plan_.delay_ns == 0) {
      Open(0, origin_ns_);
    }
  }
}

void CaptureGate::Open(uint64_t index, uint64_t now) {
  open_ = true;
  current_ = CaptureWindow{};
  current_.index = index;
  current_.start_ns = now;
  current_.subtype = plan_.has_schedule ? kWindowSchedule : kWindowTimed;
}

CaptureWindow CaptureGate::Close(uint64_t now) {
  open_ = false;
  CaptureWindow w = current_;
  w.end_ns = now;
  return w;
}

std::optional<CaptureWindow> CaptureGate::OnTime(uint64_t now) {
  if (!plan_.timed || finished_ || time_window_done_) {
    return std::nullopt;
  }
  if (!open_ && now >= origin_ns_ + plan_.delay_ns) {
    Open(0, now);
  }
  if (open_ && plan_.duration_ns > 0 && now >= origin_ns_ + plan_.delay_ns + plan_.duration_ns) {
    time_window_done_ = true;
    return Close(now);
  }
  return std::nullopt;
}

std::optional<CaptureWindow> CaptureGate::OnStep(uint64_t step, uint64_t now) {
  saw_step_ = true;
  if (finished_) {
    return std::nullopt;
  }
  std::optional<CaptureWindow> closed;
  if (plan_.has_schedule) {
    const ScheduleAction a = ScheduleActionAt(plan_.schedule, step);
    const bool record = a == ScheduleAction::kRecord || a == ScheduleAction::kRecordAndSave;
    const uint64_t cycle = ScheduleCycleOf(plan_.schedule, step);
    // torch saves a cycle's trace when the step after its last active one begins: a window ends
    // at the first step that is not an active step of the same cycle.
    if (open_ && (!record || cycle != current_.index)) {
      closed = Close(now);
    }
    if (record && !open_) {
      Open(cycle, now);
    }
  } else if (plan_.timed) {
    closed = OnTime(now);
  }
  if (open_ && plan_.windowed()) {
    if (current_.steps == 0) {
      current_.first_step = step;
    }
    ++current_.steps;
  }
  return closed;
}

std::optional<CaptureWindow> CaptureGate::Finish(uint64_t now) {
  if (finished_ || !plan_.windowed()) {
    finished_ = true;
    return std::nullopt;
  }
  finished_ = true;
  if (!open_) {
    return std::nullopt;
  }
  return Close(now);
}

uint64_t CaptureGate::next_deadline() const {
  if (!plan_.timed || finished_ || time_window_done_) {
    return UINT64_MAX;
  }
  if (!open_) {
    return origin_ns_ + plan_.delay_ns;
  }
  return plan_.duration_ns > 0 ? origin_ns_ + plan_.delay_ns + plan_.duration_ns : UINT64_MAX;
}

}  // namespace commprof
