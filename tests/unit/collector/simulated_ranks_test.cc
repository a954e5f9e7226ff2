// Several ranks simulated in one process: each is a real Runtime on a clock the test sets, on a
// thread of its own, shipping through the transport seam to an in-process aggregator (or into a
// frame capture). Nothing depends on the scheduler or the machine's clock, so the stored result
// is exactly what the schedule says, on every run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "collector/runtime.h"
#include "collector_sim.h"
#include "core/clock_model.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::BorrowedClock;
using test_support::ExpectEventEq;
using test_support::FrameCapture;
using test_support::InProcessAggregator;
using test_support::ManualClock;
using test_support::ReadEvents;
using test_support::TempDir;
using test_support::WaitFor;

// Step i of a rank's program: a 1 KiB allreduce on MPI_COMM_WORLD, as the rank records it and as
// the file must hold it (thread 0, the rank's only recording thread).
commprof_event AllreduceStep(uint64_t i, uint32_t name_id, uint64_t start, uint64_t end) {
  return test_support::events::Collective(COMMPROF_OP_ALLREDUCE, i, start, end, {.bytes = 1024, .name = name_id});
}

constexpr const char* kSecret = "sim-secret";
constexpr const char* kJob = "job-sim";
constexpr uint32_t kRanks = 4;
constexpr uint64_t kSteps = 50;
constexpr uint64_t kUtc = 1'700'000'000'000'000'000ull;

// The true schedule, in ns of the reference (aggregator) clock. Every time is a whole number of
// ms, so the injected drifts below give whole ns.
constexpr uint64_t kT0 = 1'000'000'000;  // the runtimes start (and align)
constexpr uint64_t kStepNs = 10'000'000;
constexpr uint64_t kLeaveNs = 5'000'000;                // every rank leaves step i at kT0 + i*step + this
constexpr uint64_t kT1 = kT0 + (kSteps + 1) * kStepNs;  // the runtimes shut down (and align again)
constexpr int64_t kOffsetNs[kRanks] = {0, 5'000'000, -3'000'000, 12'000'000};
constexpr int64_t kDriftPpm[kRanks] = {0, 40, -25, 10};

// Rank r arrives at step i r ms after the step starts: rank 3 is the straggler.
uint64_t Arrival(uint32_t r, uint64_t i) { return kT0 + i * kStepNs + r * 1'000'000ull; }
uint64_t Departure(uint64_t i) { return kT0 + i * kStepNs + kLeaveNs; }

// Rank r's local clock at true time t: shifted and skewed (t is a whole number of ms).
uint64_t Local(uint32_t r, uint64_t t) {
  return static_cast<uint64_t>(static_cast<int64_t>(t) + kOffsetNs[r] +
                               static_cast<int64_t>(t / 1'000'000) * kDriftPpm[r]);
}

Config SimConfig(bool clock_sync) {
  Config c;
  c.aggregator = "in-process";  // not dialled: the transports come from the seam
  c.secret = kSecret;
  c.job_id = kJob;
  c.spool_dir = "/nonexistent-unused";
  c.buffer_events = 1024;  // more than kSteps: nothing dropped
  c.memory_mb = 64;
  c.flush_ms = 5;
  c.request_slots = 64;
  c.clock_sync = clock_sync;
  c.clock_sync_rounds = 4;
  c.clock_sync_interval_ms = 0;  // epochs at start and at shutdown only
  return c;
}

Identity SimIdentity(uint32_t r) {
  Identity id;
  id.rank = r;
  id.world_size = kRanks;
  id.pid = 1000 + r;
  id.host = "sim-host-" + std::to_string(r);
  return id;
}

// One simulated rank: its clock (kept by the test, read by the runtime) and its runtime.
struct SimRank {
  SimRank(uint32_t r, bool clock_sync, std::unique_ptr<TransportFactory> transports)
      : rank(r), clock(Local(r, kT0), kUtc) {
    RuntimeSeams seams;
    seams.clock = std::make_unique<BorrowedClock>(clock);
    seams.transports = std::move(transports);
    rt = std::make_unique<Runtime>(SimConfig(clock_sync), SimIdentity(r), std::move(seams));
  }

