// The hang watchdog (aggregator/hang_watch.h) behind the real server, with fake collectors on real
// TCP: each is authenticated like a collector and answers hang-queries with HangState frames the
// test writes, so the HangInput handed over can be checked against what the ranks said. Timeouts
// are short (300 ms) and every wait is bounded by seconds, so a loaded machine only slows them.
#include "aggregator/hang_watch.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/ingest.h"
#include "aggregator/server.h"
#include "core/wire.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using Bytes = std::vector<uint8_t>;
using test_support::TcpClient;
using test_support::TempDir;
using test_support::WaitFor;
using namespace std::chrono_literals;

constexpr const char* kSecret = "hang-secret";
constexpr const char* kJob = "job-hang";
constexpr uint64_t kNow = 50'000'000'000ull;  // every fake rank's clock at its snapshot

// What a fake rank answers to a query: the state, or a raw payload (malformed), or nothing.
struct Reply {
  bool answer = true;
  wire::HangState state;
  std::optional<Bytes> raw_payload;
  std::optional<uint64_t> stale_first;  // an answer with this query_id goes out before the real one
};

commprof_event InflightCollective(uint8_t op, uint64_t seq, uint64_t since_ns, uint64_t bytes, int32_t root = -1,
                                  uint64_t comm = COMMPROF_COMM_WORLD_ID) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_COLLECTIVE;
  e.subtype = op;
  e.comm_id = comm;
  e.seq = seq;
  e.bytes = bytes;
  e.peer = root;
  e.start_ns = kNow - since_ns;
  e.end_ns = e.start_ns;
  return e;
}

// A rank blocked in `op` #seq for `blocked_ns`, its last completion `idle_ns` ago.
wire::HangState Blocked(uint8_t op, uint64_t seq, uint64_t blocked_ns, uint64_t idle_ns, uint32_t rank) {
  wire::HangState s;
  s.local_now_ns = kNow;
  s.last_completion_ns = kNow - idle_ns;
  s.inflight.push_back(wire::InflightOp{InflightCollective(op, seq, blocked_ns, 4096), 7});
  commprof_event done = InflightCollective(op, seq - 1, idle_ns + 1000, 4096);
  done.end_ns = kNow - idle_ns;
  s.recent.push_back(done);
  s.comms.push_back(wire::CommMembership{COMMPROF_COMM_WORLD_ID, 4, rank});
  s.call_sites.emplace_back(7, "train_step <- main");
  return s;
}

// One collector, as far as the aggregator can tell: hello, events, bye; a thread answers queries.
class FakeRank {
 public:
  FakeRank(uint16_t port, uint32_t rank, uint32_t world) : client_(port), rank_(rank) {
    wire::Hello h;
    h.rank = rank;
    h.world_size = world;
    h.pid = 4000 + rank;
    h.host = "fake-host";
    h.job_id = kJob;
    h.start_steady_ns = 1;
    h.start_utc_ns = 2;
    Bytes hello;
    wire::AppendHello(hello, h, kSecret, client_.challenge().value_or(wire::Nonce{}));
    EXPECT_TRUE(client_.Send(hello));
    auto ack = client_.ReadAck();
    EXPECT_TRUE(ack.has_value() && ack->accepted) << "rank " << rank << " was not accepted";
    reader_ = std::thread([this] { ReadLoop(); });
  }
  ~FakeRank() {
    stop_ = true;
    if (reader_.joinable()) reader_.join();
  }

  void SetReply(Reply r) {
    std::lock_guard<std::mutex> lock(mu_);
    reply_ = std::move(r);
  }
  // A batch with one completed allreduce (progress) or an INCOMPLETE one (not progress).
  void SendCollective(bool completed) {
    commprof_event e = InflightCollective(COMMPROF_OP_ALLREDUCE, batch_, 1000, 64);
    e.end_ns = e.start_ns + 500;
    if (!completed) e.flags = COMMPROF_FLAG_INCOMPLETE;
    Bytes frame;
    wire::AppendEvents(frame, batch_++, &e, 1);
    Send(frame);
  }
  void SendBye(std::vector<std::pair<std::string, uint64_t>> counters = {}) {
    Bytes frame;
    wire::AppendBye(frame, wire::Bye{std::move(counters)});
    Send(frame);
  }
  void Close() {
    stop_ = true;
    if (reader_.joinable()) reader_.join();
    client_.Close();
  }

