// The aggregator's TCP server against hand-made clients on real sockets: whatever a peer sends,
// only that peer's connection suffers, and what was accepted is stored.
#include "aggregator/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "core/wire.h"
#include "support/live_aggregator.h"
#include "support/test_support.h"

namespace commprof_test {
uint64_t LargeAllocationCount();
}

namespace commprof {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr const char* kSecret = "server-secret";
constexpr const char* kJob = "job-srv";

using test_support::ReadEvents;
using test_support::TempDir;
using test_support::WaitFor;
using Client = test_support::TcpClient;

// A hello signed over the client's challenge, as a collector signs it.
Bytes HelloFrame(const Client& c, uint32_t rank, const std::string& secret, const std::string& job = kJob,
                 uint32_t world = 1, uint32_t pid = 0) {
  EXPECT_TRUE(c.challenge().has_value()) << "the server sent no challenge";
  wire::Hello h;
  h.rank = rank;
  h.world_size = world;
  h.pid = pid != 0 ? pid : 1000 + rank;
  h.host = "client-host";
  h.job_id = job;
  h.start_steady_ns = 5;
  h.start_utc_ns = 6;
  Bytes out;
  wire::AppendHello(out, h, secret, c.challenge().value_or(wire::Nonce{}));
  return out;
}

std::vector<commprof_event> MakeEvents(size_t n, uint64_t base) {
  std::vector<commprof_event> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i].kind = COMMPROF_KIND_MPI_P2P;
    v[i].subtype = COMMPROF_OP_SEND;
    v[i].start_ns = 100 * (base + i);
    v[i].end_ns = 100 * (base + i) + 50;
    v[i].seq = base + i;
    v[i].bytes = 1024 * (i + 1);
    v[i].peer = static_cast<int32_t>(i % 4);
    v[i].name_id = 1;
  }
  return v;
}

Bytes EventsFrame(uint64_t batch, const std::vector<commprof_event>& ev) {
  Bytes out;
  wire::AppendEvents(out, batch, ev.data(), ev.size());
  return out;
}

Bytes StringsFrame() {
  std::vector<std::string_view> s = {"<overflow>", "MPI_Send"};
  Bytes out;
  wire::AppendStrings(out, 0, s);
  return out;
}

Bytes ByeFrame(uint64_t recorded) {
  wire::Bye b;
  b.counters = {{"events_recorded", recorded}, {"dropped_ring_full", 0}};
  Bytes out;
  wire::AppendBye(out, b);
  return out;
}

Bytes RawHeader(uint16_t type, uint32_t len) {
  Bytes b;
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(wire::kMagic >> (8 * i)));
  b.push_back(static_cast<uint8_t>(wire::kVersion));
  b.push_back(0);
  b.push_back(static_cast<uint8_t>(type));
  b.push_back(static_cast<uint8_t>(type >> 8));
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(len >> (8 * i)));
  for (int i = 0; i < 4; ++i) b.push_back(0);
  return b;
}

class ServerTest : public test_support::LiveAggregatorTest {
 protected:
  ServerTest() : LiveAggregatorTest("commprof-srv") {}

  void SetUp() override { Start(1); }

  void Start(uint32_t world) {
    ASSERT_FALSE(dir_.path().empty());
    agg_.Start(dir_ / "out.h5", StreamPolicy{kSecret, kJob}, world);
    if (!agg_.ok()) return;
    ASSERT_NE(agg_.port(), 0);
  }

  std::vector<commprof_event> Events(const ProfileReader& r, uint32_t rank) { return ReadEvents(r, rank); }

  // A well-behaved rank: hello, strings, events, bye.
  void RunGoodClient(uint32_t rank, size_t n_events) {
    Client c(port());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Send(HelloFrame(c, rank, kSecret)));
    auto ack = c.ReadAck();
    ASSERT_TRUE(ack.has_value());
    EXPECT_TRUE(ack->accepted) << ack->reason;
    ASSERT_TRUE(c.Send(StringsFrame()));
    ASSERT_TRUE(c.Send(EventsFrame(0, MakeEvents(n_events, 0))));
    ASSERT_TRUE(c.Send(ByeFrame(n_events)));
    EXPECT_TRUE(c.WaitClosedByPeer()) << "the server closes the connection after the bye";
  }
};