  // The rank's program, on its own thread: kSteps allreduces on the schedule above.
  void Run() {
    uint32_t name = rt->Intern("MPI_Allreduce");
    for (uint64_t i = 0; i < kSteps; ++i) {
      clock.Set(Local(rank, Arrival(rank, i)));
      uint64_t start = rt->Now();
      clock.Set(Local(rank, Departure(i)));
      rt->Record(AllreduceStep(i, name, start, rt->Now()));
    }
  }

  const uint32_t rank;
  ManualClock clock;
  std::unique_ptr<Runtime> rt;
};

// What rank r's events must be, as stored (local times, thread 0: the rank's only recording thread).
std::vector<commprof_event> ExpectedEvents(uint32_t r, uint32_t name_id) {
  std::vector<commprof_event> out;
  for (uint64_t i = 0; i < kSteps; ++i) {
    out.push_back(AllreduceStep(i, name_id, Local(r, Arrival(r, i)), Local(r, Departure(i))));
  }
  return out;
}

// Runs the ranks' programs at once, one thread each, and waits for them.
void RunAll(std::vector<std::unique_ptr<SimRank>>& ranks) {
  std::vector<std::thread> threads;
  threads.reserve(ranks.size());
  for (auto& r : ranks) {
    threads.emplace_back([&r] { r->Run(); });
  }
  for (auto& t : threads) {
    t.join();
  }
}

TEST(SimulatedRanks, FourRanksWithInjectedClocksStoreExactEventsAndAlignExactlyToTheAggregator) {
  TempDir dir("commprof-sim");
  ASSERT_FALSE(dir.path().empty());
  ManualClock reference(kT0, kUtc);
  InProcessAggregator agg(dir / "out.h5", StreamPolicy{kSecret, kJob}, kRanks, &reference);
  ASSERT_TRUE(agg.ok());

  std::vector<std::unique_ptr<SimRank>> ranks;
  for (uint32_t r = 0; r < kRanks; ++r) {
    ranks.push_back(std::make_unique<SimRank>(r, true, agg.Transports(dir / "spool")));
    ranks.back()->rt->Start();
  }
  // The first alignment epoch (over the link, on each shipper thread) reads the clocks at kT0:
  // wait for it before any clock moves.
  for (auto& r : ranks) {
    Runtime& rt = *r->rt;
    ASSERT_TRUE(WaitFor([&rt] { return rt.clock_version() >= 1; })) << "rank " << r->rank << " never aligned";
  }
  RunAll(ranks);
  // Shutdown aligns once more, at kT1 on every clock.
  reference.Set(kT1);
  for (auto& r : ranks) {
    r->clock.Set(Local(r->rank, kT1));
    r->rt->Shutdown();
  }
  EXPECT_EQ(agg.stats().accepted.load(), kRanks);
  EXPECT_EQ(agg.stats().byes.load(), kRanks);
  EXPECT_EQ(agg.stats().ended.load(), kRanks);
  EXPECT_EQ(agg.stats().refused.load(), 0u);
  EXPECT_EQ(agg.stats().dropped.load(), 0u);
  Status fin = agg.Finish();
  ASSERT_TRUE(fin.ok()) << fin.message();

  auto reader = ProfileReader::Open(dir / "out.h5");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const ProfileInfo& info = reader.value()->info();
  EXPECT_TRUE(info.finalized);
  EXPECT_EQ(info.job_id, kJob);
  ASSERT_EQ(info.ranks.size(), kRanks);
  for (uint32_t r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankInfo& rank = info.ranks[r];
    EXPECT_EQ(rank.rank, r);
    EXPECT_EQ(rank.status, "complete");
    EXPECT_EQ(rank.host, "sim-host-" + std::to_string(r));
    EXPECT_EQ(rank.pid, 1000u + r);
    EXPECT_EQ(rank.event_count, kSteps);
    EXPECT_EQ(rank.start_steady_ns, Local(r, kT0));
    EXPECT_EQ(rank.start_utc_ns, kUtc);
    EXPECT_EQ(rank.counters.at("events_recorded"), kSteps);
    EXPECT_EQ(rank.counters.at("dropped_ring_full"), 0u);
    EXPECT_EQ(rank.counters.at("clock_sync_epochs"), 2u);

    // The clock model: one point per epoch, each exact (a clock that stands still during the
    // ping-pong has a zero round trip), so the offset at the anchor is the injected shift.
    EXPECT_EQ(rank.clock_method, "tcp-pingpong");
    auto point = [r](uint64_t t) {
      return ClockPoint{static_cast<int64_t>(Local(r, t)), static_cast<int64_t>(t) - static_cast<int64_t>(Local(r, t)),
                        0};
    };
    ASSERT_EQ(rank.clock_points.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      ClockPoint want = point(k == 0 ? kT0 : kT1);
      EXPECT_EQ(rank.clock_points[k].local_ns, want.local_ns) << k;
      EXPECT_EQ(rank.clock_points[k].offset_ns, want.offset_ns) << k;
      EXPECT_EQ(rank.clock_points[k].half_rtt_ns, 0) << k;
    }
    EXPECT_EQ(rank.clock_offset_ns, -(kOffsetNs[r] + static_cast<int64_t>(kT0 / 1'000'000) * kDriftPpm[r]));
    EXPECT_EQ(rank.clock_error_bound_ns, 0);

    auto strings = reader.value()->Strings(r);
    ASSERT_TRUE(strings.ok()) << strings.status().message();
    StringTable fresh;
    const auto reserved = static_cast<uint32_t>(fresh.Since(0).size());
    ASSERT_EQ(strings->size(), reserved + 1u);
    EXPECT_EQ(strings->back(), "MPI_Allreduce");

    auto events = ReadEvents(*reader.value(), r);
    auto want = ExpectedEvents(r, reserved);
    ASSERT_EQ(events.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ExpectEventEq(events[i], want[i], i);
    }
    // Aligned by the stored model, every arrival lands on the true schedule (the linear model
    // interpolates exactly up to rounding).
    ClockModel model = rank.clock_model();
    for (size_t i = 0; i < events.size(); ++i) {
      auto local = static_cast<int64_t>(events[i].start_ns);
      EXPECT_NEAR(static_cast<double>(local + model.OffsetAt(local)), static_cast<double>(Arrival(r, i)), 1.0) << i;
    }
  }
}