  int queries() const { return queries_.load(); }
  int aborts() const { return aborts_.load(); }
  bool closed_by_server() const { return closed_.load(); }
  std::string abort_reason() {
    std::lock_guard<std::mutex> lock(mu_);
    return abort_reason_;
  }

 private:
  void Send(const Bytes& b) {
    std::lock_guard<std::mutex> lock(send_mu_);
    EXPECT_TRUE(client_.Send(b));
  }

  void ReadLoop() {
    while (!stop_) {
      pollfd p{client_.fd(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      auto frame = client_.ReadFrame();
      if (!frame.has_value()) {
        closed_ = true;
        return;
      }
      if (frame->first == wire::FrameType::kHangAbort) {
        auto a = wire::DecodeHangAbort(frame->second);
        std::lock_guard<std::mutex> lock(mu_);
        abort_reason_ = a.ok() ? a->reason : "(undecodable)";
        aborts_++;
      }
      if (frame->first != wire::FrameType::kHangQuery) continue;
      auto q = wire::DecodeHangQuery(frame->second);
      EXPECT_TRUE(q.ok());
      queries_++;
      Reply r;
      {
        std::lock_guard<std::mutex> lock(mu_);
        r = reply_;
      }
      if (!r.answer) continue;
      Bytes out;
      if (r.stale_first.has_value()) {
        wire::HangState stale = r.state;
        stale.query_id = *r.stale_first;
        wire::AppendHangState(out, stale);
      }
      if (r.raw_payload.has_value()) {
        Bytes header;
        wire::AppendHangAbort(header, wire::HangAbort{});  // a valid header, retyped and resized below
        header.resize(wire::kHeaderSize);
        header[6] = static_cast<uint8_t>(wire::FrameType::kHangState);
        uint32_t len = static_cast<uint32_t>(r.raw_payload->size());
        std::memcpy(header.data() + 8, &len, 4);
        out.insert(out.end(), header.begin(), header.end());
        out.insert(out.end(), r.raw_payload->begin(), r.raw_payload->end());
      } else {
        r.state.query_id = q->query_id;
        wire::AppendHangState(out, r.state);
      }
      Send(out);
    }
  }

  TcpClient client_;
  uint32_t rank_;
  uint64_t batch_ = 0;
  std::thread reader_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};
  std::atomic<int> queries_{0};
  std::atomic<int> aborts_{0};
  std::mutex mu_;
  std::mutex send_mu_;
  Reply reply_;
  std::string abort_reason_;
};

class HangWatchTest : public ::testing::Test {
 protected:
  HangWatchTest() : dir_("commprof-hang") {}
  ~HangWatchTest() override { Stop(); }

  void Start(OnHang on_hang = OnHang::kReport, std::chrono::milliseconds answer_wait = 1500ms) {
    JobMeta meta;
    meta.job_id = kJob;
    auto in = Ingest::Start(dir_ / "out.h5", meta, WriterOptions{}, 50);
    ASSERT_TRUE(in.ok()) << in.status().message();
    ingest_ = std::move(in.value());
    HangWatchOptions o;
    o.timeout = 300ms;
    o.on_hang = on_hang;
    o.answer_wait = answer_wait;
    watch_ = std::make_shared<HangWatch>(io_, o, [this](const hang::HangInput& input) {
      std::lock_guard<std::mutex> lock(mu_);
      inputs_.push_back(input);
      return std::string("rank 2 never entered MPI_Allreduce #5");
    });
    auto s = Server::Listen(io_, *ingest_, StreamPolicy{kSecret, kJob}, "127.0.0.1", 0, ServerLimits{}, watch_);
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(s.value());
    thread_ = std::thread([this] { io_.run(); });
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    io_.stop();
    if (thread_.joinable()) thread_.join();
    if (server_) server_->Close();
    if (ingest_) {
      EXPECT_TRUE(ingest_->Finish().ok());
    }
  }

