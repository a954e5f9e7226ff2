#include "core/capture_options.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace commprof {
namespace {

// Each schedule field at most this: the cycle length (their sum) stays far from overflow.
constexpr uint64_t kMaxScheduleValue = 1000000000ull;
// The longest communicator name Open MPI keeps (MPI_MAX_OBJECT_NAME is 64 with the terminating zero).
constexpr size_t kMaxCommName = 63;
constexpr std::string_view kTorchStep = "ProfilerStep#";

bool ParseWhole(std::string_view text, uint64_t max_value, uint64_t& out) {
  if (text.empty() || text.size() > 19) {
    return false;
  }
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max_value) {
    return false;
  }
  out = v;
  return true;
}

std::string Quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

}  // namespace

ScheduleAction ScheduleActionAt(const Schedule& s, uint64_t step) {
  // torch/profiler/profiler.py, schedule(): the same arithmetic on whole numbers.
  if (step < s.skip_first) {
    return ScheduleAction::kNone;
  }
  step -= s.skip_first;
  const uint64_t period = s.wait + s.warmup + s.active;
  if (period == 0 || (s.repeat > 0 && step / period >= s.repeat)) {
    return ScheduleAction::kNone;
  }
  const uint64_t mod = step % period;
  if (mod < s.wait) {
    return ScheduleAction::kNone;
  }
  if (mod < s.wait + s.warmup) {
    return ScheduleAction::kWarmup;
  }
  return mod < period - 1 ? ScheduleAction::kRecord : ScheduleAction::kRecordAndSave;
}

uint64_t ScheduleCycleOf(const Schedule& s, uint64_t step) {
  const uint64_t period = s.wait + s.warmup + s.active;
  return step < s.skip_first || period == 0 ? 0 : (step - s.skip_first) / period;
}

bool ParseSchedule(std::string_view text, Schedule& out, std::string& error) {
  static constexpr std::string_view kForm = " (form: wait=W,warmup=U,active=A,repeat=R[,skip_first=S])";
  if (text.empty()) {
    error = "empty" + std::string(kForm);
    return false;
  }
  Schedule s;
  bool seen[5] = {};
  static constexpr std::string_view kKeys[5] = {"wait", "warmup", "active", "repeat", "skip_first"};
  uint64_t* fields[5] = {&s.wait, &s.warmup, &s.active, &s.repeat, &s.skip_first};
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      error = Quoted(item) + " is not key=value" + std::string(kForm);
      return false;
    }
    std::string_view key = item.substr(0, eq);
    std::string_view value = item.substr(eq + 1);
    int k = -1;
    for (int i = 0; i < 5; ++i) {
      if (key == kKeys[i]) {
        k = i;
      }
    }
    if (k < 0) {
      error = "unknown key " + Quoted(key) + " (known: wait, warmup, active, repeat, skip_first)";
      return false;
    }
    if (seen[k]) {
      error = "key " + Quoted(key) + " is given twice";
      return false;
    }
    seen[k] = true;
    if (!ParseWhole(value, kMaxScheduleValue, *fields[k])) {
      error = std::string(key) + "=" + std::string(value) + ": not a whole number from 0 to 1000000000";
      return false;
    }
    if (comma == std::string_view::npos) {
      break;
    }
    start = comma + 1;
  }
  if (!seen[2]) {
    error = "active=A is missing" + std::string(kForm);
    return false;
  }
  if (s.active == 0) {
    error = "active=0: a window needs at least one active step";
    return false;
  }
  out = s;
  return true;
}

bool ParseSeconds(std::string_view text, bool allow_zero, uint64_t& ns, std::string& error) {
  std::string s(text);
  char* end = nullptr;
  double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  // Plain decimal seconds only: no hexadecimal, infinity or NaN spellings.
  bool plain = !s.empty() && s.find_first_not_of("0123456789.") == std::string::npos;
  if (!plain || end == nullptr || *end != '\0' || !std::isfinite(v)) {
    error = Quoted(text) + " is not a number of seconds (e.g. 30 or 2.5)";
    return false;
  }
  if (v > 1e9) {
    error = Quoted(text) + " is more than 1000000000 seconds";
    return false;
  }
  if (!allow_zero && v <= 0) {
    error = Quoted(text) + " must be more than 0 seconds";
    return false;
  }
  ns = static_cast<uint64_t>(std::llround(v * 1e9));
  return true;
}