TEST_F(ServerTest, GarbageBytesDropTheConnectionAndTheServerKeepsServing) {
  {
    Client bad(port());
    ASSERT_TRUE(bad.connected());
    std::string junk = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    ASSERT_TRUE(bad.Send(Bytes(junk.begin(), junk.end())));
    EXPECT_TRUE(bad.WaitClosedByPeer());
  }
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1; }));
  EXPECT_EQ(stats().accepted.load(), 0u);

  RunGoodClient(0, 3);
  ASSERT_TRUE(WaitFor([&] { return stats().ended.load() == 1; }));
  EXPECT_EQ(stats().accepted.load(), 1u);
  EXPECT_EQ(stats().byes.load(), 1u);
  EXPECT_EQ(stats().dropped.load(), 1u);
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "complete");
  EXPECT_EQ(r->info().ranks[0].event_count, 3u);
  EXPECT_EQ(r->info().ranks[0].counters.at("events_recorded"), 3u);
}

TEST_F(ServerTest, HeaderAnnouncingMoreThanSixteenMebibytesIsDroppedWithoutAllocating) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(HelloFrame(c, 0, kSecret)));
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  ASSERT_TRUE(ack->accepted) << ack->reason;
  ASSERT_TRUE(c.Send(EventsFrame(0, MakeEvents(2, 0))));
  uint64_t large_before = commprof_test::LargeAllocationCount();
  ASSERT_TRUE(c.Send(RawHeader(static_cast<uint16_t>(wire::FrameType::kEvents), wire::kMaxPayload + 1)));
  EXPECT_TRUE(c.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1 && stats().ended.load() == 1; }));
  EXPECT_EQ(commprof_test::LargeAllocationCount(), large_before) << "the server allocated the announced payload";
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "corrupt") << "a stream dropped at a bad frame is corrupt";
  EXPECT_NE(r->info().ranks[0].end_reason.find("exceeds the limit"), std::string::npos)
      << r->info().ranks[0].end_reason;
  EXPECT_EQ(r->info().ranks[0].event_count, 2u) << "events before the bad frame are kept";
}

TEST_F(ServerTest, MaximalLengthHeaderBeforeHelloIsDroppedWithoutAllocating) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  uint64_t large_before = commprof_test::LargeAllocationCount();
  ASSERT_TRUE(c.Send(RawHeader(static_cast<uint16_t>(wire::FrameType::kHello), 0xFFFFFFFFu)));
  EXPECT_TRUE(c.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1; }));
  EXPECT_EQ(commprof_test::LargeAllocationCount(), large_before);
  EXPECT_EQ(stats().refused.load(), 0u);
}

TEST_F(ServerTest, EventsFrameBeforeHelloIsDropped) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(EventsFrame(0, MakeEvents(4, 0))));
  EXPECT_TRUE(c.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1; }));
  EXPECT_EQ(stats().accepted.load(), 0u);
  EXPECT_EQ(stats().refused.load(), 0u);
  EXPECT_EQ(stats().ended.load(), 0u);
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "missing");
  EXPECT_TRUE(Events(*r, 0).empty());
}

TEST_F(ServerTest, DuplicateRankIsRefusedWhileTheFirstStreamContinues) {
  Client first(port());
  ASSERT_TRUE(first.connected());
  ASSERT_TRUE(first.Send(HelloFrame(first, 0, kSecret)));
  auto ack1 = first.ReadAck();
  ASSERT_TRUE(ack1.has_value());
  ASSERT_TRUE(ack1->accepted) << ack1->reason;

  // Another process (pid 4242) claiming the same rank.
  Client second(port());
  ASSERT_TRUE(second.connected());
  ASSERT_TRUE(second.Send(HelloFrame(second, 0, kSecret, kJob, 1, 4242)));
  auto ack2 = second.ReadAck();
  ASSERT_TRUE(ack2.has_value()) << "a refused peer still gets a hello-ack";
  EXPECT_FALSE(ack2->accepted);
  EXPECT_NE(ack2->reason.find("already connected"), std::string::npos) << ack2->reason;
  EXPECT_TRUE(second.WaitClosedByPeer());
  EXPECT_EQ(stats().refused.load(), 1u);

  ASSERT_TRUE(first.Send(EventsFrame(0, MakeEvents(6, 0))));
  ASSERT_TRUE(first.Send(ByeFrame(6)));
  EXPECT_TRUE(first.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().ended.load() == 1; }));
  EXPECT_EQ(stats().accepted.load(), 1u);
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "complete");
  EXPECT_EQ(r->info().ranks[0].pid, 1000u);
  EXPECT_EQ(r->info().ranks[0].event_count, 6u);
}