  std::vector<hang::HangInput> Inputs() {
    std::lock_guard<std::mutex> lock(mu_);
    return inputs_;
  }
  const hang::RankSnapshot* RankOf(const hang::HangInput& in, uint32_t rank) {
    for (const auto& r : in.ranks) {
      if (r.rank == rank) return &r;
    }
    ADD_FAILURE() << "rank " << rank << " is not in the hang input";
    return nullptr;
  }

  // `n` fake ranks, each having completed one collective, then quiet.
  std::vector<std::unique_ptr<FakeRank>> Ranks(uint32_t n) {
    std::vector<std::unique_ptr<FakeRank>> v;
    for (uint32_t r = 0; r < n; ++r) {
      v.push_back(std::make_unique<FakeRank>(server_->port(), r, n));
    }
    for (auto& f : v) f->SendCollective(true);
    return v;
  }

  TempDir dir_;
  boost::asio::io_context io_;
  std::unique_ptr<Ingest> ingest_;
  std::shared_ptr<HangWatch> watch_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  bool stopped_ = false;
  std::mutex mu_;
  std::vector<hang::HangInput> inputs_;
};

TEST_F(HangWatchTest, QuietRanksWithOneBlockedPastTheTimeoutAreQueriedOnceAndHandedOverAsAnswered) {
  Start();
  auto ranks = Ranks(4);
  // Ranks 0, 1, 3 wait in allreduce #5 for 1 s; rank 2 is in the barrier #6 after skipping it.
  for (uint32_t r : {0u, 1u, 3u})
    ranks[r]->SetReply({true, Blocked(COMMPROF_OP_ALLREDUCE, 5, 1'000'000'000, 1'000'000'000, r)});
  ranks[2]->SetReply({true, Blocked(COMMPROF_OP_BARRIER, 6, 900'000'000, 900'000'000, 2)});
  ASSERT_TRUE(WaitFor([&] { return watch_->reports() == 1; }, 20000));
  // Reported once: without progress no second query goes out, however long the job stays stuck.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(watch_->reports(), 1u);
  EXPECT_EQ(watch_->queries(), 1u);
  for (auto& f : ranks) EXPECT_EQ(f->queries(), 1);

  auto inputs = Inputs();
  ASSERT_EQ(inputs.size(), 1u);
  const hang::HangInput& in = inputs[0];
  EXPECT_EQ(in.source, "live");
  EXPECT_EQ(in.world_size, 4u);
  EXPECT_DOUBLE_EQ(in.timeout_s, 0.3);
  EXPECT_GT(in.detected_utc_ns, 0u);
  ASSERT_EQ(in.ranks.size(), 4u);
  for (uint32_t r = 0; r < 4; ++r) {
    const hang::RankSnapshot* s = RankOf(in, r);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->condition, hang::RankCondition::kRunning);
    ASSERT_TRUE(s->has_state);
    wire::HangState want = r == 2 ? Blocked(COMMPROF_OP_BARRIER, 6, 900'000'000, 900'000'000, 2)
                                  : Blocked(COMMPROF_OP_ALLREDUCE, 5, 1'000'000'000, 1'000'000'000, r);
    EXPECT_EQ(s->state.query_id, 1u);
    EXPECT_EQ(s->state.local_now_ns, want.local_now_ns);
    EXPECT_EQ(s->state.last_completion_ns, want.last_completion_ns);
    ASSERT_EQ(s->state.inflight.size(), 1u);
    test_support::ExpectEventEq(s->state.inflight[0].event, want.inflight[0].event, 0);
    EXPECT_EQ(s->state.inflight[0].stack, 7u);
    ASSERT_EQ(s->state.recent.size(), 1u);
    test_support::ExpectEventEq(s->state.recent[0], want.recent[0], 0);
    ASSERT_EQ(s->state.comms.size(), 1u);
    EXPECT_EQ(s->state.comms[0].rank_in_comm, r);
    ASSERT_EQ(s->state.call_sites.size(), 1u);
    EXPECT_EQ(s->state.call_sites[0].second, "train_step <- main");
  }
  EXPECT_FALSE(watch_->aborted());
  for (auto& f : ranks) EXPECT_EQ(f->aborts(), 0) << "--on-hang report must not end the job";
}

