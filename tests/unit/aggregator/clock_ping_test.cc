// The TCP clock exchange for ranks without MPI: the aggregator's answer to clock-ping frames over
// real sockets (aggregator/server.cc, AnswerPing), the collector's fake clock testing aid
// (collector/runtime.h, Now()/ToLocal), and the two together: a Runtime whose clock is shifted
// by a known amount recovers that shift against the aggregator's clock within its bound.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/ingest.h"
#include "aggregator/server.h"
#include "analysis/load/profile_reader.h"
#include "collector/runtime.h"
#include "core/clock.h"
#include "core/wire.h"
#include "support/live_aggregator.h"
#include "support/test_support.h"

namespace commprof {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr const char* kSecret = "clock-secret";
constexpr const char* kJob = "job-clock";

using test_support::LiveAggregator;
using test_support::TempDir;
using test_support::WaitFor;

// The shared TCP client (5 s receive timeout, TCP_NODELAY) with this protocol's hello and ping.
class Client : public test_support::TcpClient {
 public:
  using TcpClient::TcpClient;

  bool Hello(uint32_t rank) {
    wire::Hello h;
    h.rank = rank;
    h.world_size = 1;
    h.pid = 4000 + rank;
    h.host = "ping-host";
    h.job_id = kJob;
    Bytes out;
    wire::AppendHello(out, h, kSecret, challenge().value_or(wire::Nonce{}));
    if (!Send(out)) return false;
    auto f = ReadFrame();
    if (!f || f->first != wire::FrameType::kHelloAck) return false;
    auto ack = wire::DecodeHelloAck(f->second);
    return ack.ok() && ack->accepted;
  }

  bool Ping(uint64_t local_send_ns) {
    Bytes out;
    wire::AppendClockPing(out, local_send_ns);
    return Send(out);
  }
};

class ClockPingTest : public test_support::LiveAggregatorTest {
 protected:
  ClockPingTest() : LiveAggregatorTest("commprof-ck") {}

  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    agg_.Start(dir_ / "out.h5", StreamPolicy{kSecret, kJob}, 1);
  }
};

TEST_F(ClockPingTest, PingAfterHelloIsAnsweredWithItsSendTimeAndAReferenceTimeTakenWhileItWasOut) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Hello(0));
  const uint64_t sent = 0xFEEDFACE12345678ull;  // any value: the server only echoes it
  uint64_t before = SteadyNowNs();
  ASSERT_TRUE(c.Ping(sent));
  auto f = c.ReadFrame();
  uint64_t after = SteadyNowNs();
  ASSERT_TRUE(f.has_value()) << "no answer to the ping";
  ASSERT_EQ(f->first, wire::FrameType::kClockPong);
  auto pong = wire::DecodeClockPong(f->second);
  ASSERT_TRUE(pong.ok()) << pong.status().message();
  EXPECT_EQ(pong->local_send_ns, sent);
  // the server's clock is this process's steady clock: its reading lies between ours
  EXPECT_GE(pong->reference_ns, before);
  EXPECT_LE(pong->reference_ns, after);
}

TEST_F(ClockPingTest, ManyPingsAreEachAnsweredInOrderAndTheStreamGoesOnNormally) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Hello(0));
  uint64_t last_ref = 0;
  for (uint64_t k = 0; k < 64; ++k) {
    uint64_t before = SteadyNowNs();
    ASSERT_TRUE(c.Ping(1000 + k));
    auto f = c.ReadFrame();
    uint64_t after = SteadyNowNs();
    ASSERT_TRUE(f.has_value()) << k;
    ASSERT_EQ(f->first, wire::FrameType::kClockPong) << k;
    auto pong = wire::DecodeClockPong(f->second);
    ASSERT_TRUE(pong.ok()) << k;
    EXPECT_EQ(pong->local_send_ns, 1000 + k);
    EXPECT_GE(pong->reference_ns, before) << k;
    EXPECT_LE(pong->reference_ns, after) << k;
    EXPECT_GT(pong->reference_ns, last_ref) << "reference times go forward";
    last_ref = pong->reference_ns;
  }
  // the pings left no trace in the stream: events and bye after them are stored as usual
  std::vector<commprof_event> ev(3);
  for (size_t i = 0; i < ev.size(); ++i) {
    ev[i].kind = COMMPROF_KIND_USER_MARK;
    ev[i].start_ns = ev[i].end_ns = 10 * (i + 1);
  }
  Bytes out;
  wire::AppendEvents(out, 0, ev.data(), ev.size());
  wire::Bye bye;
  bye.counters = {{"events_recorded", 3}};
  wire::AppendBye(out, bye);
  ASSERT_TRUE(c.Send(out));
  ASSERT_TRUE(WaitFor([&] { return stats().byes.load() == 1; }));
  EXPECT_EQ(stats().dropped.load(), 0u);
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "complete");
  EXPECT_EQ(r->info().ranks[0].event_count, 3u);
  EXPECT_EQ(r->info().ranks[0].clock_method, "none") << "the aggregator answers pings; the rank sends its model";
}

