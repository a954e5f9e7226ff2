// The capture controls of `commprof run` (docs/cli.md "Steps and capture windows"): which steps
// and which span of time a rank records, and what marks a step.
//
// Shared by the command, which checks every value before the job starts, and the collector, which
// reads the same text from COMMPROF_SCHEDULE, COMMPROF_DELAY, COMMPROF_DURATION,
// COMMPROF_STEP_RANGE and COMMPROF_STEP_EVERY. The schedule is torch.profiler.schedule's: a pure
// function from a step number to an action (ScheduleActionAt), so every rank takes the same
// decision for step N without talking to the others.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace commprof {

// torch.profiler.schedule(wait, warmup, active, repeat, skip_first): after `skip_first` steps,
// cycles of `wait` idle steps, `warmup` steps, `active` recorded steps, `repeat` times (0: until
// the job ends). commprof records nothing during warmup steps (torch runs its tracer there).
struct Schedule {
  uint64_t wait = 0;
  uint64_t warmup = 0;
  uint64_t active = 0;  // >= 1
  uint64_t repeat = 0;
  uint64_t skip_first = 0;
};

// torch.profiler.ProfilerAction, in its order.
enum class ScheduleAction : uint8_t { kNone, kWarmup, kRecord, kRecordAndSave };

ScheduleAction ScheduleActionAt(const Schedule& s, uint64_t step);
// The cycle `step` falls in (torch's (step - skip_first) / (wait + warmup + active)): the index of
// the window a recorded step belongs to. Meaningful for steps >= skip_first.
uint64_t ScheduleCycleOf(const Schedule& s, uint64_t step);

// --step-every N[:COMM]: the start of collectives 0, N, 2N, ... of communicator COMM begins
// steps 0, 1, 2, ...
struct StepEvery {
  uint64_t every = 0;  // 0: off
  std::string comm;    // "" = MPI_COMM_WORLD; else a name given with MPI_Comm_set_name
};

struct CapturePlan {
  bool has_schedule = false;
  Schedule schedule;
  bool timed = false;        // --delay and/or --duration
  uint64_t delay_ns = 0;     // from the start of the rank's collector
  uint64_t duration_ns = 0;  // 0: until the process ends
  StepEvery step_every;
  std::string step_range;  // NVTX ranges named this (or this#N) begin steps; "" = off

  // Whether recording is gated by capture windows at all (otherwise: as without these options).
  bool windowed() const { return has_schedule || timed; }
};

// The text of each control as given, and the name to use for it in an error (an option of
// `commprof run` or an environment variable). An empty value: not given.
struct CaptureTexts {
  std::string schedule;
  std::string delay;
  std::string duration;
  std::string step_range;
  std::string step_every;
};
inline CaptureTexts CaptureEnvironmentNames() {
  return {"COMMPROF_SCHEDULE", "COMMPROF_DELAY", "COMMPROF_DURATION", "COMMPROF_STEP_RANGE", "COMMPROF_STEP_EVERY"};
}
inline CaptureTexts CaptureOptionNames() {
  return {"--schedule", "--delay", "--duration", "--step-range", "--step-every"};
}

// Parses every given control; false with a one-line `error` naming the control (from `names`),
// its value and the bad part.
bool ParseCapturePlan(const CaptureTexts& values, const CaptureTexts& names, CapturePlan& plan, std::string& error);

// The pieces, for tests and for error messages without the control's name.
bool ParseSchedule(std::string_view text, Schedule& out, std::string& error);
bool ParseSeconds(std::string_view text, bool allow_zero, uint64_t& ns, std::string& error);
bool ParseStepEvery(std::string_view text, StepEvery& out, std::string& error);
bool ParseStepRangeName(std::string_view text, std::string& error);

// The step number an NVTX range name begins, if it begins one: "ProfilerStep#N" (torch's name) or,
// with `step_range` set, "<step_range>#N" gives N; "<step_range>" alone gives `auto_next`.
// False for every other name (a prefix compare: cheap enough for every range push).
bool StepFromRangeName(const char* name, std::string_view step_range, uint64_t auto_next, uint64_t& step);

}  // namespace commprof
