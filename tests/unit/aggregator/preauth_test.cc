// The aggregator before a connection is authenticated (docs/wire-protocol.md, "Before
// authentication"), against real sockets to a real in-process Server: the challenge, the bounded
// hello, the deadline, the connection caps, replayed hellos; and the collector's side of the
// handshake (ConnectToAggregator) against the same server.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/server.h"
#include "collector/transport.h"
#include "core/wire.h"
#include "support/live_aggregator.h"
#include "support/test_support.h"

namespace commprof_test {
uint64_t LargeAllocationCount();
}

namespace commprof {
namespace {

using Bytes = std::vector<uint8_t>;
using Client = test_support::TcpClient;
using test_support::WaitFor;

constexpr const char* kSecret = "preauth-secret";
constexpr const char* kJob = "job-preauth";

wire::Hello MakeHello(uint32_t rank, uint32_t world = 2, const std::string& job = kJob) {
  wire::Hello h;
  h.rank = rank;
  h.world_size = world;
  h.pid = 7000 + rank;
  h.host = "preauth-host";
  h.job_id = job;
  h.start_steady_ns = 11;
  h.start_utc_ns = 12;
  return h;
}

Bytes SignedHello(const Client& c, uint32_t rank, const std::string& secret = kSecret) {
  EXPECT_TRUE(c.challenge().has_value()) << "the server sent no challenge";
  Bytes out;
  wire::AppendHello(out, MakeHello(rank), secret, c.challenge().value_or(wire::Nonce{}));
  return out;
}

Bytes RawHeader(wire::FrameType type, uint32_t len) {
  Bytes b;
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(wire::kMagic >> (8 * i)));
  b.push_back(static_cast<uint8_t>(wire::kVersion));
  b.push_back(0);
  b.push_back(static_cast<uint8_t>(type));
  b.push_back(static_cast<uint8_t>(static_cast<uint16_t>(type) >> 8));
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(len >> (8 * i)));
  for (int i = 0; i < 4; ++i) b.push_back(0);
  return b;
}

// This process's resident set (VmRSS of /proc/self/status), in bytes.
uint64_t RssBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::strtoull(line + 6, nullptr, 10);
  }
  std::fclose(f);
  return kb * 1024;
}

class PreauthTest : public test_support::LiveAggregatorTest {
 protected:
  PreauthTest() : LiveAggregatorTest("commprof-preauth") {}

  void Start(const ServerLimits& limits = ServerLimits{}, StreamPolicy policy = StreamPolicy{kSecret, kJob}) {
    ASSERT_FALSE(dir_.path().empty());
    agg_.Start(dir_ / "out.h5", std::move(policy), 2, limits);
    ASSERT_TRUE(agg_.ok());
  }

  std::string Address() const { return "127.0.0.1:" + std::to_string(port()); }

  // The collector's handshake, as the shipper runs it: a hello frame with the spool proof,
  // re-signed by ConnectToAggregator over the connection's challenge.
  Result<std::unique_ptr<Transport>> Collector(uint32_t rank, const std::string& secret = kSecret,
                                               uint32_t timeout_ms = 5000) {
    Bytes hello;
    wire::AppendHello(hello, MakeHello(rank), secret);
    return ConnectToAggregator(Address(), hello, secret, timeout_ms);
  }

  // A rank that got in sends its bye, so the file says complete.
  static void SayBye(Transport& t) {
    Bytes bye;
    wire::AppendBye(bye, wire::Bye{{{"events_recorded", 0}}});
    EXPECT_TRUE(t.Send(bye).ok());
  }
};

TEST_F(PreauthTest, EveryConnectionGetsAFreshThirtyTwoByteChallengeFirst) {
  Start();
  Client a(port()), b(port());
  ASSERT_TRUE(a.challenge().has_value());
  ASSERT_TRUE(b.challenge().has_value());
  EXPECT_NE(*a.challenge(), *b.challenge()) << "two connections got the same nonce";
  EXPECT_NE(*a.challenge(), wire::Nonce{}) << "an all-zero nonce";
}

