// The capture gate (collector/capture_gate.h): which steps and which span of time a rank records,
// and the windows it reports, driven by step boundaries and times given by hand.
#include "collector/capture_gate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "collector/runtime.h"
#include "collector_sim.h"
#include "support/test_support.h"

namespace commprof {
namespace {

CapturePlan ScheduleOf(const char* text) {
  CapturePlan p;
  std::string error;
  EXPECT_TRUE(ParseSchedule(text, p.schedule, error)) << error;
  p.has_schedule = true;
  return p;
}

// Steps 0..n-1 at times 100, 200, ...; the process ends at 100 * (n + 1). Returns whether each
// step was recorded ('1'/'0') and collects the windows.
std::string Drive(CaptureGate& g, uint64_t n, std::vector<CaptureWindow>& windows) {
  std::string recorded;
  for (uint64_t s = 0; s < n; ++s) {
    if (auto w = g.OnStep(s, 100 * (s + 1))) {
      windows.push_back(*w);
    }
    recorded += g.open() ? '1' : '0';
  }
  if (auto w = g.Finish(100 * (n + 1))) {
    windows.push_back(*w);
  }
  return recorded;
}

TEST(CaptureGate, ScheduleRecordsOnlyActiveStepsAndReportsOneWindowPerCycle) {
  CaptureGate g(ScheduleOf("wait=1,warmup=1,active=3,repeat=2"), 0);
  EXPECT_FALSE(g.open()) << "nothing before the first step";
  std::vector<CaptureWindow> w;
  EXPECT_EQ(Drive(g, 12, w), "001110011100");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].index, 0u);
  EXPECT_EQ(w[0].first_step, 2u);
  EXPECT_EQ(w[0].steps, 3u);
  EXPECT_EQ(w[0].start_ns, 300u);  // step 2 began at 300
  EXPECT_EQ(w[0].end_ns, 600u);    // step 5 (wait) began at 600
  EXPECT_EQ(w[0].subtype, 1);
  EXPECT_EQ(w[1].index, 1u);
  EXPECT_EQ(w[1].first_step, 7u);
  EXPECT_EQ(w[1].steps, 3u);
  EXPECT_EQ(w[1].end_ns, 1100u);
  EXPECT_FALSE(g.open());
}

TEST(CaptureGate, BackToBackCyclesAreSeparateWindows) {
  CaptureGate g(ScheduleOf("wait=0,warmup=0,active=2,repeat=0"), 0);
  std::vector<CaptureWindow> w;
  EXPECT_EQ(Drive(g, 5, w), "11111");
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].first_step, 0u);
  EXPECT_EQ(w[0].steps, 2u);
  EXPECT_EQ(w[0].end_ns, 300u);
  EXPECT_EQ(w[1].index, 1u);
  EXPECT_EQ(w[1].first_step, 2u);
  EXPECT_EQ(w[1].start_ns, 300u);
  // repeat 0: the last window is still open when the process ends, and is closed then.
  EXPECT_EQ(w[2].index, 2u);
  EXPECT_EQ(w[2].first_step, 4u);
  EXPECT_EQ(w[2].steps, 1u);
  EXPECT_EQ(w[2].end_ns, 600u);
}

TEST(CaptureGate, SkipFirstAndJumpsInStepNumbersFollowTheStepNumber) {
  CaptureGate g(ScheduleOf("wait=1,warmup=0,active=2,repeat=0,skip_first=2"), 0);
  std::vector<CaptureWindow> w;
  // Steps 0, 1 skipped, 2 wait, 3-4 window 0, 5 wait, 6-7 window 1 ...
  EXPECT_FALSE(g.OnStep(0, 10).has_value());
  EXPECT_FALSE(g.open());
  EXPECT_FALSE(g.OnStep(2, 20).has_value());
  EXPECT_FALSE(g.open());
  EXPECT_FALSE(g.OnStep(4, 30).has_value());  // a jump straight into window 0's second step
  EXPECT_TRUE(g.open());
  auto closed = g.OnStep(7, 40);  // window 1's second step: window 0 closes, window 1 opens
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->index, 0u);
  EXPECT_EQ(closed->first_step, 4u);
  EXPECT_EQ(closed->steps, 1u);
  EXPECT_TRUE(g.open());
  auto last = g.Finish(50);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->index, 1u);
  EXPECT_EQ(last->first_step, 7u);
}

