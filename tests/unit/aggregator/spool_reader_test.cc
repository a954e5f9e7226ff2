// Spool files through IngestSpoolFile, and the RankStream rules shared with live connections.
#include "aggregator/spool_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "support/test_support.h"

namespace commprof {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

using test_support::PayloadSpan;
using test_support::TempDir;

wire::Hello MakeHello(uint32_t rank, const std::string& job = "job-sp", uint32_t pid = 0) {
  wire::Hello h;
  h.rank = rank;
  h.world_size = 2;
  h.pid = pid != 0 ? pid : 77;
  h.host = "spool-host";
  h.job_id = job;
  return h;
}

std::vector<commprof_event> MakeEvents(size_t n, uint64_t base) {
  std::vector<commprof_event> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i].kind = COMMPROF_KIND_MPI_COLLECTIVE;
    v[i].seq = base + i;
    v[i].start_ns = base + i;
    v[i].end_ns = base + i + 1;
  }
  return v;
}

void WriteFile(const std::string& path, const Bytes& b) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!b.empty()) {  // fwrite of no bytes from an empty vector's null data() is undefined
    ASSERT_EQ(std::fwrite(b.data(), 1, b.size(), f), b.size());
  }
  std::fclose(f);
}

// hello, strings, events(3), events(2), clock, bye
Bytes CompleteSpool(uint32_t rank, const std::string& secret, size_t* events_end = nullptr) {
  Bytes b;
  wire::AppendHello(b, MakeHello(rank), secret);
  std::vector<std::string_view> names = {"<overflow>", "MPI_Bcast"};
  wire::AppendStrings(b, 0, names);
  auto e1 = MakeEvents(3, 0);
  auto e2 = MakeEvents(2, 3);
  wire::AppendEvents(b, 0, e1.data(), e1.size());
  wire::AppendEvents(b, 1, e2.data(), e2.size());
  if (events_end != nullptr) *events_end = b.size();
  wire::Clock c;
  c.method = "none";
  wire::AppendClock(b, c);
  wire::Bye bye;
  bye.counters = {{"events_recorded", 5}, {"spooled", 1}};
  wire::AppendBye(b, bye);
  return b;
}

class SpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    JobMeta meta;
    meta.job_id = "job-sp";
    meta.world_size = 2;
    auto in = Ingest::Start(dir_ / "out.h5", meta, WriterOptions{}, 50);
    ASSERT_TRUE(in.ok()) << in.status().message();
    ingest_ = std::move(in.value());
  }

  std::unique_ptr<ProfileReader> FinishAndRead() {
    Status st = ingest_->Finish();
    EXPECT_TRUE(st.ok()) << st.message();
    auto r = ProfileReader::Open(dir_ / "out.h5");
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r.value()) : nullptr;
  }

  TempDir dir_{"commprof-sp"};
  std::unique_ptr<Ingest> ingest_;
};

TEST_F(SpoolTest, CompleteSpoolBecomesACompleteRank) {
  std::string path = dir_ / "r0.cpspool";
  WriteFile(path, CompleteSpool(0, "s"));
  SpoolResult res = IngestSpoolFile(*ingest_, path, StreamPolicy{std::string("s"), "job-sp"});
  EXPECT_TRUE(res.status.ok()) << res.status.message();
  EXPECT_TRUE(res.accepted);
  EXPECT_EQ(res.rank, 0u);
  EXPECT_EQ(res.job_id, "job-sp");
  EXPECT_EQ(ingest_->ranks_claimed(), std::vector<uint32_t>{0});
  auto r = FinishAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(ingest_->events_written(), 5u);
  ASSERT_EQ(r->info().ranks.size(), 2u);
  EXPECT_EQ(r->info().ranks[0].status, "complete");
  EXPECT_EQ(r->info().ranks[0].end_reason, "bye");
  EXPECT_EQ(r->info().ranks[0].event_count, 5u);
  EXPECT_EQ(r->info().ranks[0].counters.at("spooled"), 1u);
  EXPECT_EQ(r->info().ranks[1].status, "missing");
}