TEST_F(PreauthTest, SixteenMebibyteHeaderOfAnyTypeBeforeTheHelloIsDroppedWithoutAllocating) {
  Start();
  const wire::FrameType types[] = {wire::FrameType::kHello, wire::FrameType::kEvents, wire::FrameType::kStrings,
                                   wire::FrameType::kBye};
  uint64_t large_before = commprof_test::LargeAllocationCount();
  uint32_t n = 0;
  for (auto type : types) {
    SCOPED_TRACE(wire::FrameTypeName(type));
    Client c(port());
    ASSERT_TRUE(c.challenge().has_value());
    // A valid header as far as DecodeHeader goes (exactly the 16 MiB limit), then silence: today's
    // reader would allocate and zero-fill the payload and wait for it.
    ASSERT_TRUE(c.Send(RawHeader(type, wire::kMaxPayload)));
    EXPECT_TRUE(c.WaitClosedByPeerWithoutAnswer()) << "the connection stays open (or is answered)";
    ++n;
    ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == n; }));
  }
  EXPECT_EQ(commprof_test::LargeAllocationCount(), large_before) << "the server allocated an announced payload";
  EXPECT_EQ(stats().refused.load(), 0u);
  EXPECT_EQ(stats().accepted.load(), 0u);
  EXPECT_TRUE(WaitFor([&] { return stats().pending.load() == 0; }));
}

TEST_F(PreauthTest, HelloOneByteLongerThanTheLongestValidHelloIsDroppedUnread) {
  Start();
  Client c(port());
  ASSERT_TRUE(c.challenge().has_value());
  ASSERT_TRUE(c.Send(RawHeader(wire::FrameType::kHello, static_cast<uint32_t>(wire::kMaxHelloPayload + 1))));
  EXPECT_TRUE(c.WaitClosedByPeerWithoutAnswer()) << "dropped before its payload, with no hello-ack";
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1; }));
  EXPECT_EQ(stats().refused.load(), 0u);
}

TEST_F(PreauthTest, HelloOfExactlyTheLongestValidLengthIsAccepted) {
  // The bound is not too tight: a hello with the longest host and job id fits it exactly.
  const std::string long_job(wire::kMaxStringLen, 'j');
  Start(ServerLimits{}, StreamPolicy{kSecret, long_job});
  Client c(port());
  ASSERT_TRUE(c.challenge().has_value());
  wire::Hello h = MakeHello(1, 2, long_job);
  h.host = std::string(wire::kMaxStringLen, 'h');
  h.incarnation = 1;  // the longest hello carries an incarnation (an elastic restart's worker)
  Bytes frame;
  wire::AppendHello(frame, h, kSecret, *c.challenge());
  ASSERT_EQ(frame.size() - wire::kHeaderSize, wire::kMaxHelloPayload);
  ASSERT_TRUE(c.Send(frame));
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted) << ack->reason;
  EXPECT_EQ(stats().accepted.load(), 1u);
}

// Relays (docs/scale.md#relays) introduce themselves with a relay-hello, held to the same rules as a
// hello: bounded before it is read, proven over this connection's challenge, of this job.
TEST_F(PreauthTest, RelayHelloIsBoundedProvenAndOfThisJob) {
  Start();
  {
    Client c(port());
    ASSERT_TRUE(c.challenge().has_value());
    ASSERT_TRUE(
        c.Send(RawHeader(wire::FrameType::kRelayHello, static_cast<uint32_t>(wire::kMaxRelayHelloPayload + 1))));
    EXPECT_TRUE(c.WaitClosedByPeerWithoutAnswer()) << "dropped before its payload, with no answer";
    ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1; }));
  }
  auto refused = [&](const std::string& secret, const std::string& job, const char* why) {
    Client c(port());
    EXPECT_TRUE(c.challenge().has_value());
    Bytes frame;
    wire::AppendRelayHello(frame, wire::RelayHello{job, "node1", 42, "/tmp/x.h5", {}}, secret, *c.challenge());
    EXPECT_TRUE(c.Send(frame));
    auto ack = c.ReadAck();
    ASSERT_TRUE(ack.has_value());
    EXPECT_FALSE(ack->accepted);
    EXPECT_NE(ack->reason.find(why), std::string::npos) << ack->reason;
  };
  refused("wrong", kJob, "proof");
  refused(kSecret, "other-job", "other-job");
  EXPECT_EQ(stats().relays.load(), 0u);
  Client c(port());
  ASSERT_TRUE(c.challenge().has_value());
  Bytes frame;
  wire::AppendRelayHello(frame, wire::RelayHello{kJob, "node1", 42, "/tmp/x.h5", {}}, kSecret, *c.challenge());
  ASSERT_TRUE(c.Send(frame));
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted) << ack->reason;
  ASSERT_TRUE(WaitFor([&] { return stats().relays.load() == 1; }));
  EXPECT_EQ(stats().accepted.load(), 0u) << "a relay is not a rank";
}