TEST(CaptureGate, ScheduleWithoutStepsRecordsNothingAndReportsNoWindow) {
  CaptureGate g(ScheduleOf("active=1"), 0);
  EXPECT_FALSE(g.open());
  EXPECT_FALSE(g.Finish(1000).has_value());
  EXPECT_FALSE(g.saw_step());
}

TEST(CaptureGate, DelayAndDurationOpenAndCloseOneWindowOnTime) {
  CapturePlan p;
  p.timed = true;
  p.delay_ns = 1000;
  p.duration_ns = 500;
  CaptureGate g(p, 10000);
  EXPECT_FALSE(g.open());
  EXPECT_EQ(g.next_deadline(), 11000u);
  EXPECT_FALSE(g.OnTime(10999).has_value());
  EXPECT_FALSE(g.open());
  EXPECT_FALSE(g.OnStep(0, 10999).has_value());  // a step before the window: not counted
  EXPECT_FALSE(g.OnTime(11003).has_value());
  EXPECT_TRUE(g.open());
  EXPECT_EQ(g.next_deadline(), 11500u);
  EXPECT_FALSE(g.OnStep(1, 11100).has_value());
  EXPECT_FALSE(g.OnStep(2, 11200).has_value());
  auto w = g.OnStep(3, 11600);  // the step boundary after the end closes it as well as a tick would
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->index, 0u);
  EXPECT_EQ(w->start_ns, 11003u);
  EXPECT_EQ(w->end_ns, 11600u);
  EXPECT_EQ(w->first_step, 1u);
  EXPECT_EQ(w->steps, 2u);
  EXPECT_EQ(w->subtype, 2);
  EXPECT_FALSE(g.open());
  EXPECT_EQ(g.next_deadline(), UINT64_MAX);
  EXPECT_FALSE(g.OnTime(20000).has_value()) << "one window only";
  EXPECT_FALSE(g.Finish(30000).has_value());
}

TEST(CaptureGate, DurationAloneStartsOpenAndDelayAloneRunsToTheEnd) {
  CapturePlan p;
  p.timed = true;
  p.duration_ns = 100;
  CaptureGate d(p, 50);
  EXPECT_TRUE(d.open());
  auto w = d.OnTime(150);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->start_ns, 50u);
  EXPECT_EQ(w->end_ns, 150u);
  EXPECT_EQ(w->steps, 0u);
  p.duration_ns = 0;
  p.delay_ns = 10;
  CaptureGate g(p, 0);
  EXPECT_FALSE(g.OnTime(20).has_value());
  EXPECT_TRUE(g.open());
  EXPECT_EQ(g.next_deadline(), UINT64_MAX);
  auto end = g.Finish(90);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->start_ns, 20u);
  EXPECT_EQ(end->end_ns, 90u);
}

TEST(CaptureGate, WithoutScheduleOrTimeTheGateIsAlwaysOpenAndReportsNoWindow) {
  CaptureGate g(CapturePlan{}, 0);
  EXPECT_TRUE(g.open());
  EXPECT_FALSE(g.OnStep(0, 10).has_value());
  EXPECT_FALSE(g.OnTime(20).has_value());
  EXPECT_TRUE(g.open());
  EXPECT_EQ(g.next_deadline(), UINT64_MAX);
  EXPECT_FALSE(g.Finish(30).has_value());
}

