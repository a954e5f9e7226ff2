// The collector's side of the hang diagnosis (docs/hangs.md): the per-thread in-flight seqlock, the
// request table's read-only view, the shipper's hang-state answer while the application thread is
// blocked, and the end of a rank by hang-abort with its in-flight call flagged INCOMPLETE.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collector/call_stacks.h"
#include "collector/inflight.h"
#include "collector/request_table.h"
#include "collector/runtime.h"
#include "collector_sim.h"
#include "core/wire.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::ExpectEventEq;
using test_support::FrameCapture;
using test_support::ManualClock;
using test_support::TempDir;
using test_support::WaitFor;
namespace ev = test_support::events;

// An event whose every word is derived from `i`, so a copy mixing two writes is recognisable.
commprof_event Patterned(uint64_t i) {
  commprof_event e{};
  e.start_ns = i;
  e.end_ns = i;
  e.bytes = i * 3;
  e.seq = i * 5;
  e.comm_id = i * 7;
  e.kind = COMMPROF_KIND_MPI_COLLECTIVE;
  e.subtype = static_cast<uint8_t>(i);
  e.peer = static_cast<int32_t>(i & 0x7fffffff);
  e.correlation = static_cast<uint32_t>(i * 11);
  e.name_id = static_cast<uint32_t>(i * 13);
  return e;
}
bool IsPatterned(const commprof_event& e) {
  const uint64_t i = e.start_ns;
  commprof_event want = Patterned(i);
  return std::memcmp(&want, &e, sizeof e) == 0;
}

TEST(EventSeqlock, AReaderNeverAcceptsACopyMixingTwoWrites) {
  EventSeqlock lock;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t i = 1; !stop.load(std::memory_order_relaxed); ++i) {
      lock.Store(Patterned(i), static_cast<uint32_t>(i));
      if (i % 3 == 0) {
        lock.Clear();
      }
    }
  });
  uint64_t copied = 0, empty = 0, torn = 0;
  for (int k = 0; k < 200000 || copied < 100; ++k) {
    commprof_event e{};
    uint32_t tag = 0;
    switch (lock.Read(e, tag)) {
      case EventSeqlock::ReadResult::kCopied:
        ++copied;
        if (!IsPatterned(e) || tag != static_cast<uint32_t>(e.start_ns)) {
          ++torn;
        }
        break;
      case EventSeqlock::ReadResult::kEmpty:
        ++empty;
        break;
      case EventSeqlock::ReadResult::kBusy:
        break;
    }
    if (k > 5'000'000) {
      break;  // a starved reader on a loaded machine: what was accepted is still checked
    }
  }
  stop.store(true);
  writer.join();
  EXPECT_EQ(torn, 0u) << copied << " copies accepted";
  EXPECT_GT(copied, 0u);
}

TEST(InflightSlot, PublishesOnlyTheOutermostCallAndRecordsTheExitAsTheLastCompletion) {
  InflightSlot slot;
  commprof_event e{};
  uint32_t stack = 0;
  EXPECT_EQ(slot.Read(e, stack), EventSeqlock::ReadResult::kEmpty);
  EXPECT_EQ(slot.last_completion_ns(), 0u);
  const commprof_event outer = ev::Collective(COMMPROF_OP_ALLREDUCE, 4, 100, 100, {.bytes = 64});
  ASSERT_TRUE(slot.Publish(outer, 9));
  EXPECT_FALSE(slot.Publish(ev::Collective(COMMPROF_OP_BCAST, 5, 110, 110), 3)) << "a nested call replaced it";
  ASSERT_EQ(slot.Read(e, stack), EventSeqlock::ReadResult::kCopied);
  ExpectEventEq(e, outer, 0);
  EXPECT_EQ(stack, 9u);
  slot.Clear(250);
  EXPECT_EQ(slot.Read(e, stack), EventSeqlock::ReadResult::kEmpty);
  EXPECT_EQ(slot.last_completion_ns(), 250u);
  // An MPI_Test that found nothing is no completion.
  ASSERT_TRUE(slot.Publish(ev::WaitCall(COMMPROF_OP_TEST, 300, 300), 0));
  slot.Clear(310, false);
  EXPECT_EQ(slot.last_completion_ns(), 250u);
}