TEST_F(SpoolTest, TruncatedSpoolKeepsTheWholeFramesAndNamesTheOffset) {
  std::string path = dir_ / "r1.cpspool";
  size_t events_end = 0;
  Bytes b = CompleteSpool(1, "s", &events_end);
  b.resize(events_end + 7);  // a torn clock frame header
  WriteFile(path, b);
  SpoolResult res = IngestSpoolFile(*ingest_, path, StreamPolicy{std::nullopt, ""});
  EXPECT_TRUE(res.accepted);
  ASSERT_FALSE(res.status.ok());
  EXPECT_EQ(res.status.code(), StatusCode::kIoError) << "a torn spool is an I/O-level end, not corruption";
  EXPECT_NE(res.status.message().find(path), std::string::npos) << res.status.message();
  EXPECT_NE(res.status.message().find("at byte " + std::to_string(events_end)), std::string::npos)
      << res.status.message();
  auto r = FinishAndRead();
  ASSERT_NE(r, nullptr);
  const RankInfo& k = r->info().ranks.at(1);
  EXPECT_EQ(k.status, "disconnected");
  EXPECT_EQ(k.event_count, 5u);
  EXPECT_EQ(k.end_reason, res.status.message());
}

TEST_F(SpoolTest, SpoolWithAnInvalidFrameEndsAsCorruptKeepingEarlierEvents) {
  std::string path = dir_ / "bad.cpspool";
  size_t events_end = 0;
  Bytes b = CompleteSpool(0, "s", &events_end);
  b.resize(events_end);
  auto bad = MakeEvents(2, 10);
  bad[1].kind = COMMPROF_KIND_NONE;
  wire::AppendEvents(b, 2, bad.data(), bad.size());
  WriteFile(path, b);
  SpoolResult res = IngestSpoolFile(*ingest_, path, StreamPolicy{});
  EXPECT_TRUE(res.accepted);
  ASSERT_FALSE(res.status.ok());
  EXPECT_EQ(res.status.code(), StatusCode::kCorrupt);
  EXPECT_NE(res.status.message().find("events frame at byte " + std::to_string(events_end)), std::string::npos)
      << res.status.message();
  EXPECT_NE(res.status.message().find("event 1"), std::string::npos) << res.status.message();
  auto r = FinishAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().ranks.at(0).status, "corrupt");
  EXPECT_EQ(r->info().ranks.at(0).event_count, 5u) << "the bad batch is not stored, the earlier ones are";
}

TEST_F(SpoolTest, SpoolWithoutHelloIsRejected) {
  std::string path = dir_ / "nohello.cpspool";
  Bytes b;
  auto e = MakeEvents(1, 0);
  wire::AppendEvents(b, 0, e.data(), e.size());
  WriteFile(path, b);
  SpoolResult res = IngestSpoolFile(*ingest_, path, StreamPolicy{});
  EXPECT_FALSE(res.accepted);
  ASSERT_FALSE(res.status.ok());
  EXPECT_NE(res.status.message().find("before the hello"), std::string::npos) << res.status.message();
  EXPECT_NE(res.status.message().find("at byte 0"), std::string::npos) << res.status.message();
  auto hello = ReadSpoolHello(path);
  ASSERT_FALSE(hello.ok());
  EXPECT_NE(hello.status().message().find("does not start with a hello frame"), std::string::npos);
}

TEST_F(SpoolTest, AnEmptySpoolIsAnErrorNotANothing) {
  // What a rank leaves when its spool's disk was full before its hello: merge must not call that a
  // spool read without error (exit 0).
  std::string path = dir_ / "empty.cpspool";
  WriteFile(path, Bytes{});
  SpoolResult res = IngestSpoolFile(*ingest_, path, StreamPolicy{});
  EXPECT_FALSE(res.accepted);
  EXPECT_EQ(res.status.code(), StatusCode::kIoError);
  EXPECT_NE(res.status.message().find("empty.cpspool: empty (0 bytes)"), std::string::npos) << res.status.message();
}

TEST_F(SpoolTest, MissingSpoolFileIsAnIoError) {
  SpoolResult res = IngestSpoolFile(*ingest_, dir_ / "absent.cpspool", StreamPolicy{});
  EXPECT_FALSE(res.accepted);
  EXPECT_EQ(res.status.code(), StatusCode::kIoError);
  EXPECT_FALSE(ReadSpoolHello(dir_ / "absent.cpspool").ok());
}

