// The capture controls of `commprof run`: torch.profiler.schedule's step -> action table, and
// every error of the parsers (docs/cli.md "Steps and capture windows").
#include "core/capture_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace commprof {
namespace {

// One letter per step: N none, W warmup, R record, S record and save (torch.profiler.ProfilerAction).
std::string Actions(const Schedule& s, uint64_t steps) {
  std::string out;
  for (uint64_t i = 0; i < steps; ++i) {
    switch (ScheduleActionAt(s, i)) {
      case ScheduleAction::kNone:
        out += 'N';
        break;
      case ScheduleAction::kWarmup:
        out += 'W';
        break;
      case ScheduleAction::kRecord:
        out += 'R';
        break;
      case ScheduleAction::kRecordAndSave:
        out += 'S';
        break;
    }
  }
  return out;
}

Schedule Make(uint64_t wait, uint64_t warmup, uint64_t active, uint64_t repeat, uint64_t skip_first = 0) {
  Schedule s;
  s.wait = wait;
  s.warmup = warmup;
  s.active = active;
  s.repeat = repeat;
  s.skip_first = skip_first;
  return s;
}

// The tables are torch.profiler.schedule(...)(step) for steps 0, 1, 2, ... written out by hand from
// torch/profiler/profiler.py (the docstring's example is the first).
TEST(Schedule, ActionsMatchTorchProfilerScheduleStepByStep) {
  EXPECT_EQ(Actions(Make(1, 1, 3, 2), 14), "NWRRSNWRRSNNNN");
  EXPECT_EQ(Actions(Make(1, 1, 2, 1), 8), "NWRSNNNN");
  // repeat 0: cycles until the job ends.
  EXPECT_EQ(Actions(Make(2, 0, 2, 0), 12), "NNRSNNRSNNRS");
  // Neither wait nor warmup: every cycle is its active steps; active=1 saves every step.
  EXPECT_EQ(Actions(Make(0, 0, 1, 0), 4), "SSSS");
  EXPECT_EQ(Actions(Make(0, 0, 3, 2), 8), "RRSRRSNN");
  // skip_first comes before the first cycle and only once.
  EXPECT_EQ(Actions(Make(2, 1, 3, 2, 3), 18), "NNNNNWRRSNNWRRSNNN");
  EXPECT_EQ(Actions(Make(0, 1, 1, 0, 2), 7), "NNWSWSW");
}

TEST(Schedule, CycleIsTheWindowIndexOfARecordedStep) {
  Schedule s = Make(1, 1, 3, 2, 3);
  EXPECT_EQ(ScheduleCycleOf(s, 5), 0u);  // skip 3, then cycle 0 = steps 3..7
  EXPECT_EQ(ScheduleCycleOf(s, 7), 0u);
  EXPECT_EQ(ScheduleCycleOf(s, 8), 1u);  // cycle 1 = steps 8..12
  EXPECT_EQ(ScheduleCycleOf(s, 12), 1u);
  EXPECT_EQ(ScheduleCycleOf(s, 0), 0u);  // inside skip_first: no cycle yet
}

TEST(Schedule, ParsesEveryKeyInAnyOrderWithTorchDefaults) {
  Schedule s;
  std::string error;
  ASSERT_TRUE(ParseSchedule("wait=1,warmup=2,active=3,repeat=4,skip_first=5", s, error)) << error;
  EXPECT_EQ(s.wait, 1u);
  EXPECT_EQ(s.warmup, 2u);
  EXPECT_EQ(s.active, 3u);
  EXPECT_EQ(s.repeat, 4u);
  EXPECT_EQ(s.skip_first, 5u);
  ASSERT_TRUE(ParseSchedule("active=2", s, error)) << error;
  EXPECT_EQ(s.wait, 0u);
  EXPECT_EQ(s.warmup, 0u);
  EXPECT_EQ(s.active, 2u);
  EXPECT_EQ(s.repeat, 0u);
  EXPECT_EQ(s.skip_first, 0u);
}

struct BadValue {
  const char* text;
  const char* message_part;
};

TEST(Schedule, EveryMalformedScheduleIsRefusedNamingTheBadPart) {
  const std::vector<BadValue> cases = {
      {"", "empty"},
      {"wait=1,warmup=1", "active=A is missing"},
      {"active=0", "active=0: a window needs at least one active step"},
      {"wait=1,active", "'active' is not key=value"},
      {"wait=1,,active=2", "'' is not key=value"},
      {"wait=1,sleep=2,active=1", "unknown key 'sleep'"},
      {"active=1,active=2", "key 'active' is given twice"},
      {"wait=-1,active=1", "wait=-1: not a whole number"},
      {"wait=x,active=1", "wait=x: not a whole number"},
      {"wait=,active=1", "wait=: not a whole number"},
      {"active=1.5", "active=1.5: not a whole number"},
      {"active=2000000000", "active=2000000000: not a whole number from 0 to 1000000000"},
      {"Active=1", "unknown key 'Active'"},
  };
  for (const auto& c : cases) {
    Schedule s;
    std::string error;
    EXPECT_FALSE(ParseSchedule(c.text, s, error)) << c.text;
    EXPECT_NE(error.find(c.message_part), std::string::npos) << c.text << " -> " << error;
  }
}

TEST(CaptureOptions, SecondsAreNonNegativeDecimals) {
  uint64_t ns = 0;
  std::string error;
  ASSERT_TRUE(ParseSeconds("2.5", false, ns, error));
  EXPECT_EQ(ns, 2500000000u);
  ASSERT_TRUE(ParseSeconds("0", true, ns, error));
  EXPECT_EQ(ns, 0u);
  ASSERT_TRUE(ParseSeconds("0.001", false, ns, error));
  EXPECT_EQ(ns, 1000000u);
  const std::vector<BadValue> cases = {
      {"", "is not a number of seconds"},      {"-1", "is not a number of seconds"},
      {"1s", "is not a number of seconds"},    {"inf", "is not a number of seconds"},
      {"nan", "is not a number of seconds"},   {"0x10", "is not a number of seconds"},
      {"1.2.3", "is not a number of seconds"}, {".", "is not a number of seconds"},
      {"1e3", "is not a number of seconds"},   {"2000000000", "is more than 1000000000 seconds"},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(ParseSeconds(c.text, true, ns, error)) << c.text;
    EXPECT_NE(error.find(c.message_part), std::string::npos) << c.text << " -> " << error;
  }
  EXPECT_FALSE(ParseSeconds("0", false, ns, error));
  EXPECT_NE(error.find("must be more than 0 seconds"), std::string::npos) << error;
}

TEST(CaptureOptions, StepEveryTakesACountAndAnOptionalCommunicatorName) {
  StepEvery s;
  std::string error;
  ASSERT_TRUE(ParseStepEvery("10", s, error)) << error;
  EXPECT_EQ(s.every, 10u);
  EXPECT_EQ(s.comm, "");
  ASSERT_TRUE(ParseStepEvery("4:world", s, error)) << error;
  EXPECT_EQ(s.comm, "");  // world
  ASSERT_TRUE(ParseStepEvery("4:MPI_COMM_WORLD", s, error)) << error;
  EXPECT_EQ(s.comm, "");
  ASSERT_TRUE(ParseStepEvery("3:data parallel:0", s, error)) << error;
  EXPECT_EQ(s.every, 3u);
  EXPECT_EQ(s.comm, "data parallel:0");  // everything after the first ':'
  const std::vector<BadValue> cases = {
      {"", "N='' is not a whole number"},
      {"0", "N='0' is not a whole number from 1"},
      {"-2", "N='-2' is not a whole number"},
      {"x:world", "N='x' is not a whole number"},
      {":world", "N='' is not a whole number"},
      {"5:", "the communicator name after ':' is empty"},
      {"5:0123456789012345678901234567890123456789012345678901234567890123", "longer than MPI_Comm_set_name allows"},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(ParseStepEvery(c.text, s, error)) << c.text;
    EXPECT_NE(error.find(c.message_part), std::string::npos) << c.text << " -> " << error;
  }
}

TEST(CaptureOptions, StepRangeNameIsPlainAndNonEmpty) {
  std::string error;
  EXPECT_TRUE(ParseStepRangeName("train_step", error));
  EXPECT_FALSE(ParseStepRangeName("", error));
  EXPECT_NE(error.find("empty"), std::string::npos);
  EXPECT_FALSE(ParseStepRangeName("step#3", error));
  EXPECT_NE(error.find("contains '#'"), std::string::npos);
  EXPECT_FALSE(ParseStepRangeName(std::string(256, 'a'), error));
  EXPECT_NE(error.find("longer than 255"), std::string::npos);
}

TEST(CaptureOptions, PlanErrorsNameTheOptionTheValueAndTheBadPart) {
  const CaptureTexts names = CaptureOptionNames();
  CapturePlan plan;
  std::string error;
  CaptureTexts v;
  v.schedule = "wait=1,active=x";
  EXPECT_FALSE(ParseCapturePlan(v, names, plan, error));
  EXPECT_EQ(error, "--schedule 'wait=1,active=x': active=x: not a whole number from 0 to 1000000000");
  v = {};
  v.delay = "soon";
  EXPECT_FALSE(ParseCapturePlan(v, names, plan, error));
  EXPECT_EQ(error, "--delay 'soon': 'soon' is not a number of seconds (e.g. 30 or 2.5)");
  v = {};
  v.duration = "0";
  EXPECT_FALSE(ParseCapturePlan(v, names, plan, error));
  EXPECT_EQ(error, "--duration '0': '0' must be more than 0 seconds");
  v = {};
  v.step_every = "0:tp";
  EXPECT_FALSE(ParseCapturePlan(v, CaptureEnvironmentNames(), plan, error));
  EXPECT_EQ(error.rfind("COMMPROF_STEP_EVERY '0:tp': N='0'", 0), 0u) << error;
  v = {};
  v.step_range = "a#b";
  EXPECT_FALSE(ParseCapturePlan(v, names, plan, error));
  EXPECT_EQ(error.rfind("--step-range 'a#b': ", 0), 0u) << error;
  v = {};
  v.schedule = "active=1";
  v.duration = "5";
  EXPECT_FALSE(ParseCapturePlan(v, names, plan, error));
  EXPECT_EQ(error, "--schedule cannot be combined with --duration: windows come either from steps or from time");
}

TEST(CaptureOptions, NoControlMeansNoWindows) {
  CapturePlan plan;
  std::string error;
  ASSERT_TRUE(ParseCapturePlan({}, CaptureOptionNames(), plan, error));
  EXPECT_FALSE(plan.windowed());
  CaptureTexts v;
  v.delay = "1.5";
  ASSERT_TRUE(ParseCapturePlan(v, CaptureOptionNames(), plan, error));
  EXPECT_TRUE(plan.windowed());
  EXPECT_TRUE(plan.timed);
  EXPECT_EQ(plan.delay_ns, 1500000000u);
  EXPECT_EQ(plan.duration_ns, 0u);
}

TEST(CaptureOptions, RangeNamesThatBeginSteps) {
  uint64_t step = 99;
  EXPECT_TRUE(StepFromRangeName("ProfilerStep#0", "", 7, step));
  EXPECT_EQ(step, 0u);
  EXPECT_TRUE(StepFromRangeName("ProfilerStep#42", "train", 7, step));
  EXPECT_EQ(step, 42u);
  EXPECT_TRUE(StepFromRangeName("train", "train", 7, step));
  EXPECT_EQ(step, 7u);  // auto-numbered
  EXPECT_TRUE(StepFromRangeName("train#3", "train", 7, step));
  EXPECT_EQ(step, 3u);
  for (const char* other : {"ProfilerStep#", "ProfilerStep#x", "ProfilerStep#1a", "ProfilerStep", "forward", "training",
                            "train#", "train#-1", "Train"}) {
    EXPECT_FALSE(StepFromRangeName(other, "train", 7, step)) << other;
  }
  EXPECT_FALSE(StepFromRangeName("train", "", 7, step));  // no --step-range
  EXPECT_FALSE(StepFromRangeName(nullptr, "train", 7, step));
}

}  // namespace
}  // namespace commprof