// The runtime around the gate: a real Runtime shipping to an in-process aggregator, read back from
// the HDF5 file. Steps 0-4 under wait=1,warmup=0,active=2,repeat=1 (N R S N N): only steps 1 and 2
// and what was recorded in them are kept, plus the job's structure outside the window, minus what
// was recorded while the user paused; one WINDOW event.
TEST(CaptureRuntime, KeepsTheActiveStepsTheStructureAndOneWindowEventAndHonoursThePause) {
  test_support::TempDir dir("commprof-capture");
  ASSERT_FALSE(dir.path().empty());
  test_support::InProcessAggregator agg(dir / "out.h5", StreamPolicy{"capture-secret", "job-cap"}, 1);
  ASSERT_TRUE(agg.ok());
  Config c;
  c.aggregator = "in-process";
  c.secret = "capture-secret";
  c.job_id = "job-cap";
  c.spool_dir = dir / "spool";
  c.buffer_events = 1024;
  c.memory_mb = 64;
  c.flush_ms = 5;
  c.request_slots = 1024;
  c.connect_timeout_ms = 2000;
  c.capture = ScheduleOf("wait=1,warmup=0,active=2,repeat=1");
  Identity id;
  id.pid = static_cast<uint32_t>(::getpid());
  id.host = "unit-test-host";
  {
    RuntimeSeams seams;
    seams.transports = agg.Transports(dir / "spool");
    Runtime rt(c, id, std::move(seams));
    rt.Start();
    auto mark = [&rt](uint64_t seq, uint8_t kind = COMMPROF_KIND_USER_MARK) {
      commprof_event e{};
      e.kind = kind;
      e.start_ns = e.end_ns = rt.Now();
      e.seq = seq;
      e.peer = COMMPROF_NO_PEER;
      return e;
    };
    rt.Record(mark(1000));                                    // before the first step: dropped
    rt.RecordStructural(mark(2000, COMMPROF_KIND_MPI_COMM));  // the job's structure: kept
    for (uint64_t s = 0; s < 5; ++s) {
      rt.BeginStep(s, COMMPROF_STEP_C_API, rt.Now());
      rt.Record(mark(s));
      if (s == 2) {
        rt.SetUserEnabled(false);
        rt.Record(mark(3000));                                    // paused: dropped
        rt.RecordStructural(mark(3001, COMMPROF_KIND_MPI_COMM));  // paused: dropped too
        rt.SetUserEnabled(true);
        rt.Record(mark(3002));  // resumed inside the window: kept
      }
    }
    rt.Shutdown();
  }
  ASSERT_TRUE(test_support::WaitFor([&] { return agg.stats().ended.load() == 1; }));
  Status fin = agg.Finish();
  ASSERT_TRUE(fin.ok()) << fin.message();
  auto r = ProfileReader::Open(dir / "out.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<std::pair<int, uint64_t>> got;  // (kind, seq)
  const commprof_event* window = nullptr;
  auto events = test_support::ReadEvents(*r.value(), 0);
  for (const auto& e : events) {
    got.emplace_back(e.kind, e.seq);
    if (e.kind == COMMPROF_KIND_WINDOW) {
      window = &e;
    }
  }
  std::sort(got.begin(), got.end());
  const std::vector<std::pair<int, uint64_t>> want = {{COMMPROF_KIND_MPI_COMM, 2000}, {COMMPROF_KIND_USER_MARK, 1},
                                                      {COMMPROF_KIND_USER_MARK, 2},   {COMMPROF_KIND_USER_MARK, 3002},
                                                      {COMMPROF_KIND_STEP, 1},        {COMMPROF_KIND_STEP, 2},
                                                      {COMMPROF_KIND_WINDOW, 0}};
  EXPECT_EQ(got, want);
  ASSERT_NE(window, nullptr);
  EXPECT_EQ(window->bytes, 1u);
  EXPECT_EQ(window->correlation, 2u);
  EXPECT_EQ(window->subtype, 1);
  EXPECT_LT(window->start_ns, window->end_ns);
}

}  // namespace
}  // namespace commprof