// An elastic restart's worker (hello incarnation 1) with the rank of one already stored: with a
// router it goes to its incarnation's ingest and is kept there whole; the first stays as it was.
// Without one (a relay) it is refused as before, naming the rank.
TEST_F(SpoolTest, ARestartedIncarnationGoesWhereTheRouterSaysAndIsRefusedWithoutOne) {
  std::string first = dir_ / "first.cpspool", again = dir_ / "again.cpspool";
  WriteFile(first, CompleteSpool(0, "s"));
  Bytes restarted;
  wire::Hello h = MakeHello(0, "job-sp", 778);
  h.incarnation = 1;
  wire::AppendHello(restarted, h, "s");
  const Bytes rest = CompleteSpool(0, "s");
  Bytes first_hello;
  wire::AppendHello(first_hello, MakeHello(0), "s");
  restarted.insert(restarted.end(), rest.begin() + static_cast<std::ptrdiff_t>(first_hello.size()), rest.end());
  WriteFile(again, restarted);

  ASSERT_TRUE(IngestSpoolFile(*ingest_, first, StreamPolicy{}).accepted);
  SpoolResult refused = IngestSpoolFile(*ingest_, again, StreamPolicy{});
  EXPECT_FALSE(refused.accepted);
  EXPECT_NE(refused.status.message().find("already connected or stored"), std::string::npos);

  JobMeta meta;
  meta.job_id = "job-sp";
  auto second = Ingest::Start(dir_ / "out.restart-1.h5", meta, WriterOptions{}, 50);
  ASSERT_TRUE(second.ok()) << second.status().message();
  std::vector<uint32_t> asked;
  IncarnationRouter router = [&](uint32_t k) -> Result<Ingest*> {
    asked.push_back(k);
    return second.value().get();
  };
  SpoolResult kept = IngestSpoolFile(*ingest_, again, StreamPolicy{}, router);
  EXPECT_TRUE(kept.accepted) << kept.status.message();
  EXPECT_EQ(kept.incarnation, 1u);
  EXPECT_EQ(asked, std::vector<uint32_t>{1});
  // A first incarnation never asks the router.
  SpoolResult resend = IngestSpoolFile(*ingest_, first, StreamPolicy{}, router);
  EXPECT_TRUE(resend.status.ok()) << resend.status.message();
  EXPECT_EQ(asked.size(), 1u);
  // A relay's stream refuses any restarted worker, router or not, and says why.
  StreamPolicy relay;
  relay.refuse_restarts = true;
  SpoolResult at_relay = IngestSpoolFile(*ingest_, again, relay, router);
  EXPECT_FALSE(at_relay.accepted);
  EXPECT_NE(at_relay.status.message().find("a relay does not keep"), std::string::npos) << at_relay.status.message();
  EXPECT_EQ(asked.size(), 1u);
  // A router that refuses: the hello is refused with its reason.
  IncarnationRouter full = [](uint32_t) -> Result<Ingest*> { return InvalidArgument("no room for incarnation 1"); };
  SpoolResult no_room = IngestSpoolFile(*ingest_, again, StreamPolicy{}, full);
  EXPECT_FALSE(no_room.accepted);
  EXPECT_NE(no_room.status.message().find("no room for incarnation 1"), std::string::npos) << no_room.status.message();

  ASSERT_TRUE(second.value()->Finish().ok());
  auto r = FinishAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().ranks.at(0).pid, 77u);
  EXPECT_EQ(r->info().ranks.at(0).event_count, 5u);
  auto r2 = ProfileReader::Open(dir_ / "out.restart-1.h5");
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_EQ(r2.value()->info().ranks.at(0).pid, 778u);
  EXPECT_EQ(r2.value()->info().ranks.at(0).event_count, 5u);
  EXPECT_EQ(r2.value()->info().ranks.at(0).status, "complete");
}