TEST_F(ClockPingTest, PingBeforeHelloIsDroppedWithoutAnAnswer) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Ping(42));
  EXPECT_TRUE(c.WaitClosedByPeerWithoutAnswer()) << "the server answered a ping from an unauthenticated peer";
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1; }));
  EXPECT_EQ(stats().accepted.load(), 0u);
  EXPECT_EQ(stats().ended.load(), 0u);
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "missing");
}

TEST_F(ClockPingTest, TruncatedPingAfterHelloDropsTheStreamAsCorrupt) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Hello(0));
  Bytes frame;
  wire::AppendClockPing(frame, 7);
  frame.resize(wire::kHeaderSize + 4);  // 4 of the 8 payload bytes ...
  frame[8] = 4;                         // ... and a length that says so
  ASSERT_TRUE(c.Send(frame));
  EXPECT_TRUE(c.WaitClosedByPeerWithoutAnswer());
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1 && stats().ended.load() == 1; }));
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  const RankInfo& k = r->info().ranks.at(0);
  EXPECT_EQ(k.status, "corrupt");
  EXPECT_NE(k.end_reason.find("clock-ping frame, field 'local_send_ns': truncated"), std::string::npos) << k.end_reason;
}

TEST_F(ClockPingTest, PongFromACollectorIsAnUnexpectedFrame) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Hello(0));
  Bytes frame;
  wire::AppendClockPong(frame, wire::ClockPong{1, 2});
  ASSERT_TRUE(c.Send(frame));
  EXPECT_TRUE(c.WaitClosedByPeerWithoutAnswer());
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1 && stats().ended.load() == 1; }));
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  const RankInfo& k = r->info().ranks.at(0);
  EXPECT_EQ(k.status, "corrupt");
  EXPECT_NE(k.end_reason.find("unexpected clock-pong frame from a collector"), std::string::npos) << k.end_reason;
}

// ---- the fake clock testing aid (COMMPROF_FAKE_CLOCK_OFFSET_NS / _DRIFT_PPM) ----

Config FakeClockConfig(const std::string& offsets, const std::string& drifts) {
  Config c;
  c.spool_dir = "unused";
  c.buffer_events = 1024;
  c.memory_mb = 16;
  c.flush_ms = 5;
  c.request_slots = 64;
  c.connect_timeout_ms = 2000;
  c.fake_clock_offset_ns = offsets;
  c.fake_clock_drift_ppm = drifts;
  return c;
}

Identity RankIdentity(uint32_t rank, uint32_t world) {
  Identity id;
  id.rank = rank;
  id.world_size = world;
  id.pid = static_cast<uint32_t>(::getpid());
  id.host = "fake-clock-host";
  return id;
}

