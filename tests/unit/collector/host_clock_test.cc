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

// ---- which ranks share a clock (HostClock::Domain) and the simulated hosts (COMMPROF_FAKE_HOST) ----

Config FakeHosts(const std::string& hosts, const std::string& offsets, const std::string& drifts = "") {
  Config c;
  c.fake_host = hosts;
  c.fake_host_clock_offset_ns = offsets;
  c.fake_host_clock_drift_ppm = drifts;
  return c;
}

TEST(HostClock, RanksOfOneMachineShareTheSystemClockDomain) {
  const uint64_t d = SystemClockDomain();
  EXPECT_EQ(SystemClockDomain(), d) << "stable across reads";
  EXPECT_EQ(MakeHostClock(FakeLists("", ""), 0)->Domain(), d);
  EXPECT_EQ(MakeHostClock(FakeLists("", ""), 3)->Domain(), d);
  EXPECT_EQ(SteadyHostClock().Domain(), d);
}

TEST(HostClock, ARankWithAShiftOfItsOwnIsAClockOfItsOwn) {
  const uint64_t d = SystemClockDomain();
  auto shifted1 = MakeHostClock(FakeLists("0,5000000,5000000", ""), 1);
  auto shifted2 = MakeHostClock(FakeLists("0,5000000,5000000", ""), 2);
  EXPECT_NE(shifted1->Domain(), d);
  EXPECT_NE(shifted1->Domain(), shifted2->Domain()) << "each rank with its own shift is measured, not assumed";
  EXPECT_EQ(MakeHostClock(FakeLists("0,5000000", ""), 2)->Domain(), d) << "no item: the machine's clock";
}

TEST(HostClock, SimulatedHostsGroupRanksByNumberAndShiftEachHostsClockAlike) {
  // ranks 0,1 on host 0 (unshifted), ranks 2,3 on host 1 (+5 ms, 40 ppm of the steady reading)
  const Config c = FakeHosts("0,0,1,1", "0,5000000", "0,40");
  auto r0 = MakeHostClock(c, 0), r1 = MakeHostClock(c, 1), r2 = MakeHostClock(c, 2), r3 = MakeHostClock(c, 3);
  EXPECT_EQ(r0->Domain(), r1->Domain());
  EXPECT_EQ(r2->Domain(), r3->Domain());
  EXPECT_NE(r0->Domain(), r2->Domain());
  EXPECT_NE(r0->Domain(), SystemClockDomain()) << "a simulated host is not the machine";
  const uint64_t s = 100'000'000'000ull;  // 100 s since boot: 40 ppm is 4 ms
  EXPECT_EQ(r0->FromSteady(s), s);
  EXPECT_EQ(r2->FromSteady(s), s + 5'000'000 + 4'000'000);
  EXPECT_EQ(r3->FromSteady(s), r2->FromSteady(s)) << "the ranks of one host read one clock";
  // a rank past the end of the host list is on the machine, as without the aid
  EXPECT_EQ(MakeHostClock(c, 4)->Domain(), SystemClockDomain());
  // a host past the end of the offset list is simulated but unshifted
  auto far = MakeHostClock(FakeHosts("7", "0,5000000"), 0);
  EXPECT_EQ(far->FromSteady(s), s);
  EXPECT_NE(far->Domain(), SystemClockDomain());
  // a rank shift on top of a host shift: both apply, and the rank is a clock of its own
  Config both = c;
  both.fake_clock_offset_ns = "0,0,0,1000";
  auto r3b = MakeHostClock(both, 3);
  EXPECT_EQ(r3b->FromSteady(s), s + 9'001'000);
  EXPECT_NE(r3b->Domain(), r2->Domain());
}

}  // namespace
}  // namespace commprof