TEST_F(PreauthTest, ConnectionWithoutAHelloIsClosedAtTheDeadline) {
  ServerLimits limits;
  limits.hello_timeout_ms = 300;
  Start(limits);
  auto t0 = std::chrono::steady_clock::now();
  Client c(port());
  ASSERT_TRUE(c.challenge().has_value());
  EXPECT_TRUE(c.WaitClosedByPeerWithoutAnswer()) << "not closed within the client's 5 s receive timeout";
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(300)) << "closed before its deadline";
  // Drop counts first, then closes: wait for both.
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1 && stats().connections.load() == 0; }));
  EXPECT_EQ(stats().pending.load(), 0u);
}

TEST_F(PreauthTest, CapturedTcpHelloReplayedOnAnotherConnectionIsRefusedAndTheRealRankThenConnects) {
  Start();
  Client real(port());
  Bytes captured = SignedHello(real, 0);  // what a listener on the wire would see

  Client replay(port());
  ASSERT_TRUE(replay.challenge().has_value());
  ASSERT_TRUE(replay.Send(captured));
  auto ack = replay.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->accepted);
  EXPECT_NE(ack->reason.find("wrong HMAC proof"), std::string::npos) << ack->reason;
  EXPECT_NE(ack->reason.find("challenge"), std::string::npos) << ack->reason;
  EXPECT_TRUE(replay.WaitClosedByPeer());
  EXPECT_EQ(stats().refused.load(), 1u);

  ASSERT_TRUE(real.Send(captured));
  auto real_ack = real.ReadAck();
  ASSERT_TRUE(real_ack.has_value());
  EXPECT_TRUE(real_ack->accepted) << "the replay claimed the rank: " << real_ack->reason;
  EXPECT_EQ(stats().accepted.load(), 1u);

  // And once more after the real rank is in: refused for the proof, not merely as a duplicate.
  Client again(port());
  ASSERT_TRUE(again.Send(captured));
  auto again_ack = again.ReadAck();
  ASSERT_TRUE(again_ack.has_value());
  EXPECT_FALSE(again_ack->accepted);
  EXPECT_NE(again_ack->reason.find("wrong HMAC proof"), std::string::npos) << again_ack->reason;

  Bytes bye;
  wire::AppendBye(bye, wire::Bye{{{"events_recorded", 0}}});
  ASSERT_TRUE(real.Send(bye));
  ASSERT_TRUE(WaitFor([&] { return stats().byes.load() == 1; }));
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().ranks.at(0).status, "complete");
  EXPECT_EQ(r->info().ranks.at(0).pid, 7000u);
}

TEST_F(PreauthTest, SpoolFilesHelloReplayedOverTcpIsRefusedAsReplayedAndTheCollectorThenConnects) {
  Start();
  Bytes spool_hello;  // exactly what OpenSpool writes first: the nonce-less proof
  wire::AppendHello(spool_hello, MakeHello(1), kSecret);
  Client replay(port());
  ASSERT_TRUE(replay.challenge().has_value());
  ASSERT_TRUE(replay.Send(spool_hello));
  auto ack = replay.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->accepted);
  EXPECT_NE(ack->reason.find("replayed"), std::string::npos) << ack->reason;
  EXPECT_NE(ack->reason.find("spool"), std::string::npos) << ack->reason;
  EXPECT_EQ(stats().refused.load(), 1u);

  auto t = Collector(1);
  ASSERT_TRUE(t.ok()) << t.status().message();
  SayBye(*t.value());
  ASSERT_TRUE(WaitFor([&] { return stats().byes.load() == 1; }));
  EXPECT_EQ(stats().accepted.load(), 1u);
}

