// The clocks a runtime can be given (collector/host_clock.h): the choice made at start-up from the
// fake-clock testing aid's lists, and the shifted clock's formula.
#include "collector/host_clock.h"

#include <gtest/gtest.h>

#include <memory>

#include "collector_sim.h"

namespace commprof {
namespace {

Config FakeLists(const std::string& offsets, const std::string& drifts) {
  Config c;
  c.fake_clock_offset_ns = offsets;
  c.fake_clock_drift_ppm = drifts;
  return c;
}

TEST(HostClock, WithoutAnItemForTheRankTheSteadyClockIsChosen) {
  EXPECT_NE(dynamic_cast<SteadyHostClock*>(MakeHostClock(FakeLists("", ""), 0).get()), nullptr);
  EXPECT_NE(dynamic_cast<SteadyHostClock*>(MakeHostClock(FakeLists("0,5000", ""), 2).get()), nullptr)
      << "a rank past the end of the list has no item";
  EXPECT_NE(dynamic_cast<SteadyHostClock*>(MakeHostClock(FakeLists("0,,7", ""), 1).get()), nullptr)
      << "an empty item is none";
  SteadyHostClock steady;
  EXPECT_EQ(steady.FromSteady(123'456'789), 123'456'789u);
}

TEST(HostClock, AnItemInEitherListChoosesTheShiftedClock) {
  auto offset_only = MakeHostClock(FakeLists("0,5000000", ""), 1);
  EXPECT_NE(dynamic_cast<ShiftedHostClock*>(offset_only.get()), nullptr);
  EXPECT_EQ(offset_only->FromSteady(10'000'000'000ull), 10'005'000'000ull);
  auto drift_only = MakeHostClock(FakeLists("", "0,1000"), 1);
  EXPECT_NE(dynamic_cast<ShiftedHostClock*>(drift_only.get()), nullptr);
}

TEST(HostClock, TheShiftedClockAddsItsOffsetAndDriftOverTheTimeSinceItsCreation) {
  ShiftedHostClock c(-3'000'000, 1000.0);  // 1000 ppm: 1 ms per s
  // t0 is the steady time at construction: recover it from a reading at a known distance.
  const uint64_t later = c.FromSteady(SteadyNowNs());
  const uint64_t s = SteadyNowNs() + 2'000'000'000ull;
  const uint64_t one_s_more = s + 1'000'000'000ull;
  EXPECT_EQ(c.FromSteady(one_s_more) - c.FromSteady(s), 1'001'000'000ull);
  EXPECT_GT(c.Now(), later);
}

TEST(HostClock, TheManualClockReadsWhatTheTestSetAndAnchorsAtAFixedUtc) {
  test_support::ManualClock m(100, 42);
  EXPECT_EQ(m.Now(), 100u);
  m.Advance(5);
  EXPECT_EQ(m.Now(), 105u);
  m.Set(7);
  EXPECT_EQ(m.FromSteady(999), 7u);
  EXPECT_EQ(m.Anchor().steady_ns, 7u);
  EXPECT_EQ(m.Anchor().utc_ns, 42u);
}

}  // namespace
}  // namespace commprof