bool ParseStepEvery(std::string_view text, StepEvery& out, std::string& error) {
  size_t colon = text.find(':');
  std::string_view n = text.substr(0, colon);
  StepEvery s;
  if (!ParseWhole(n, kMaxScheduleValue, s.every) || s.every == 0) {
    error = "N=" + Quoted(n) + " is not a whole number from 1 to 1000000000 (form: N[:COMM])";
    return false;
  }
  if (colon != std::string_view::npos) {
    std::string_view comm = text.substr(colon + 1);
    if (comm.empty()) {
      error =
          "the communicator name after ':' is empty (form: N[:COMM], COMM = world or a name given with "
          "MPI_Comm_set_name)";
      return false;
    }
    if (comm.size() > kMaxCommName) {
      error = "the communicator name " + Quoted(comm) + " is longer than MPI_Comm_set_name allows (63 characters)";
      return false;
    }
    if (comm != "world" && comm != "MPI_COMM_WORLD") {
      s.comm = std::string(comm);
    }
  }
  out = s;
  return true;
}

bool ParseStepRangeName(std::string_view text, std::string& error) {
  if (text.empty()) {
    error = "the range name is empty";
    return false;
  }
  if (text.find('#') != std::string_view::npos) {
    error = Quoted(text) + " contains '#' (give the name alone: NAME#N ranges are recognised by it)";
    return false;
  }
  if (text.size() > 255) {
    error = "the range name is longer than 255 characters";
    return false;
  }
  return true;
}

bool ParseCapturePlan(const CaptureTexts& values, const CaptureTexts& names, CapturePlan& plan, std::string& error) {
  CapturePlan p;
  std::string why;
  auto fail = [&](const std::string& name, const std::string& value) {
    error = name + " " + Quoted(value) + ": " + why;
    return false;
  };
  if (!values.schedule.empty()) {
    if (!ParseSchedule(values.schedule, p.schedule, why)) {
      return fail(names.schedule, values.schedule);
    }
    p.has_schedule = true;
  }
  if (!values.delay.empty()) {
    if (!ParseSeconds(values.delay, true, p.delay_ns, why)) {
      return fail(names.delay, values.delay);
    }
    p.timed = true;
  }
  if (!values.duration.empty()) {
    if (!ParseSeconds(values.duration, false, p.duration_ns, why)) {
      return fail(names.duration, values.duration);
    }
    p.timed = true;
  }
  if (p.has_schedule && p.timed) {
    error = names.schedule + " cannot be combined with " + (values.delay.empty() ? names.duration : names.delay) +
            ": windows come either from steps or from time";
    return false;
  }
  if (!values.step_range.empty()) {
    if (!ParseStepRangeName(values.step_range, why)) {
      return fail(names.step_range, values.step_range);
    }
    p.step_range = values.step_range;
  }
  if (!values.step_every.empty() && !ParseStepEvery(values.step_every, p.step_every, why)) {
    return fail(names.step_every, values.step_every);
  }
  plan = p;
  return true;
}

bool StepFromRangeName(const char* name, std::string_view step_range, uint64_t auto_next, uint64_t& step) {
  if (name == nullptr) {
    return false;
  }
  const char* number = nullptr;
  if (std::strncmp(name, kTorchStep.data(), kTorchStep.size()) == 0) {
    number = name + kTorchStep.size();
  } else if (!step_range.empty() && std::strncmp(name, step_range.data(), step_range.size()) == 0) {
    const char* rest = name + step_range.size();
    if (*rest == '\0') {
      step = auto_next;
      return true;
    }
    if (*rest != '#') {
      return false;
    }
    number = rest + 1;
  } else {
    return false;
  }
  return ParseWhole(number, UINT64_MAX / 10, step);
}

}  // namespace commprof