TEST_F(SpoolTest, SecondSpoolOfTheSameProcessAddsNothingAndAnotherProcessIsRefused) {
  std::string a = dir_ / "a.cpspool", b = dir_ / "b.cpspool", c = dir_ / "c.cpspool";
  WriteFile(a, CompleteSpool(0, "s"));
  WriteFile(b, CompleteSpool(0, "s"));  // the same process: a resend of what is stored
  Bytes other;
  wire::AppendHello(other, MakeHello(0, "job-sp", 777), "s");
  WriteFile(c, other);
  EXPECT_TRUE(IngestSpoolFile(*ingest_, a, StreamPolicy{}).status.ok());
  SpoolResult second = IngestSpoolFile(*ingest_, b, StreamPolicy{});
  EXPECT_TRUE(second.status.ok()) << second.status.message();
  SpoolResult third = IngestSpoolFile(*ingest_, c, StreamPolicy{});
  EXPECT_FALSE(third.accepted);
  EXPECT_NE(third.status.message().find("already connected or stored"), std::string::npos) << third.status.message();
  auto r = FinishAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().ranks.at(0).event_count, 5u) << "the resend added nothing";
  EXPECT_EQ(r->info().ranks.at(0).status, "complete");
}

TEST_F(SpoolTest, SpoolForAnotherJobIsRefused) {
  std::string path = dir_ / "other.cpspool";
  Bytes b;
  wire::AppendHello(b, MakeHello(0, "job-other"), "s");
  WriteFile(path, b);
  auto hello = ReadSpoolHello(path);
  ASSERT_TRUE(hello.ok()) << hello.status().message();
  EXPECT_EQ(hello->job_id, "job-other");
  SpoolResult res = IngestSpoolFile(*ingest_, path, StreamPolicy{std::nullopt, "job-sp"});
  EXPECT_FALSE(res.accepted);
  EXPECT_EQ(res.job_id, "");
  EXPECT_NE(res.status.message().find("job-other"), std::string::npos) << res.status.message();
}

TEST_F(SpoolTest, RankStreamRejectsFramesAfterTheByeAndEndsOnce) {
  RankStream s(*ingest_, StreamPolicy{});
  Bytes hello;
  wire::AppendHello(hello, MakeHello(0), "");
  s.End("before hello: nothing to close");  // not accepted yet: no effect
  ASSERT_TRUE(s.OnFrame(wire::FrameType::kHello, PayloadSpan(hello)).ok());
  EXPECT_TRUE(s.accepted());
  Bytes bye;
  wire::AppendBye(bye, wire::Bye{});
  ASSERT_TRUE(s.OnFrame(wire::FrameType::kBye, PayloadSpan(bye)).ok());
  EXPECT_TRUE(s.said_bye());
  Bytes ev;
  auto e = MakeEvents(1, 0);
  wire::AppendEvents(ev, 0, e.data(), e.size());
  Status after = s.OnFrame(wire::FrameType::kEvents, PayloadSpan(ev));
  EXPECT_EQ(after.code(), StatusCode::kCorrupt);
  EXPECT_NE(after.message().find("after the bye"), std::string::npos) << after.message();
  Status ack = s.OnFrame(wire::FrameType::kHelloAck, {});
  EXPECT_FALSE(ack.ok());
  s.End("again");  // already ended by the bye: no second close
  auto r = FinishAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().ranks.at(0).status, "complete");
  EXPECT_EQ(r->info().ranks.at(0).end_reason, "bye");
  EXPECT_EQ(r->info().ranks.at(0).event_count, 0u);
}

TEST_F(SpoolTest, RankStreamRejectsAHelloAckFromACollector) {
  RankStream s(*ingest_, StreamPolicy{});
  Bytes hello;
  wire::AppendHello(hello, MakeHello(1), "");
  ASSERT_TRUE(s.OnFrame(wire::FrameType::kHello, PayloadSpan(hello)).ok());
  Bytes ack;
  wire::AppendHelloAck(ack, wire::HelloAck{true, ""});
  Status st = s.OnFrame(wire::FrameType::kHelloAck, PayloadSpan(ack));
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.message().find("unexpected hello-ack"), std::string::npos) << st.message();
  s.End("test over");
  auto r = FinishAndRead();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().ranks.at(1).status, "disconnected");
  EXPECT_EQ(r->info().ranks.at(1).end_reason, "test over");
}

}  // namespace
}  // namespace commprof