// Inserts and takes on two threads while a third keeps looking: every take succeeds (no completion
// lost because the reader was looking), and every event the reader sees is whole and was inserted.
TEST(RequestTable, ReadOnlyViewDuringConcurrentInsertAndTakeLosesNoCompletion) {
  RequestTable table(256);
  constexpr int kThreads = 2;
  constexpr uint64_t kOps = 20000;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lost{0}, taken{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (uint64_t i = 1; i <= kOps; ++i) {
        const uintptr_t key = (static_cast<uintptr_t>(t + 1) << 40) | (i % 8 + 2);  // keys reused, like MPI handles
        const uint64_t v = (static_cast<uint64_t>(t) << 32) | i;
        if (!table.Insert(key, Patterned(v), static_cast<uint32_t>(v))) {
          lost.fetch_add(1);
          continue;
        }
        commprof_event out{};
        if (!table.Take(key, out) || !IsPatterned(out) || out.start_ns != v) {
          lost.fetch_add(1);
        } else {
          taken.fetch_add(1);
        }
      }
    });
  }
  uint64_t seen = 0, bad = 0;
  std::thread reader([&] {
    while (!stop.load()) {
      table.ForEachPending([&](const commprof_event& e, uint32_t stack) {
        ++seen;
        if (!IsPatterned(e) || stack != static_cast<uint32_t>(e.start_ns)) {
          ++bad;
        }
      });
    }
  });
  for (auto& w : workers) {
    w.join();
  }
  stop.store(true);
  reader.join();
  EXPECT_EQ(lost.load(), 0u);
  EXPECT_EQ(taken.load(), kThreads * kOps);
  EXPECT_EQ(bad, 0u) << seen << " pending operations seen";
  int left = 0;
  table.ForEachPending([&](const commprof_event&, uint32_t) { ++left; });
  EXPECT_EQ(left, 0);
  EXPECT_EQ(table.overflow(), 0u);
}

Config HangConfig() {
  Config c;
  c.aggregator = "in-process";
  c.secret = "s";
  c.job_id = "hang";
  c.spool_dir = "/nonexistent-unused";
  c.buffer_events = 1024;
  c.memory_mb = 64;
  c.flush_ms = 5;
  c.request_slots = 64;
  c.clock_sync = false;
  c.hang_history = 3;
  return c;
}

Identity HangIdentity(uint32_t rank) {
  Identity id;
  id.rank = rank;
  id.world_size = 4;
  id.pid = 100 + rank;
  id.host = "node";
  id.mpi = true;
  return id;
}

std::vector<uint8_t> QueryFrame(uint64_t id, uint32_t history) {
  std::vector<uint8_t> f;
  wire::AppendHangQuery(f, wire::HangQuery{id, history});
  return f;
}

// The first hang-state frame rank `rank` sent, if any.
bool FindHangState(const FrameCapture& capture, uint32_t rank, wire::HangState& out) {
  for (const auto& f : capture.FramesOf(rank)) {
    if (f.type == wire::FrameType::kHangState) {
      auto s = wire::DecodeHangState(f.payload);
      EXPECT_TRUE(s.ok()) << s.status().message();
      if (s.ok()) {
        out = s.value();
        return true;
      }
    }
  }
  return false;
}