TEST_F(ServerTest, HelloWithBadHmacIsRefusedWithANegativeAck) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(HelloFrame(c, 0, "guessed-secret")));
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->accepted);
  EXPECT_NE(ack->reason.find("HMAC"), std::string::npos) << ack->reason;
  EXPECT_TRUE(c.WaitClosedByPeer());
  EXPECT_EQ(stats().refused.load(), 1u);
  EXPECT_EQ(stats().accepted.load(), 0u);
  // the rank is still free for the real collector
  RunGoodClient(0, 1);
  ASSERT_TRUE(WaitFor([&] { return stats().ended.load() == 1; }));
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "complete");
  EXPECT_EQ(r->info().ranks[0].event_count, 1u);
}

TEST_F(ServerTest, HelloForAnotherJobIsRefused) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(HelloFrame(c, 0, kSecret, "some-other-job")));
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->accepted);
  EXPECT_NE(ack->reason.find("some-other-job"), std::string::npos) << ack->reason;
  EXPECT_EQ(stats().refused.load(), 1u);
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "missing");
}

TEST_F(ServerTest, MalformedHelloIsRefused) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(HelloFrame(c, 5, kSecret, kJob, 2)));  // rank outside its world
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->accepted);
  EXPECT_NE(ack->reason.find("outside world size"), std::string::npos) << ack->reason;
  EXPECT_EQ(stats().refused.load(), 1u);
}

TEST_F(ServerTest, SecondHelloOnAnAcceptedStreamDropsIt) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(HelloFrame(c, 0, kSecret, kJob, 2)));
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  ASSERT_TRUE(ack->accepted);
  ASSERT_TRUE(c.Send(HelloFrame(c, 1, kSecret, kJob, 2)));
  EXPECT_TRUE(c.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1 && stats().ended.load() == 1; }));
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 2u);  // world 2 from the hello
  EXPECT_EQ(r->info().ranks[0].status, "corrupt") << "a stream dropped at a bad frame is corrupt";
  EXPECT_NE(r->info().ranks[0].end_reason.find("second hello"), std::string::npos) << r->info().ranks[0].end_reason;
  EXPECT_EQ(r->info().ranks[1].status, "missing");
}

TEST_F(ServerTest, ClientClosingWithoutByeLeavesADisconnectedRankWithItsEvents) {
  auto sent = MakeEvents(5, 40);
  {
    Client c(port());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Send(HelloFrame(c, 0, kSecret)));
    auto ack = c.ReadAck();
    ASSERT_TRUE(ack.has_value());
    ASSERT_TRUE(ack->accepted);
    ASSERT_TRUE(c.Send(StringsFrame()));
    ASSERT_TRUE(c.Send(EventsFrame(0, sent)));
  }  // closed without a bye
  ASSERT_TRUE(WaitFor([&] { return stats().ended.load() == 1; }));
  EXPECT_EQ(stats().byes.load(), 0u);
  EXPECT_EQ(stats().dropped.load(), 0u);
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  const RankInfo& rank = r->info().ranks[0];
  EXPECT_EQ(rank.status, "disconnected");
  EXPECT_EQ(rank.end_reason, "connection closed");
  EXPECT_EQ(rank.host, "client-host");
  EXPECT_EQ(rank.event_count, sent.size());
  EXPECT_EQ(rank.counters.at("events_written"), sent.size());
  EXPECT_EQ(rank.counters.count("events_recorded"), 0u) << "no bye, so no collector counters";
  auto got = Events(*r, 0);
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(got[i].seq, sent[i].seq);
    EXPECT_EQ(got[i].start_ns, sent[i].start_ns);
    EXPECT_EQ(got[i].end_ns, sent[i].end_ns);
    EXPECT_EQ(got[i].bytes, sent[i].bytes);
    EXPECT_EQ(got[i].peer, sent[i].peer);
    EXPECT_EQ(got[i].kind, sent[i].kind);
    EXPECT_EQ(got[i].subtype, sent[i].subtype);
  }
  auto strings = r->Strings(0);
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ(strings.value(), (std::vector<std::string>{"<overflow>", "MPI_Send"}));
}