TEST(SimulatedRanks, ThreeRanksIntoAFrameCaptureSendHelloStringsEventsClockAndByeInOrder) {
  FrameCapture capture;
  std::vector<std::unique_ptr<SimRank>> ranks;
  for (uint32_t r = 0; r < 3; ++r) {
    ranks.push_back(std::make_unique<SimRank>(r, false, capture.Transports(r)));
    ranks.back()->rt->Start();
  }
  RunAll(ranks);
  for (auto& r : ranks) {
    r->rt->Shutdown();
  }
  StringTable fresh;
  const auto reserved = static_cast<uint32_t>(fresh.Since(0).size());
  for (uint32_t r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    auto frames = capture.FramesOf(r);
    ASSERT_GE(frames.size(), 5u);  // hello, strings, events, clock, bye at least
    ASSERT_EQ(frames.front().type, wire::FrameType::kHello);
    auto hello = wire::DecodeHello(frames.front().payload);
    ASSERT_TRUE(hello.ok()) << hello.status().message();
    EXPECT_EQ(hello->rank, r);
    EXPECT_EQ(hello->world_size, kRanks);  // SimIdentity's world
    EXPECT_EQ(hello->job_id, kJob);
    EXPECT_EQ(hello->start_steady_ns, Local(r, kT0));
    EXPECT_EQ(hello->start_utc_ns, kUtc);
    EXPECT_EQ(frames[frames.size() - 2].type, wire::FrameType::kClock);
    ASSERT_EQ(frames.back().type, wire::FrameType::kBye);

    std::vector<std::string> strings;
    std::vector<commprof_event> events;
    uint64_t next_batch = 0;
    for (size_t k = 1; k + 2 < frames.size(); ++k) {
      const auto& f = frames[k];
      if (f.type == wire::FrameType::kStrings) {
        auto s = wire::DecodeStrings(f.payload);
        ASSERT_TRUE(s.ok());
        EXPECT_EQ(s->first_id, strings.size());
        strings.insert(strings.end(), s->strings.begin(), s->strings.end());
      } else if (f.type == wire::FrameType::kEvents) {
        auto e = wire::DecodeEvents(f.payload);
        ASSERT_TRUE(e.ok());
        EXPECT_EQ(e->batch_seq, next_batch++);
        for (const auto& ev : e->events) {
          EXPECT_LT(ev.name_id, strings.size()) << "an event named before its string was sent";
        }
        events.insert(events.end(), e->events.begin(), e->events.end());
      } else {
        ADD_FAILURE() << "unexpected frame " << wire::FrameTypeName(f.type) << " at " << k;
      }
    }
    ASSERT_EQ(strings.size(), reserved + 1u);
    EXPECT_EQ(strings.back(), "MPI_Allreduce");
    auto want = ExpectedEvents(r, reserved);
    ASSERT_EQ(events.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ExpectEventEq(events[i], want[i], i);
    }
    auto clock = wire::DecodeClock(frames[frames.size() - 2].payload);
    ASSERT_TRUE(clock.ok());
    EXPECT_EQ(clock->method, "none");  // alignment off
    EXPECT_EQ(clock->anchor_local_ns, Local(r, kT0));
    auto bye = wire::DecodeBye(frames.back().payload);
    ASSERT_TRUE(bye.ok());
    std::map<std::string, uint64_t> counters(bye->counters.begin(), bye->counters.end());
    EXPECT_EQ(counters.at("events_recorded"), kSteps);
    EXPECT_EQ(counters.at("events_shipped"), kSteps);
    EXPECT_EQ(counters.at("spooled"), 0u);
  }
}