TEST_F(PreauthTest, CollectorWithTheRightSecretConnectsAndWithAWrongOneIsRefused) {
  Start();
  auto wrong = Collector(0, "not-the-secret");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(wrong.status().message().find("wrong HMAC proof"), std::string::npos) << wrong.status().message();
  auto right = Collector(0);
  ASSERT_TRUE(right.ok()) << right.status().message();
  SayBye(*right.value());
  ASSERT_TRUE(WaitFor([&] { return stats().byes.load() == 1; }));
  EXPECT_EQ(stats().refused.load(), 1u);
  EXPECT_EQ(stats().accepted.load(), 1u);
}

TEST_F(PreauthTest, CollectorFacingAnAggregatorThatSendsNoChallengeSaysSo) {
  // A listener that accepts and sends a hello-ack straight away (not a challenge).
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acc(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  std::thread peer([&] {
    auto s = acc.accept();
    Bytes ack;
    wire::AppendHelloAck(ack, wire::HelloAck{true, ""});
    boost::asio::write(s, boost::asio::buffer(ack));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  Bytes hello;
  wire::AppendHello(hello, MakeHello(0), kSecret);
  auto t = ConnectToAggregator("127.0.0.1:" + std::to_string(acc.local_endpoint().port()), hello, kSecret, 2000);
  peer.join();
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("not a challenge"), std::string::npos) << t.status().message();
}

TEST_F(PreauthTest, AtThePendingCapANewConnectionIsClosedAtOnceWhileTheWaitingOnesAreYoung) {
  ServerLimits limits;
  limits.max_pending = 4;
  limits.evict_after_ms = 60000;
  Start(limits);
  std::vector<std::unique_ptr<Client>> silent;
  for (int i = 0; i < 4; ++i) {
    silent.push_back(std::make_unique<Client>(port()));
    ASSERT_TRUE(silent.back()->challenge().has_value()) << i;
  }
  ASSERT_TRUE(WaitFor([&] { return stats().pending.load() == 4; }));
  Client fifth(port());
  EXPECT_FALSE(fifth.challenge().has_value()) << "a fifth pending connection was admitted";
  EXPECT_TRUE(fifth.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().capped.load() == 1; }));
  EXPECT_EQ(stats().pending.load(), 4u);
  // A waiting connection that authenticates frees its place.
  ASSERT_TRUE(silent[0]->Send(SignedHello(*silent[0], 0)));
  auto ack = silent[0]->ReadAck();
  ASSERT_TRUE(ack.has_value() && ack->accepted);
  ASSERT_TRUE(WaitFor([&] { return stats().pending.load() == 3; }));
  Client sixth(port());
  EXPECT_TRUE(sixth.challenge().has_value());
}

TEST_F(PreauthTest, AtThePendingCapTheOldestWaitingConnectionGivesWayOnceOldEnough) {
  ServerLimits limits;
  limits.max_pending = 3;
  limits.evict_after_ms = 0;
  Start(limits);
  std::vector<std::unique_ptr<Client>> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(std::make_unique<Client>(port()));
  ASSERT_TRUE(WaitFor([&] { return stats().pending.load() == 3; }));
  Client newcomer(port());
  ASSERT_TRUE(newcomer.challenge().has_value()) << "the newcomer was not admitted";
  EXPECT_TRUE(silent[0]->WaitClosedByPeerWithoutAnswer()) << "the oldest waiting connection was not evicted";
  ASSERT_TRUE(WaitFor([&] { return stats().evicted.load() == 1 && stats().pending.load() == 3; }))
      << "evicted " << stats().evicted.load() << " pending " << stats().pending.load();
  ASSERT_TRUE(newcomer.Send(SignedHello(newcomer, 1)));
  auto ack = newcomer.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->accepted) << ack->reason;
}