TEST_F(ServerTest, BatchSequenceGapsAreCountedAsLostBatches) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(HelloFrame(c, 0, kSecret)));
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  ASSERT_TRUE(ack->accepted);
  ASSERT_TRUE(c.Send(EventsFrame(0, MakeEvents(1, 0))));
  ASSERT_TRUE(c.Send(EventsFrame(3, MakeEvents(1, 1))));  // batches 1 and 2 never arrived
  ASSERT_TRUE(c.Send(ByeFrame(2)));
  EXPECT_TRUE(c.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().ended.load() == 1; }));
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().ranks[0].status, "complete");
  EXPECT_EQ(r->info().ranks[0].counters.at("batches_lost"), 2u);
}

TEST_F(ServerTest, EventsBatchGoingBackIsDropped) {
  Client c(port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(HelloFrame(c, 0, kSecret)));
  auto ack = c.ReadAck();
  ASSERT_TRUE(ack.has_value());
  ASSERT_TRUE(c.Send(EventsFrame(4, MakeEvents(1, 0))));
  ASSERT_TRUE(c.Send(EventsFrame(4, MakeEvents(1, 1))));  // repeats
  EXPECT_TRUE(c.WaitClosedByPeer());
  ASSERT_TRUE(WaitFor([&] { return stats().dropped.load() == 1 && stats().ended.load() == 1; }));
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().ranks[0].status, "corrupt") << "a stream dropped at a bad frame is corrupt";
  EXPECT_EQ(r->info().ranks[0].event_count, 1u);
  EXPECT_NE(r->info().ranks[0].end_reason.find("repeats or goes back"), std::string::npos);
}

TEST(ServerListen, RejectsAHostThatIsNotAnIpAddress) {
  TempDir dir("commprof-srv");
  ASSERT_FALSE(dir.path().empty());
  auto in = Ingest::Start(dir / "x.h5", JobMeta{}, WriterOptions{}, 50);
  ASSERT_TRUE(in.ok());
  boost::asio::io_context io;
  auto s = Server::Listen(io, *in.value(), StreamPolicy{}, "not-an-ip", 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("not-an-ip"), std::string::npos);
}

}  // namespace
}  // namespace commprof

namespace commprof {
namespace {

// The same process again (its collector gave up waiting for the hello-ack, or lost the connection
// and reconnected): it resumes its rank. Batches already stored are skipped when resent, strings
// already stored are not stored twice, and nothing is counted lost.
TEST_F(ServerTest, SameProcessReconnectingResumesItsRankWithoutDuplicates) {
  Client first(port());
  ASSERT_TRUE(first.connected());
  ASSERT_TRUE(first.Send(HelloFrame(first, 0, kSecret)));
  auto ack1 = first.ReadAck();
  ASSERT_TRUE(ack1.has_value() && ack1->accepted);
  Bytes strings;
  std::vector<std::string_view> names = {"", "<overflow>", "MPI_Bcast"};
  wire::AppendStrings(strings, 0, names);
  ASSERT_TRUE(first.Send(strings));
  ASSERT_TRUE(first.Send(EventsFrame(0, MakeEvents(4, 0))));
  ASSERT_TRUE(first.Send(EventsFrame(1, MakeEvents(4, 4))));
  first.Close();  // lost without a bye
  ASSERT_TRUE(WaitFor([&] { return stats().ended.load() == 1; }));

  Client again(port());
  ASSERT_TRUE(again.connected());
  ASSERT_TRUE(again.Send(HelloFrame(again, 0, kSecret)));
  auto ack2 = again.ReadAck();
  ASSERT_TRUE(ack2.has_value());
  ASSERT_TRUE(ack2->accepted) << ack2->reason;
  // The collector resends the whole string table and batch 1, which it never saw acknowledged.
  ASSERT_TRUE(again.Send(strings));
  ASSERT_TRUE(again.Send(EventsFrame(1, MakeEvents(4, 4))));
  ASSERT_TRUE(again.Send(EventsFrame(2, MakeEvents(3, 8))));
  ASSERT_TRUE(again.Send(ByeFrame(11)));
  EXPECT_TRUE(again.WaitClosedByPeer());
  EXPECT_EQ(stats().refused.load(), 0u);
  auto r = StopAndRead();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->info().ranks.size(), 1u);
  EXPECT_EQ(r->info().ranks[0].status, "complete");
  EXPECT_EQ(r->info().ranks[0].event_count, 11u) << "batch 1 stored once";
  auto stored = r->Strings(0);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->size(), 3u) << "the resent string table is not stored twice";
}

}  // namespace
}  // namespace commprof