// An "application" thread that records completed collectives, then blocks inside a call (published
// in flight, as a wrapper does) until released.
class BlockedApp {
 public:
  BlockedApp(Runtime& rt, commprof_event blocked_in, uint32_t stack, std::vector<commprof_event> before)
      : thread_([this, &rt, blocked_in, stack, before] {
          for (const auto& e : before) {
            rt.Record(e);
          }
          InflightSlot& slot = rt.Thread()->inflight;
          slot.Publish(blocked_in, stack);
          std::unique_lock<std::mutex> lock(mu_);
          entered_ = true;
          cv_.notify_all();
          cv_.wait(lock, [this] { return released_; });
          slot.Clear(blocked_in.start_ns + 1000);
        }) {}
  ~BlockedApp() {
    Release();
    thread_.join();
  }
  void WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool released() {
    std::lock_guard<std::mutex> lock(mu_);
    return released_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool released_ = false;
  std::thread thread_;
};

TEST(HangState, ShipperAnswersAQueryWhileTheApplicationThreadIsBlockedInACall) {
  FrameCapture capture;
  ManualClock clock(5'000'000);
  RuntimeSeams seams;
  seams.clock = std::make_unique<test_support::BorrowedClock>(clock);
  seams.transports = capture.Transports(2);
  Runtime rt(HangConfig(), HangIdentity(2), std::move(seams));
  rt.Start();

  constexpr uint64_t kSub = (3ull << 32) | 1;  // a split of the world, led by world rank 2
  constexpr uint64_t kNccl = 0xabcdef0123ull;
  std::vector<commprof_event> before;
  before.push_back(ev::CommCreated(kSub, 1, 2));  // rank 1 of 2 in kSub
  for (uint64_t i = 0; i < 5; ++i) {              // world: 5 allreduces, history keeps 3
    before.push_back(ev::Collective(COMMPROF_OP_ALLREDUCE, i, 1000 + i * 100, 1050 + i * 100, {.bytes = 8}));
  }
  before.push_back(ev::Collective(COMMPROF_OP_BCAST, 0, 2000, 2100, {.root = 0, .comm = kSub, .bytes = 16}));
  // An INCOMPLETE collective and a p2p operation are no history.
  before.push_back(
      ev::Collective(COMMPROF_OP_BARRIER, 1, 2200, 2200, {.comm = kSub, .flags = COMMPROF_FLAG_INCOMPLETE}));
  before.push_back(ev::Send(2300, 2400, 1, 7));
  before.push_back(ev::NcclCollective(COMMPROF_OP_ALLGATHER, 12, 2500, 2600, kNccl, 4096));
  // Blocked in allreduce number 5 of the world: 1 KiB of float32 sums, call site 42.
  commprof_event blocked = ev::Collective(COMMPROF_OP_ALLREDUCE, 5, 3000, 3000, {.bytes = 1024});
  blocked.datatype = COMMPROF_DT_FLOAT32;
  blocked.reduce_op = COMMPROF_RED_SUM;
  // And a non-blocking receive parked in the request table (from rank 3, tag 9, call site 43).
  commprof_event irecv =
      ev::P2p(COMMPROF_OP_RECV, 2800, 2800, 3, 9, 256, COMMPROF_COMM_WORLD_ID, COMMPROF_FLAG_NONBLOCKING, 0);
  ASSERT_TRUE(rt.requests().Insert(0x1234, irecv, 43));

  BlockedApp app(rt, blocked, 42, before);
  app.WaitEntered();
  clock.Set(9'000'000);
  capture.Deliver(2, QueryFrame(77, 0));
  wire::HangState st;
  ASSERT_TRUE(WaitFor([&] { return FindHangState(capture, 2, st); }, 20000)) << "no hang-state within 20 s";
  EXPECT_FALSE(app.released()) << "the answer must come while the application thread is still blocked";

  EXPECT_EQ(st.query_id, 77u);
  EXPECT_EQ(st.local_now_ns, 9'000'000u);
  EXPECT_EQ(st.last_completion_ns, 0u) << "no call of this runtime has returned yet";
  ASSERT_EQ(st.inflight.size(), 2u);
  std::map<uint8_t, wire::InflightOp> by_kind;
  for (const auto& op : st.inflight) {
    by_kind[op.event.kind] = op;
  }
  ASSERT_TRUE(by_kind.contains(COMMPROF_KIND_MPI_COLLECTIVE));
  const wire::InflightOp& call = by_kind[COMMPROF_KIND_MPI_COLLECTIVE];
  EXPECT_EQ(call.event.subtype, COMMPROF_OP_ALLREDUCE);
  EXPECT_EQ(call.event.comm_id, COMMPROF_COMM_WORLD_ID);
  EXPECT_EQ(call.event.seq, 5u);
  EXPECT_EQ(call.event.bytes, 1024u);
  EXPECT_EQ(call.event.datatype, COMMPROF_DT_FLOAT32);
  EXPECT_EQ(call.event.reduce_op, COMMPROF_RED_SUM);
  EXPECT_EQ(call.event.peer, COMMPROF_NO_PEER);
  EXPECT_EQ(call.event.start_ns, 3000u);
  EXPECT_EQ(call.event.end_ns, 3000u);
  EXPECT_EQ(call.stack, 42u);
  ASSERT_TRUE(by_kind.contains(COMMPROF_KIND_MPI_P2P));
  const wire::InflightOp& recv = by_kind[COMMPROF_KIND_MPI_P2P];
  EXPECT_EQ(recv.event.subtype, COMMPROF_OP_RECV);
  EXPECT_EQ(recv.event.peer, 3);
  EXPECT_EQ(recv.event.correlation, 9u);
  EXPECT_EQ(recv.event.bytes, 256u);
  EXPECT_EQ(recv.event.start_ns, 2800u);
  EXPECT_EQ(recv.event.flags, COMMPROF_FLAG_NONBLOCKING);
  EXPECT_EQ(recv.stack, 43u);
  EXPECT_TRUE(st.call_sites.empty()) << "no --stacks: no call-site text";

  // History: per communicator, oldest first, at most COMMPROF_HANG_HISTORY (3) of the world's 5.
  std::map<std::pair<uint64_t, uint8_t>, std::vector<uint64_t>> seqs;
  for (const auto& e : st.recent) {
    EXPECT_EQ(e.flags & COMMPROF_FLAG_INCOMPLETE, 0);
    seqs[{e.comm_id, e.kind}].push_back(e.seq);
  }
  EXPECT_EQ(seqs.size(), 3u);
  EXPECT_EQ((seqs[{COMMPROF_COMM_WORLD_ID, COMMPROF_KIND_MPI_COLLECTIVE}]), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ((seqs[{kSub, COMMPROF_KIND_MPI_COLLECTIVE}]), (std::vector<uint64_t>{0}));
  EXPECT_EQ((seqs[{kNccl, COMMPROF_KIND_NCCL_COLLECTIVE}]), (std::vector<uint64_t>{12}));
  // Memberships: the world (from the identity) and the split (from its creation event).
  std::map<uint64_t, std::pair<uint32_t, uint32_t>> comms;
  for (const auto& m : st.comms) {
    comms[m.comm_id] = {m.size, m.rank_in_comm};
  }
  EXPECT_EQ(comms.size(), 2u);
  EXPECT_EQ(comms[COMMPROF_COMM_WORLD_ID], std::make_pair(4u, 2u));
  EXPECT_EQ(comms[kSub], std::make_pair(2u, 1u));

  // The events are on the wire before the answer (names and history known to the aggregator).
  auto frames = capture.FramesOf(2);
  size_t answer_at = 0, last_events_at = 0;
  for (size_t k = 0; k < frames.size(); ++k) {
    if (frames[k].type == wire::FrameType::kHangState && answer_at == 0) {
      answer_at = k;
    }
    if (frames[k].type == wire::FrameType::kEvents && answer_at == 0) {
      last_events_at = k;
    }
  }
  EXPECT_GT(answer_at, last_events_at);
  EXPECT_GT(last_events_at, 0u);

  // A second query asking for 1 per communicator; after the call returned, it is no longer in
  // flight and its exit is the last completion.
  app.Release();
  ASSERT_TRUE(WaitFor([&] {
    uint64_t last = 0;
    (void)rt.Inflight(last);
    return last == 4000;
  }));
  (void)rt.requests().Take(0x1234, irecv);
  capture.Deliver(2, QueryFrame(78, 1));
  wire::HangState second;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& f : capture.FramesOf(2)) {
          if (f.type == wire::FrameType::kHangState) {
            auto s = wire::DecodeHangState(f.payload);
            if (s.ok() && s->query_id == 78) {
              second = s.value();
              return true;
            }
          }
        }
        return false;
      },
      20000));
  EXPECT_TRUE(second.inflight.empty());
  EXPECT_EQ(second.last_completion_ns, 4000u);
  EXPECT_EQ(second.recent.size(), 3u);  // one per communicator
  rt.Shutdown();
  auto last = capture.FramesOf(2).back();
  ASSERT_EQ(last.type, wire::FrameType::kBye);
  auto bye = wire::DecodeBye(last.payload);
  ASSERT_TRUE(bye.ok());
  std::map<std::string, uint64_t> counters(bye->counters.begin(), bye->counters.end());
  EXPECT_EQ(counters["hang_queries_answered"], 2u);
}