TEST_F(HangWatchTest, ARankThatCompletedACallWithinTheTimeoutMeansNoHang) {
  Start();
  auto ranks = Ranks(3);
  ranks[0]->SetReply({true, Blocked(COMMPROF_OP_ALLREDUCE, 5, 1'000'000'000, 1'000'000'000, 0)});
  ranks[1]->SetReply({true, Blocked(COMMPROF_OP_ALLREDUCE, 5, 1'000'000'000, 1'000'000'000, 1)});
  // Rank 2 completed a call 10 ms before its snapshot: the job moves (its batch is just late).
  ranks[2]->SetReply({true, Blocked(COMMPROF_OP_ALLREDUCE, 9, 5'000'000, 10'000'000, 2)});
  // A quiet phase: the watchdog asks again one timeout later, and never hands over.
  ASSERT_TRUE(WaitFor([&] { return watch_->queries() >= 2; }, 20000));
  EXPECT_EQ(watch_->reports(), 0u);
  EXPECT_TRUE(Inputs().empty());
}

TEST_F(HangWatchTest, NoRankBlockedPastTheTimeoutIsAQuietPhaseNotAHang) {
  Start();
  auto ranks = Ranks(2);
  // Long computation: nothing completed for 1 s, but nothing is in flight either.
  for (uint32_t r = 0; r < 2; ++r) {
    wire::HangState s = Blocked(COMMPROF_OP_ALLREDUCE, 5, 0, 1'000'000'000, r);
    s.inflight.clear();
    ranks[r]->SetReply({true, s});
  }
  ASSERT_TRUE(WaitFor([&] { return watch_->queries() >= 2; }, 20000));
  EXPECT_EQ(watch_->reports(), 0u);
}

TEST_F(HangWatchTest, RanksCompletingCallsAreNeverQueried) {
  Start();
  auto ranks = Ranks(2);
  // Batches with completed collectives every 50 ms for 1.5 s (5 timeouts): progress throughout;
  // INCOMPLETE events in between do not count as progress but do not hide it either.
  for (int i = 0; i < 30; ++i) {
    ranks[i % 2]->SendCollective(true);
    ranks[(i + 1) % 2]->SendCollective(false);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(watch_->queries(), 0u);
  // Then only INCOMPLETE events: no progress, so a query does go out.
  for (int i = 0; i < 4; ++i) ranks[0]->SendCollective(false);
  EXPECT_TRUE(WaitFor([&] { return watch_->queries() >= 1; }, 20000));
}

TEST_F(HangWatchTest, ARankThatNeverAnswersIsNoAnswerAfterTheWaitAndFinishedOrDeadRanksAreNamed) {
  Start(OnHang::kReport, 500ms);
  auto ranks = Ranks(5);
  // Rank 3 ended normally, rank 4 from a fatal-signal handler's bye; both before the hang.
  ranks[3]->SendBye({{"events_recorded", 1}});
  ranks[4]->SendBye({{"fatal_signal", 15}});
  ASSERT_TRUE(WaitFor([&] { return server_->stats().byes.load() == 2; }));
  for (uint32_t r : {0u, 1u})
    ranks[r]->SetReply({true, Blocked(COMMPROF_OP_BCAST, 3, 2'000'000'000, 2'000'000'000, r)});
  ranks[2]->SetReply({false, {}});
  ASSERT_TRUE(WaitFor([&] { return watch_->reports() == 1; }, 20000));
  EXPECT_EQ(ranks[2]->queries(), 1);
  EXPECT_EQ(ranks[3]->queries(), 0) << "a rank that said bye is not asked";
  auto in = Inputs().at(0);
  ASSERT_EQ(in.ranks.size(), 5u);
  EXPECT_EQ(RankOf(in, 0)->condition, hang::RankCondition::kRunning);
  EXPECT_EQ(RankOf(in, 2)->condition, hang::RankCondition::kNoAnswer);
  EXPECT_FALSE(RankOf(in, 2)->has_state);
  EXPECT_EQ(RankOf(in, 3)->condition, hang::RankCondition::kFinished);
  EXPECT_EQ(RankOf(in, 3)->end_reason, "bye");
  EXPECT_EQ(RankOf(in, 4)->condition, hang::RankCondition::kDied);
  EXPECT_EQ(RankOf(in, 4)->end_reason, "killed by signal 15 (SIGTERM)");
  EXPECT_FALSE(RankOf(in, 4)->has_state);
}

TEST_F(HangWatchTest, AMalformedAnswerDropsOnlyItsConnectionAndAStaleOneIsIgnored) {
  Start();
  auto ranks = Ranks(3);
  Reply stale{true, Blocked(COMMPROF_OP_ALLREDUCE, 5, 1'000'000'000, 1'000'000'000, 0)};
  stale.stale_first = 99;  // no such query: ignored, then the right answer counts
  ranks[0]->SetReply(stale);
  ranks[1]->SetReply({true, Blocked(COMMPROF_OP_ALLREDUCE, 5, 1'000'000'000, 1'000'000'000, 1)});
  Reply bad;
  bad.raw_payload = Bytes{1, 2, 3};  // shorter than any hang-state
  ranks[2]->SetReply(bad);
  ASSERT_TRUE(WaitFor([&] { return watch_->reports() == 1; }, 20000));
  EXPECT_TRUE(WaitFor([&] { return ranks[2]->closed_by_server(); }));
  EXPECT_FALSE(ranks[0]->closed_by_server());
  EXPECT_FALSE(ranks[1]->closed_by_server());
  EXPECT_EQ(server_->stats().dropped.load(), 1u);
  EXPECT_GE(watch_->ignored_answers(), 1u);
  auto in = Inputs().at(0);
  EXPECT_EQ(RankOf(in, 0)->condition, hang::RankCondition::kRunning);
  EXPECT_EQ(RankOf(in, 0)->state.query_id, 1u);
  EXPECT_EQ(RankOf(in, 2)->condition, hang::RankCondition::kDied);
  EXPECT_FALSE(RankOf(in, 2)->end_reason.empty());
}

TEST_F(HangWatchTest, ProgressAfterAReportArmsTheWatchAgain) {
  Start();
  auto ranks = Ranks(2);
  for (uint32_t r = 0; r < 2; ++r)
    ranks[r]->SetReply({true, Blocked(COMMPROF_OP_ALLREDUCE, 5, 1'000'000'000, 1'000'000'000, r)});
  ASSERT_TRUE(WaitFor([&] { return watch_->reports() == 1; }, 20000));
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(watch_->queries(), 1u);
  ranks[0]->SendCollective(true);  // the job moved on, then sticks again
  ASSERT_TRUE(WaitFor([&] { return watch_->reports() == 2; }, 20000));
  EXPECT_EQ(watch_->queries(), 2u);
  auto in = Inputs();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(RankOf(in[1], 0)->state.query_id, 2u);
}

TEST_F(HangWatchTest, OnHangAbortSendsTheVerdictToEveryConnectedRank) {
  Start(OnHang::kAbort);
  auto ranks = Ranks(3);
  ranks[2]->SendBye();
  ASSERT_TRUE(WaitFor([&] { return server_->stats().byes.load() == 1; }));
  for (uint32_t r = 0; r < 2; ++r)
    ranks[r]->SetReply({true, Blocked(COMMPROF_OP_ALLREDUCE, 5, 1'000'000'000, 1'000'000'000, r)});
  ASSERT_TRUE(WaitFor([&] { return watch_->reports() == 1; }, 20000));
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(WaitFor([&] { return ranks[r]->aborts() == 1; })) << "rank " << r;
    EXPECT_EQ(ranks[r]->abort_reason(), "rank 2 never entered MPI_Allreduce #5");
  }
  EXPECT_EQ(ranks[2]->aborts(), 0) << "a rank that said bye gets nothing";
  EXPECT_TRUE(watch_->aborted());
}

TEST_F(HangWatchTest, NoRankConnectedMeansNoQuery) {
  Start();
  std::this_thread::sleep_for(1000ms);
  EXPECT_EQ(watch_->queries(), 0u);
  auto ranks = Ranks(1);
  ranks[0]->SendBye();
  std::this_thread::sleep_for(1000ms);
  EXPECT_EQ(watch_->queries(), 0u) << "every rank said bye: nothing can hang";
}

}  // namespace
}  // namespace commprof