TEST_F(PreauthTest, BeyondTheConnectionCapNewConnectionsAreClosedAtOnce) {
  ServerLimits limits;
  limits.max_connections = 2;
  Start(limits);
  Client a(port());
  ASSERT_TRUE(a.Send(SignedHello(a, 0)));
  ASSERT_TRUE(a.ReadAck().has_value());
  Client b(port());
  ASSERT_TRUE(b.challenge().has_value());
  Client c(port());
  EXPECT_FALSE(c.challenge().has_value());
  EXPECT_TRUE(c.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().capped.load() == 1; }));
  EXPECT_EQ(stats().connections.load(), 2u);
  EXPECT_EQ(stats().open.load(), 1u) << "open counts the authenticated sessions only";
}

TEST_F(PreauthTest, CollectorClosedAtTheCapRetriesWithinItsTimeoutAndGetsIn) {
  ServerLimits limits;
  limits.max_pending = 1;
  limits.evict_after_ms = 60000;
  Start(limits);
  auto blocker = std::make_unique<Client>(port());
  ASSERT_TRUE(blocker->challenge().has_value());
  ASSERT_TRUE(WaitFor([&] { return stats().pending.load() == 1; }));
  std::atomic<bool> done{false};
  Result<std::unique_ptr<Transport>> result = Unavailable("not run");
  std::thread collector([&] {
    result = Collector(0, kSecret, 10000);
    done = true;
  });
  // The collector is turned away at least once while the blocker holds the only place ...
  ASSERT_TRUE(WaitFor([&] { return stats().capped.load() >= 1; }));
  EXPECT_FALSE(done.load());
  blocker.reset();  // ... which frees up
  collector.join();
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(stats().accepted.load(), 1u);
  SayBye(*result.value());
  ASSERT_TRUE(WaitFor([&] { return stats().byes.load() == 1; }));
}

TEST_F(PreauthTest, ThreeHundredSilentOrBogusPeersKeepMemoryBoundedAndARealRankStillGetsInPromptly) {
  Start();  // the production limits
  const uint64_t rss_before = RssBytes();
  ASSERT_GT(rss_before, 0u);
  std::vector<std::unique_ptr<Client>> peers;
  for (int i = 0; i < 300; ++i) {
    peers.push_back(std::make_unique<Client>(port(), /*read_challenge=*/false));
    ASSERT_TRUE(peers.back()->connected()) << i;
    if (i % 2 == 1) {
      // Half announce a 16 MiB frame and stop there.
      ASSERT_TRUE(peers.back()->Send(RawHeader(wire::FrameType::kEvents, wire::kMaxPayload)));
    }
  }
  // Every peer has been dealt with: admitted and waiting, dropped, or closed at the cap.
  ASSERT_TRUE(WaitFor([&] { return stats().pending.load() + stats().dropped.load() + stats().capped.load() >= 300; }))
      << "pending " << stats().pending.load() << " dropped " << stats().dropped.load() << " capped "
      << stats().capped.load();
  EXPECT_LE(stats().pending.load(), ServerLimits{}.max_pending);
  EXPECT_GE(stats().dropped.load(), 1u);
  const uint64_t growth = RssBytes() - std::min(RssBytes(), rss_before);
  // 300 connections at a few KiB each (both ends are in this process); one 16 MiB payload buffer
  // alone would exceed this, and today's reader grew by 150 of them.
  EXPECT_LT(growth, uint64_t{16} << 20) << "RSS grew by " << growth << " bytes";

  // A real rank still gets in, well before the silent peers' hello deadline would free room:
  // the oldest waiting peer gives way to it (or to its retry).
  auto t0 = std::chrono::steady_clock::now();
  auto t = Collector(0, kSecret, 8000);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_LT(took, std::chrono::milliseconds(ServerLimits{}.hello_timeout_ms))
      << "the real rank waited for the silent peers' deadline";
  SayBye(*t.value());
  ASSERT_TRUE(WaitFor([&] { return stats().byes.load() == 1; }));
}

}  // namespace
}  // namespace commprof