TEST(HangState, AMalformedHangQueryBreaksTheStreamAndIsNeverAnswered) {
  FrameCapture capture;
  RuntimeSeams seams;
  seams.transports = capture.Transports(0);
  Config c = HangConfig();
  c.reconnect_ms = 0;  // the broken link goes to the spool, which a capture refuses: nothing more is sent
  std::vector<uint8_t> bad = QueryFrame(5, 0);
  bad.pop_back();  // the history field cut short, the header's length fixed to match
  const auto len = static_cast<uint32_t>(bad.size() - wire::kHeaderSize);
  std::memcpy(bad.data() + 8, &len, sizeof len);
  capture.Deliver(0, bad);
  capture.Deliver(0, QueryFrame(6, 0));  // read only after the bad one, from a stream already given up
  Runtime rt(c, HangIdentity(0), std::move(seams));
  rt.Start();
  rt.Shutdown();
  wire::HangState st;
  EXPECT_FALSE(FindHangState(capture, 0, st));
  auto frames = capture.FramesOf(0);
  ASSERT_FALSE(frames.empty());
  EXPECT_NE(frames.back().type, wire::FrameType::kBye) << "the stream went on after a malformed hang-query";
}

TEST(HangState, CallSiteTextNamesEachFrameWithItsModuleAndOffsetInnermostFirst) {
  // Return addresses just past two libc entry points: their call instructions' symbols.
  const uintptr_t pcs[] = {reinterpret_cast<uintptr_t>(&::getpid) + 1, reinterpret_cast<uintptr_t>(&::getppid) + 1};
  const std::string text = CallSiteText(pcs, 4096);
  EXPECT_TRUE(std::regex_match(
      text, std::regex(R"(\S*getpid \(libc\.so\.6\+0x[0-9a-f]+\) <- \S*getppid \(libc\.so\.6\+0x[0-9a-f]+\))")))
      << text;
  const uintptr_t unknown[] = {1};  // no module holds it
  EXPECT_EQ(CallSiteText(unknown, 4096), "? (??+0x0)");
  EXPECT_EQ(CallSiteText(pcs, 10), text.substr(0, 10)) << "cut at the limit";
  EXPECT_EQ(CallSiteText({}, 4096), "");
}