// A rank that keeps naming new operations while its shipper runs: whatever the interleaving, no
// events frame may carry a name id the strings frames before it have not delivered (the reader
// would store the event under a name it does not know). Each event gets a fresh name so every
// batch the shipper drains can race a snapshot of the table.
TEST(SimulatedRanks, NamesInternedWhileTheShipperDrainsReachTheWireBeforeAnyEventCarryingThem) {
  FrameCapture capture;
  SimRank sim(0, false, capture.Transports(0));
  sim.rt->Start();
  // Paced (one event per ~10 us for 200 ms of steady time) so the ring never fills and the
  // shipper drains about forty times mid-stream; the machine's load changes only how often the race
  // is tried, never what must hold.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (uint64_t i = 0; std::chrono::steady_clock::now() < until; ++i) {
    uint32_t name = sim.rt->Intern(("op-" + std::to_string(i)).c_str());
    sim.rt->Record(AllreduceStep(i, name, i, i + 1));
    const auto next = std::chrono::steady_clock::now() + std::chrono::microseconds(10);
    while (std::chrono::steady_clock::now() < next) {
    }
  }
  sim.rt->Shutdown();
  size_t strings = 0;
  uint64_t events = 0;
  for (const auto& f : capture.FramesOf(0)) {
    if (f.type == wire::FrameType::kStrings) {
      auto s = wire::DecodeStrings(f.payload);
      ASSERT_TRUE(s.ok());
      ASSERT_EQ(s->first_id, strings);
      strings += s->strings.size();
    } else if (f.type == wire::FrameType::kEvents) {
      auto e = wire::DecodeEvents(f.payload);
      ASSERT_TRUE(e.ok());
      for (const auto& ev : e->events) {
        ASSERT_LT(ev.name_id, strings) << "event " << events << " named before its string was sent";
        ++events;
      }
    }
  }
  EXPECT_GT(events, 0u);
  std::map<std::string, uint64_t> counters;
  for (const auto& f : capture.FramesOf(0)) {
    if (f.type == wire::FrameType::kBye) {
      auto bye = wire::DecodeBye(f.payload);
      ASSERT_TRUE(bye.ok());
      counters.insert(bye->counters.begin(), bye->counters.end());
    }
  }
  EXPECT_EQ(counters.at("events_shipped"), events);  // what the rank says it sent is what came
}

}  // namespace
}  // namespace commprof