TEST(RuntimeFakeClock, TheOffsetOfItsOwnRankIsAddedToTheSteadyClock) {
  uint64_t a0 = SteadyNowNs();
  Runtime rt(FakeClockConfig("0,5000000", ""), RankIdentity(1, 2));
  uint64_t b0 = SteadyNowNs();
  // Now() reads the steady clock once, between a and b, and adds exactly 5 ms (no drift given)
  uint64_t a = SteadyNowNs();
  uint64_t n = rt.Now();
  uint64_t b = SteadyNowNs();
  EXPECT_GE(n, a + 5'000'000);
  EXPECT_LE(n, b + 5'000'000);
  EXPECT_EQ(rt.ToLocal(123'456'789'000ull), 123'456'789'000ull + 5'000'000);
  // the start anchor (sent in the hello, the model's anchor) is on the shifted clock too
  EXPECT_GE(rt.start_anchor().steady_ns, a0 + 5'000'000);
  EXPECT_LE(rt.start_anchor().steady_ns, b0 + 5'000'000);
}

TEST(RuntimeFakeClock, OtherRanksOfTheListAndRanksPastItKeepTheirOwnShiftOrNone) {
  Runtime r0(FakeClockConfig("0,5000000,-3000000", ""), RankIdentity(0, 4));
  Runtime r2(FakeClockConfig("0,5000000,-3000000", ""), RankIdentity(2, 4));
  Runtime r3(FakeClockConfig("0,5000000,-3000000", ""), RankIdentity(3, 4));
  Runtime unset(FakeClockConfig("", ""), RankIdentity(1, 4));
  const uint64_t t = 10'000'000'000ull;
  EXPECT_EQ(r0.ToLocal(t), t);
  EXPECT_EQ(r2.ToLocal(t), t - 3'000'000);
  EXPECT_EQ(r3.ToLocal(t), t) << "no item for rank 3: the real clock";
  EXPECT_EQ(unset.ToLocal(t), t);
}

// Reads rt.Now() between two steady readings, retrying (up to 1000 times) until the two are
// less than 20 us apart, so a preemption cannot widen the bracket.
void Bracketed(const Runtime& rt, uint64_t& a, uint64_t& n, uint64_t& b) {
  for (int i = 0; i < 1000; ++i) {
    a = SteadyNowNs();
    n = rt.Now();
    b = SteadyNowNs();
    if (b - a < 20'000) return;
  }
}

TEST(RuntimeFakeClock, DriftAppliesToTheTimeElapsedSinceTheRuntimeStarted) {
  // 1000 ppm: the shifted clock gains 1 us per ms of steady time
  constexpr double kDrift = 1000e-6;
  Runtime rt(FakeClockConfig("0,5000000", "0,1000"), RankIdentity(1, 2));
  uint64_t a1, n1, b1, a2, n2, b2;
  Bracketed(rt, a1, n1, b1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Bracketed(rt, a2, n2, b2);
  // n = s + 5 ms + trunc((s - base) x 1e-3) for the steady reading s inside each bracket, so the
  // gap between the two readings is the steady gap times 1.001, give or take 1 ns of truncation
  auto gap = static_cast<double>(n2 - n1);
  EXPECT_GE(gap, static_cast<double>(a2 - b1) * (1 + kDrift) - 1);
  EXPECT_LE(gap, static_cast<double>(b2 - a1) * (1 + kDrift) + 1);
  // What it gained over the unshifted clock: at least 1000 ppm of the >= 100 ms sleep (100 us)
  // less the two brackets' widths (< 20 us each).
  double gained = gap - static_cast<double>(b2 - a1);
  EXPECT_GE(gained, kDrift * static_cast<double>(a2 - b1) - static_cast<double>((b1 - a1) + (b2 - a2)) - 1);
  EXPECT_GE(gained, 100'000.0 - 40'000.0 - 1);
  // ToLocal is the same function: a steady time 1 s later gains 1 ms more
  uint64_t s = b2;
  EXPECT_NEAR(static_cast<double>(rt.ToLocal(s + 1'000'000'000ull) - rt.ToLocal(s)), 1'001'000'000.0, 1.0);
}

// ---- the whole TCP exchange: a shifted Runtime against the aggregator's clock ----

TEST(RuntimeTcpClock, AShiftedRankRecoversItsOffsetAgainstTheAggregatorWithinTheReportedBound) {
  TempDir dir("commprof-ck");
  ASSERT_FALSE(dir.path().empty());
  LiveAggregator agg;
  agg.Start(dir / "out.h5", StreamPolicy{kSecret, kJob}, 2);
  if (!agg.ok()) return;
  {
    Config c = FakeClockConfig("0,5000000", "");
    c.aggregator = "127.0.0.1:" + std::to_string(agg.port());
    c.secret = kSecret;
    c.job_id = kJob;
    c.spool_dir = dir / "spool";
    c.clock_sync = true;
    c.clock_sync_rounds = 16;
    c.clock_sync_interval_ms = 0;       // only the start and end epochs
    Runtime rt(c, RankIdentity(1, 2));  // Identity.mpi = false: align over TCP
    rt.Start();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // keeps the two epochs far apart
    rt.Shutdown();
  }
  ASSERT_TRUE(WaitFor([&] { return agg.stats().byes.load() == 1; }));
  Status fin = agg.Finish();
  ASSERT_TRUE(fin.ok()) << fin.message();

  auto r = ProfileReader::Open(dir / "out.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const RankInfo& k = r.value()->info().ranks.at(1);
  EXPECT_EQ(k.status, "complete");
  EXPECT_EQ(k.clock_method, "tcp-pingpong");
  ASSERT_EQ(k.clock_points.size(), 2u) << "one epoch at start, one at the end";
  // reference = aggregator's steady clock = local - 5 ms: offset -5 ms, within the bound
  EXPECT_GT(k.clock_error_bound_ns, 0);
  EXPECT_LT(k.clock_error_bound_ns, 1'000'000) << "loopback round trips are far below 2 ms";
  EXPECT_LE(std::llabs(k.clock_offset_ns + 5'000'000), k.clock_error_bound_ns) << k.clock_offset_ns;
  for (const ClockPoint& p : k.clock_points) {
    EXPECT_LE(std::llabs(p.offset_ns + 5'000'000), p.half_rtt_ns) << "point at " << p.local_ns;
  }
  EXPECT_EQ(k.counters.at("clock_sync_epochs"), 2u);
  EXPECT_EQ(r.value()->info().ranks.at(0).status, "missing");
}

}  // namespace
}  // namespace commprof