// --on-hang abort: the rank logs one line, records its in-flight call as INCOMPLETE, sends its bye
// naming SIGTERM, and dies of SIGTERM. Run in a child process (a death test): the frames go to a file
// the parent reads back.
class FileLink final : public Transport {
 public:
  FileLink(std::FILE* f, std::vector<uint8_t> abort) : f_(f), abort_(std::move(abort)) {}
  Status Send(std::span<const uint8_t> bytes) override {
    std::fwrite(bytes.data(), 1, bytes.size(), f_);
    std::fflush(f_);
    return Status::Ok();
  }
  Status Receive(wire::FrameHeader&, std::vector<uint8_t>&, uint32_t) override { return Unavailable("none"); }
  Result<bool> TryReceive(wire::FrameHeader& h, std::vector<uint8_t>& payload) override {
    if (!armed_.load() || abort_.empty()) {
      return false;
    }
    h = wire::DecodeHeader(std::span<const uint8_t>(abort_).first(wire::kHeaderSize)).value();
    payload.assign(abort_.begin() + wire::kHeaderSize, abort_.end());
    abort_.clear();
    return true;
  }
  const char* name() const override { return "file"; }
  static std::atomic<bool> armed_;

 private:
  std::FILE* f_;
  std::vector<uint8_t> abort_;
};
std::atomic<bool> FileLink::armed_{false};

class FileLinks final : public TransportFactory {
 public:
  FileLinks(std::string path, std::vector<uint8_t> abort) : path_(std::move(path)), abort_(std::move(abort)) {}
  Result<std::unique_ptr<Transport>> Connect(std::span<const uint8_t> hello) override {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (f == nullptr) {
      return Unavailable("cannot open " + path_);
    }
    auto link = std::make_unique<FileLink>(f, abort_);
    (void)link->Send(hello);
    return std::unique_ptr<Transport>(std::move(link));
  }
  Result<std::unique_ptr<Transport>> OpenSpool(const wire::Hello&, std::span<const uint8_t>, std::string*) override {
    return Unavailable("no spool");
  }

 private:
  std::string path_;
  std::vector<uint8_t> abort_;
};

[[noreturn]] void AbortedRank(const std::string& path) {
  std::vector<uint8_t> abort;
  wire::AppendHangAbort(abort, wire::HangAbort{"rank 1 never entered MPI_Allreduce #5 on MPI_COMM_WORLD"});
  RuntimeSeams seams;
  seams.transports = std::make_unique<FileLinks>(path, abort);
  Config c = HangConfig();
  c.bye_ack_ms = 0;
  Runtime* rt = new Runtime(c, HangIdentity(3), std::move(seams));  // the process dies with it
  rt->Start();
  commprof_event blocked = ev::Recv(4000, 4000, 1, 17, 512);
  rt->Record(ev::Collective(COMMPROF_OP_BARRIER, 0, 100, 200));
  rt->Thread()->inflight.Publish(blocked, 0);
  FileLink::armed_.store(true);
  for (;;) {  // "blocked in MPI_Recv" until the signal ends the process
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(HangAbortDeathTest, AbortEndsTheRankWithSigtermAfterFlushingItsInflightCallAsIncomplete) {
  // "fast": the child is forked, so it writes where this process reads (no thread runs here yet).
  GTEST_FLAG_SET(death_test_style, "fast");
  TempDir dir;
  const std::string path = dir.path() + "/stream.bin";
  EXPECT_EXIT(AbortedRank(path), testing::KilledBySignal(SIGTERM),
              "commprof: rank 3: ending the job: rank 1 never entered MPI_Allreduce #5 on MPI_COMM_WORLD");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<commprof_event> events;
  std::map<std::string, uint64_t> counters;
  bool bye = false;
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  for (;;) {
    auto got = wire::ReadFrame(f, h, payload);
    ASSERT_TRUE(got.ok()) << got.status().message();
    if (!got.value()) {
      break;
    }
    if (h.type == wire::FrameType::kEvents) {
      auto e = wire::DecodeEvents(payload);
      ASSERT_TRUE(e.ok());
      events.insert(events.end(), e->events.begin(), e->events.end());
    } else if (h.type == wire::FrameType::kBye) {
      auto b = wire::DecodeBye(payload);
      ASSERT_TRUE(b.ok());
      counters.insert(b->counters.begin(), b->counters.end());
      bye = true;
    }
  }
  std::fclose(f);
  ASSERT_TRUE(bye) << "the stream ends without a bye";
  EXPECT_EQ(counters["fatal_signal"], static_cast<uint64_t>(SIGTERM));
  EXPECT_EQ(counters["calls_in_flight_at_exit"], 1u);
  EXPECT_EQ(counters["ended_by_hang_abort"], 1u);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, COMMPROF_KIND_MPI_COLLECTIVE);
  const commprof_event& r = events[1];
  EXPECT_EQ(r.kind, COMMPROF_KIND_MPI_P2P);
  EXPECT_EQ(r.subtype, COMMPROF_OP_RECV);
  EXPECT_EQ(r.peer, 1);
  EXPECT_EQ(r.correlation, 17u);
  EXPECT_EQ(r.bytes, 512u);
  EXPECT_EQ(r.start_ns, 4000u);
  EXPECT_GE(r.end_ns, r.start_ns);
  EXPECT_EQ(r.flags & COMMPROF_FLAG_INCOMPLETE, COMMPROF_FLAG_INCOMPLETE);
}

}  // namespace
}  // namespace commprof
