// Root causes of waiting (analysis/metrics/delay_costs.h, docs/metrics.md §9): ground-truth jobs
// built from synthetic collective instances (measured with MeasureInstances, as AnalyzeJob does)
// and synthetic matched messages, with a planted cause; the recovered delay costs, verdict,
// pattern and replay saving are checked against the plant. Every input is fixed (the random ones
// from a fixed seed), so nothing depends on timing. Tolerances are stated where a value is not
// exact; the costs are sums of whole nanoseconds split into equal shares, exact to well under 1 ns.
#include "analysis/metrics/delay_costs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "analysis/metrics/straggler_verdict.h"
#include "analysis/metrics/time_categories.h"
#include "analysis/metrics/wait_metrics.h"
#include "support/test_support.h"

namespace commprof {
namespace {

namespace events = test_support::events;

constexpr int64_t kUs = 1000;
constexpr int64_t kMs = 1000 * kUs;
constexpr double kExact = 1.0;  // ns: sums of equal shares of whole nanoseconds

// `n` ranks on one host each; error bound 100 ns -> skew threshold max(1 us, 2 x 100 ns) = 1 us,
// unless `error_bound_ns` says otherwise.
ProfileInfo Job(uint32_t n, int64_t error_bound_ns = 100) {
  ProfileInfo info;
  info.world_size = n;
  for (uint32_t r = 0; r < n; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.host = "h" + std::to_string(r);
    ri.clock_error_bound_ns = error_bound_ns;
    info.ranks.push_back(ri);
  }
  return info;
}

// One participant: world rank, entry (arrival) and exit.
struct At {
  uint32_t rank = 0;
  int64_t start = 0;
  int64_t end = 0;
};

// A complete blocking instance of `op` on `comm` whose members are the ranks of `at` (local rank:
// the place among them by world rank; `root` is a local rank).
CollectiveInstance Instance(uint64_t comm, uint64_t seq, uint8_t op, std::vector<At> at,
                            int32_t root = COMMPROF_NO_PEER) {
  std::sort(at.begin(), at.end(), [](const At& a, const At& b) { return a.rank < b.rank; });
  CollectiveInstance in;
  in.comm_id = comm;
  in.seq = seq;
  in.op = op;
  in.root = root;
  in.bytes = 8;
  in.comm_size = static_cast<uint32_t>(at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    Arrival a;
    a.world_rank = at[i].rank;
    a.local_rank = static_cast<int32_t>(i);
    a.start = at[i].start;
    a.end = at[i].end;
    a.bytes = 8;
    a.block_start = at[i].start;
    in.arrivals.push_back(a);
  }
  return in;
}

CollectiveInstance Allreduce(uint64_t comm, uint64_t seq, std::vector<At> at) {
  return Instance(comm, seq, COMMPROF_OP_ALLREDUCE, std::move(at));
}

// One message between two blocking calls (a Sendrecv on each side): the sender's call [s0, s1]
// posts it at its entry, the receiver's call [r0, r1] posts the receive at its entry.
P2PMessage Message(uint32_t src, int64_t s0, int64_t s1, uint32_t dst, int64_t r0, int64_t r1) {
  P2PMessage m;
  m.comm_id = COMMPROF_COMM_WORLD_ID;
  m.src = src;
  m.dst = dst;
  m.bytes = 8;
  m.send_op = COMMPROF_OP_SENDRECV;
  m.send_start = s0;
  m.send_end = s1;
  m.recv_start = r0;
  m.recv_end = r1;
  m.send_call_start = s0;
  m.recv_call_start = r0;
  return m;
}

// What AnalyzeJob computes from the instances and messages: each instance measured once, the
// delay costs (§9.1-§9.2), the verdict (§9.3) with its replay savings (§9.4).
struct Analysis {
  std::vector<InstanceMetrics> measured;
  DelayAnalysis delay;
  std::vector<Straggler> stragglers;
  const RankDelay& rank(uint32_t r) const { return delay.ranks[r]; }
};

Analysis Analyze(const ProfileInfo& info, const std::vector<CollectiveInstance>& in,
                 const std::vector<P2PMessage>& messages = {}) {
  Analysis a;
  const int64_t threshold = SkewThresholdNs(info);
  a.measured = MeasureInstances(in, threshold);
  a.delay = ComputeDelayCosts(info, in, a.measured, messages, threshold);
  a.stragglers = JudgeStragglers(info, in, a.delay);
  return a;
}

// Whom a rank waited for (RankDelay::wait_by_culprit), to the nanosecond.
void ExpectCulprits(const std::vector<std::pair<uint32_t, double>>& got,
                    const std::vector<std::pair<uint32_t, double>>& want, const char* who) {
  ASSERT_EQ(got.size(), want.size()) << who << ": " << testing::PrintToString(got);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << who << ": " << testing::PrintToString(got);
    EXPECT_NEAR(got[i].second, want[i].second, kExact) << who << ": " << testing::PrintToString(got);
  }
}

std::vector<uint32_t> Named(const Analysis& a) {
  std::vector<uint32_t> v;
  for (const Straggler& s : a.stragglers) v.push_back(s.rank);
  return v;
}

// n allreduces of 4 ranks on MPI_COMM_WORLD, `period` apart: rank r enters call s `arrive(s, r)`
// into its period, and every rank leaves `tail` after the last one entered.
std::vector<CollectiveInstance> WorldAllreduces(int n, int64_t period, int64_t tail,
                                                const std::function<int64_t(int, uint32_t)>& arrive) {
  std::vector<CollectiveInstance> in;
  for (int s = 0; s < n; ++s) {
    std::vector<At> at;
    int64_t last = 0;
    for (uint32_t r = 0; r < 4; ++r) {
      at.push_back({r, s * period + arrive(s, r), 0});
      last = std::max(last, at.back().start);
    }
    for (At& x : at) x.end = last + tail;
    in.push_back(Allreduce(COMMPROF_COMM_WORLD_ID, s, at));
  }
  return in;
}

// ---------------------------------------------------------------------------------------------

TEST(DelayCosts, APersistentlyLateRankCostsEveryWaiterItsLatenessAndIsNamedAlone) {
  // 4 ranks, 100 allreduces 10 ms apart: ranks 0, 1, 3 arrive 5 ms into the period, rank 2 at
  // 8 ms (3 ms more compute), all leave 100 us after it. The 3 others wait 3 ms for it, each
  // time: delay cost 3 x 3 ms x 100 = 900 ms, direct (rank 2 was computing), nobody else costs.
  constexpr int kN = 100;
  std::vector<CollectiveInstance> in;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 10 * kMs, exit = t + 8 * kMs + 100 * kUs;
    in.push_back(
        Allreduce(COMMPROF_COMM_WORLD_ID, s,
                  {{0, t + 5 * kMs, exit}, {1, t + 5 * kMs, exit}, {2, t + 8 * kMs, exit}, {3, t + 5 * kMs, exit}}));
  }
  Analysis a = Analyze(Job(4), in);
  EXPECT_NEAR(a.rank(2).direct_ns, 3.0 * 3 * kMs * kN, kExact);
  EXPECT_NEAR(a.rank(2).propagated_ns, 0, kExact);
  for (uint32_t r : {0u, 1u, 3u}) {
    EXPECT_NEAR(a.rank(r).cost(), 0, kExact) << r;
    EXPECT_NEAR(a.rank(r).waited_ns, 3.0 * kMs * kN, kExact) << r;  // all of it charged to rank 2
    ASSERT_EQ(a.rank(r).wait_by_culprit.size(), 1u) << r;
    EXPECT_EQ(a.rank(r).wait_by_culprit[0].first, 2u);
  }
  EXPECT_NEAR(a.delay.total_wait_ns, 3.0 * 3 * kMs * kN, kExact);
  EXPECT_NEAR(a.delay.attributed_ns, a.delay.total_wait_ns, kExact);
  EXPECT_NEAR(a.delay.unattributed_ns, 0, kExact);

  ASSERT_EQ(Named(a), (std::vector<uint32_t>{2}));
  const Straggler& s = a.stragglers[0];
  EXPECT_EQ(s.host, "h2");
  EXPECT_DOUBLE_EQ(s.share, 1.0);
  EXPECT_EQ(s.pattern, "persistent");
  EXPECT_EQ(s.late_instances, static_cast<uint64_t>(kN));
  EXPECT_EQ(s.typical_lateness_ns, 3 * kMs);
  EXPECT_EQ(s.cause, "compute");
  ASSERT_EQ(s.communicators.size(), 1u);
  EXPECT_EQ(s.communicators[0].name, "MPI_COMM_WORLD");
  // The replay: on time, the job ends 3 ms earlier per instance. Tolerance one plant (3 ms): the
  // first call has no earlier exit to measure the compute before it from, so its lateness is not
  // removed (the saving is 99 x 3 ms).
  EXPECT_NEAR(static_cast<double>(s.saving_ns), 3.0 * kMs * kN, 3.0 * kMs);
  EXPECT_EQ(EstimateSaving(a.delay.graph, 2), s.saving_ns);
  EXPECT_EQ(EstimateSaving(a.delay.graph, 0), 0);  // an on-time rank saves nothing
}

TEST(DelayCosts, ARankLateEveryTenthCallIsNamedPeriodicWithItsPeriodAndLateness) {
  // 4 ranks, 100 allreduces 30 ms apart; every rank arrives 5 ms into the period plus a jitter of
  // 0..50 us (fixed seed); rank 1 is 20 ms later in every 10th call (0, 10, ..., 90). Its cost:
  // about 10 x 3 x 20 ms = 600 ms; the jitter's about 3 x 25 us per call, spread over everyone.
  std::mt19937_64 rng(15);
  auto in = WorldAllreduces(100, 30 * kMs, 100 * kUs, [&](int s, uint32_t r) {
    return 5 * kMs + static_cast<int64_t>(rng() % (50 * kUs + 1)) + (r == 1 && s % 10 == 0 ? 20 * kMs : 0);
  });
  Analysis a = Analyze(Job(4), in);
  // 10 x 3 waiters x 20 ms, give or take the jitter (50 us per waiter and call)
  EXPECT_NEAR(a.rank(1).cost(), 10 * 3 * 20.0 * kMs, 10 * 3 * 50.0 * kUs);
  ASSERT_EQ(Named(a), (std::vector<uint32_t>{1}));
  const Straggler& s = a.stragglers[0];
  EXPECT_EQ(s.pattern, "periodic");
  EXPECT_EQ(s.period_every, 10u);
  EXPECT_NEAR(static_cast<double>(s.typical_lateness_ns), 20.0 * kMs, 50.0 * kUs);
  EXPECT_EQ(s.late_instances, 10u);
}

TEST(DelayCosts, ABurstOfEveryOtherCallLateIsTransientNotPeriodic) {
  // 4 ranks, 150 allreduces 2 ms apart (a 1 ms compute step); rank 0 is woken 0.9 ms late at
  // calls 40, 42, 44, 46 and 48 only (a few ms of load on its core): five episodes two calls
  // apart, but one burst, not a hiccup recurring through the run. Then also two lone pairs two
  // calls apart (100, 102 and 130, 132): the gaps' mode is still 2.
  const std::set<int> late = {40, 42, 44, 46, 48};
  for (const bool pairs : {false, true}) {
    auto in = WorldAllreduces(150, 2 * kMs, 50 * kUs, [&](int s, uint32_t r) {
      const bool hit = late.count(s) > 0 || (pairs && (s == 100 || s == 102 || s == 130 || s == 132));
      return kMs + r * kUs + (r == 0 && hit ? 900 * kUs : 0);
    });
    Analysis a = Analyze(Job(4), in);
    ASSERT_EQ(Named(a), (std::vector<uint32_t>{0})) << "pairs " << pairs;
    const Straggler& st = a.stragglers[0];
    EXPECT_EQ(st.pattern, "transient") << "pairs " << pairs << ": every " << st.period_every;
    EXPECT_EQ(st.late_instances, pairs ? 9u : 5u);
    EXPECT_NEAR(static_cast<double>(st.typical_lateness_ns), 900.0 * kUs, 5.0 * kUs);
  }
}

TEST(DelayCosts, AHiccupEveryTenthCallFromHalfwayIsPeriodic) {
  // 4 ranks, 200 allreduces 30 ms apart; rank 1 is 20 ms late at calls 110, 120, ..., 190 only
  // (a hiccup that begins halfway through the run, such as a checkpoint thread started late):
  // nine episodes ten calls apart over the last 45 % of its calls: periodic, every 10.
  auto in = WorldAllreduces(200, 30 * kMs, 100 * kUs, [](int s, uint32_t r) {
    return 5 * kMs + r * kUs + (r == 1 && s >= 110 && s % 10 == 0 ? 20 * kMs : 0);
  });
  Analysis a = Analyze(Job(4), in);
  ASSERT_EQ(Named(a), (std::vector<uint32_t>{1}));
  EXPECT_EQ(a.stragglers[0].pattern, "periodic");
  EXPECT_EQ(a.stragglers[0].period_every, 10u);
  EXPECT_EQ(a.stragglers[0].late_instances, 9u);
}

TEST(DelayCosts, LatenessInASubCommunicatorIsTracedToTheRankAndItsGroup) {
  // 8 ranks: group A = ranks 0-3 on communicator 0xA0, group B = ranks 4-7 on 0xB0. Each of 50
  // iterations (20 ms apart): an allreduce in each group at 5 ms, where rank 5 arrives 2 ms late
  // (it leaves, with its group, 100 us after it), then a world allreduce 10 us after each rank's
  // group exit (rank 5: 20 us). Group B reaches the world call 2 ms after group A, because rank 5
  // held it: group A's wait there is charged to rank 5, through ranks 4, 6, 7 (propagated) while
  // they were still held in their group call.
  constexpr int kN = 50;
  constexpr uint64_t kA = 0xA0, kB = 0xB0;
  std::vector<CollectiveInstance> in;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 20 * kMs;
    const int64_t a_exit = t + 5 * kMs + 100 * kUs, b_exit = t + 7 * kMs + 100 * kUs;
    in.push_back(Allreduce(
        kA, s,
        {{0, t + 5 * kMs, a_exit}, {1, t + 5 * kMs, a_exit}, {2, t + 5 * kMs, a_exit}, {3, t + 5 * kMs, a_exit}}));
    in.push_back(Allreduce(
        kB, s,
        {{4, t + 5 * kMs, b_exit}, {5, t + 7 * kMs, b_exit}, {6, t + 5 * kMs, b_exit}, {7, t + 5 * kMs, b_exit}}));
    const int64_t w_exit = b_exit + 20 * kUs + 100 * kUs;
    std::vector<At> world;
    for (uint32_t r = 0; r < 8; ++r) {
      const int64_t arrive = (r < 4 ? a_exit : b_exit) + (r == 5 ? 20 * kUs : 10 * kUs);
      world.push_back({r, arrive, w_exit});
    }
    in.push_back(Allreduce(COMMPROF_COMM_WORLD_ID, s, world));
  }
  Analysis a = Analyze(Job(8), in);
  // Per iteration (times from its start t):
  //  - group B: ranks 4, 6, 7 wait 2 ms for rank 5, which was computing: 3 x 2 ms direct.
  //  - world: ranks 4, 6, 7 arrive at 7.11 ms and wait 10 us for rank 5 (7.12 ms): 3 x 10 us
  //    direct. Group A's 4 ranks wait from 5.11 ms: until 7.11 ms for the 4 of group B (1/4 each,
  //    0.5 ms per waiter and missing rank), then 10 us for rank 5 alone. Ranks 4, 6, 7 were held
  //    by rank 5 in their group call until 7 ms: their 2 ms (over 5.11..7.11 ms) passes on to
  //    rank 5 for the 1.89 ms up to 7 ms (propagated). Over that window (5.11..7.11 ms) each of
  //    them was blocked 1.89 ms, in its group call's tail 0.1 ms (charged to nobody, §9.2) and
  //    ran 10 us with no excess compute: 1.89 / 1.99 of its 2 ms share passes on to rank 5.
  //  rank 5: direct 6 ms (group) + most of its own world share (2.07 ms, less the part of its
  //  window spent in its group call's tail); propagated 3 x 2 ms x 1.89 / 1.99; ranks 4, 6, 7
  //  and group A: nothing.
  EXPECT_NEAR(a.rank(5).propagated_ns, kN * 3 * 2.0 * kMs * 1.89 / 1.99, kN * kExact);
  EXPECT_GE(a.rank(5).direct_ns, kN * (6 + 1.9) * kMs);
  EXPECT_LE(a.rank(5).direct_ns, kN * (6 + 2.07) * kMs);
  for (uint32_t r : {4u, 6u, 7u}) EXPECT_NEAR(a.rank(r).cost(), 0, kN * kExact) << r;
  for (uint32_t r : {0u, 1u, 2u, 3u}) EXPECT_NEAR(a.rank(r).cost(), 0, kExact) << r;
  // what is not attributed is the group tails' part: about 3 % of the waiting
  EXPECT_GE(a.delay.attributed_ns, 0.96 * a.delay.total_wait_ns);
  EXPECT_NEAR(a.delay.attributed_ns + a.delay.unattributed_ns, a.delay.total_wait_ns, kN * kExact);

  ASSERT_EQ(Named(a), (std::vector<uint32_t>{5}));
  const Straggler& s = a.stragglers[0];
  EXPECT_EQ(s.pattern, "persistent");
  ASSERT_FALSE(s.communicators.empty());
  EXPECT_EQ(s.communicators[0].comm_id, kB);
  EXPECT_EQ(s.communicators[0].name, "MPI communicator 0xb0");
  EXPECT_EQ(s.communicators[0].size, 4u);
  EXPECT_EQ(s.communicators[0].members, (std::vector<uint32_t>{4, 5, 6, 7}));
  for (const StragglerCommunicator& c : s.communicators) EXPECT_NE(c.comm_id, kA);
}

TEST(DelayCosts, AHaloExchangeLatenessPropagatesThroughTheNeighboursToTheLatePoster) {
  // 4 ranks in a ring (0-1-2-3-0), 50 iterations 10 ms apart. Each: one Sendrecv-like call per
  // rank exchanging with both neighbours (8 messages), entered at 1 ms, rank 1 at 3 ms (2 ms of
  // extra compute); a call leaves 10 us after its last partner posted; then an allreduce 10 us
  // after the halo call, left 100 us after the last arrival.
  //   halo: ranks 0 and 2 wait 2 ms for rank 1 (its send: Late Sender, its receive: Late
  //   Receiver, 1 ms each): 2 x 2 ms direct. Rank 3's neighbours are on time: it leaves at
  //   1.01 ms and arrives at the allreduce at 1.02 ms, waiting 2 ms for ranks 0, 1, 2 (3.02 ms),
  //   2/3 ms for each. Rank 1 was computing: direct. Ranks 0 and 2 were held by rank 1 in the
  //   halo until 3 ms, then ran 20 us with no excess compute (their ordinary work, which rank 3
  //   did too): their whole share passes on to rank 1 (propagated, §9.2).
  constexpr int kN = 50;
  std::vector<CollectiveInstance> in;
  std::vector<P2PMessage> msgs;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 10 * kMs;
    int64_t b[4], e[4];
    for (uint32_t r = 0; r < 4; ++r) b[r] = t + (r == 1 ? 3 : 1) * kMs;
    for (uint32_t r = 0; r < 4; ++r) {
      const uint32_t left = (r + 3) % 4, right = (r + 1) % 4;
      e[r] = std::max({b[r], b[left], b[right]}) + 10 * kUs;
    }
    for (uint32_t r = 0; r < 4; ++r) {
      for (uint32_t peer : {(r + 1) % 4, (r + 3) % 4}) msgs.push_back(Message(r, b[r], e[r], peer, b[peer], e[peer]));
    }
    std::vector<At> at;
    int64_t last = 0;
    for (uint32_t r = 0; r < 4; ++r) {
      at.push_back({r, e[r] + 10 * kUs, 0});
      last = std::max(last, e[r] + 10 * kUs);
    }
    for (At& x : at) x.end = last + 100 * kUs;
    in.push_back(Allreduce(COMMPROF_COMM_WORLD_ID, s, at));
  }
  Analysis a = Analyze(Job(4), in, msgs);
  EXPECT_NEAR(a.rank(1).direct_ns, kN * (2 * 2.0 * kMs + 2.0 / 3 * kMs), kN * kExact);
  EXPECT_NEAR(a.rank(1).propagated_ns, kN * 2 * (2.0 / 3 * kMs), kN * kExact);
  for (uint32_t r : {0u, 2u}) {
    EXPECT_NEAR(a.rank(r).cost(), 0, kN * kExact) << r;
  }
  EXPECT_NEAR(a.rank(3).cost(), 0, kExact);
  EXPECT_NEAR(a.rank(3).waited_ns, kN * 2.0 * kMs, kN * kExact);
  ASSERT_EQ(Named(a), (std::vector<uint32_t>{1}));
  // The replay removes rank 1's 2 ms of extra compute: every iteration ends 2 ms sooner. Tolerance
  // one plant: the first call's compute is not measured (no earlier exit).
  EXPECT_NEAR(static_cast<double>(a.stragglers[0].saving_ns), kN * 2.0 * kMs, 2.0 * kMs);
}

TEST(DelayCosts, ANonBlockingCollectiveWaitsOnlyFromTheEntryOfItsWait) {
  // 3 ranks, 20 MPI_Iallreduce 10 ms apart: ranks 0 and 1 issue at 0 and compute 2 ms before
  // entering the Wait; rank 2 issues at 3 ms and waits at once; all leave at 3.1 ms. The first 2 ms
  // after the issue were overlapped compute: ranks 0 and 1 wait 1 ms each (2 ms to 3 ms), not
  // 3 ms; rank 2 costs 2 x 1 ms per call.
  constexpr int kN = 20;
  std::vector<CollectiveInstance> in;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 10 * kMs, exit = t + 3 * kMs + 100 * kUs;
    CollectiveInstance c = Allreduce(COMMPROF_COMM_WORLD_ID, s, {{0, t, exit}, {1, t, exit}, {2, t + 3 * kMs, exit}});
    c.nonblocking = true;
    c.arrivals[0].block_start = t + 2 * kMs;
    c.arrivals[1].block_start = t + 2 * kMs;
    in.push_back(c);
  }
  Analysis a = Analyze(Job(3), in);
  EXPECT_EQ(a.measured[0].waits, (std::vector<int64_t>{1 * kMs, 1 * kMs, 0}));
  EXPECT_NEAR(a.delay.total_wait_ns, kN * 2.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(2).direct_ns, kN * 2.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(0).waited_ns, kN * 1.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(0).blocked_ns, kN * 1.1 * kMs, kExact);  // from the Wait's entry to the exit
  EXPECT_EQ(Named(a), (std::vector<uint32_t>{2}));
}

TEST(DelayCosts, OneWaitallCompletingTwoCollectivesIsOneBlockedCall) {
  // 3 ranks, 20 iterations 10 ms apart: an MPI_Iallreduce and an MPI_Ibcast (root 0) issued at 0
  // (rank 2 at 3 ms), both completed by one MPI_Waitall entered at 1 ms, left at 3.1 ms. Ranks 0
  // and 1 wait 2 ms once per Waitall (not once per collective), all of it rank 2's; the replay
  // removes rank 2's 3 ms of excess compute before its issues.
  constexpr int kN = 20;
  std::vector<CollectiveInstance> in;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 10 * kMs, exit = t + 3 * kMs + 100 * kUs;
    for (int k = 0; k < 2; ++k) {
      CollectiveInstance c =
          Allreduce(COMMPROF_COMM_WORLD_ID, 2 * s + k, {{0, t, exit}, {1, t, exit}, {2, t + 3 * kMs, exit}});
      c.nonblocking = true;
      for (Arrival& x : c.arrivals) {
        x.block_start = x.world_rank == 2 ? t + 3 * kMs : t + 1 * kMs;
        x.shared_completion = true;  // one MPI_Waitall passed both requests
      }
      in.push_back(c);
    }
  }
  Analysis a = Analyze(Job(3), in);
  EXPECT_NEAR(a.delay.total_wait_ns, kN * 2 * 2.0 * kMs, kExact);  // 2 waiters x 2 ms, once
  EXPECT_NEAR(a.rank(2).direct_ns, kN * 2 * 2.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(0).waited_ns, kN * 2.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(0).blocked_ns, kN * 2.1 * kMs, kExact);
  ASSERT_EQ(Named(a), (std::vector<uint32_t>{2}));
  // every iteration ends 2 ms sooner without rank 2's lateness (it was 3 ms late, the others'
  // Waitall entered at 1 ms): a tolerance of one iteration's excess
  EXPECT_NEAR(static_cast<double>(a.stragglers[0].saving_ns), kN * 2.0 * kMs, 3.0 * kMs);
}

TEST(DelayCosts, AHaloHiccupEveryTenthIterationIsPeriodicInItsSends) {
  // 4 ranks in a ring, 100 iterations 10 ms apart, each a Sendrecv to the right then one to the
  // left (two sends per rank and iteration). Every 10th iteration rank 1 enters both 5 ms late:
  // its neighbours wait 5 ms in the Sendrecv with it. Both of its sends are late in those
  // iterations: one episode of two consecutive sends every 20 sends.
  constexpr int kN = 100;
  std::vector<CollectiveInstance> in;
  std::vector<P2PMessage> msgs;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 10 * kMs;
    const bool hiccup = s % 10 == 9;
    for (int half = 0; half < 2; ++half) {
      int64_t b[4], e[4];
      for (uint32_t r = 0; r < 4; ++r) b[r] = t + half * 100 * kUs + (r == 1 && hiccup ? 5 * kMs : 0);
      for (uint32_t r = 0; r < 4; ++r) {
        const uint32_t peer = half == 0 ? (r + 1) % 4 : (r + 3) % 4, from = half == 0 ? (r + 3) % 4 : (r + 1) % 4;
        e[r] = std::max({b[r], b[peer], b[from]}) + 10 * kUs;
      }
      for (uint32_t r = 0; r < 4; ++r) {
        const uint32_t peer = half == 0 ? (r + 1) % 4 : (r + 3) % 4;
        msgs.push_back(Message(r, b[r], e[r], peer, b[peer], e[peer]));
      }
    }
  }
  Analysis a = Analyze(Job(4), in, msgs);
  ASSERT_EQ(Named(a), (std::vector<uint32_t>{1}));
  const Straggler& st = a.stragglers[0];
  EXPECT_EQ(st.pattern, "periodic");
  EXPECT_EQ(st.period_every, 20u);  // in its sends: two per iteration
  EXPECT_NEAR(static_cast<double>(st.typical_lateness_ns), 5.0 * kMs, 50.0 * kUs);
}

TEST(DelayCosts, TwoCulpritsInTwoGroupsAreBothNamedTheCostlierFirst) {
  // 8 ranks, groups 0-3 (0xA0) and 4-7 (0xB0), 50 allreduces each, 10 ms apart: rank 1 is 4 ms
  // late in group A, rank 6 2 ms late in group B. Costs 3 x 4 ms x 50 = 600 ms and 3 x 2 ms x 50
  // = 300 ms: shares 2/3 and 1/3.
  constexpr int kN = 50;
  std::vector<CollectiveInstance> in;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 10 * kMs;
    std::vector<At> ga, gb;
    for (uint32_t r = 0; r < 4; ++r) ga.push_back({r, t + (r == 1 ? 5 : 1) * kMs, t + 5 * kMs + 100 * kUs});
    for (uint32_t r = 4; r < 8; ++r) gb.push_back({r, t + (r == 6 ? 3 : 1) * kMs, t + 3 * kMs + 100 * kUs});
    in.push_back(Allreduce(0xA0, s, ga));
    in.push_back(Allreduce(0xB0, s, gb));
  }
  Analysis a = Analyze(Job(8), in);
  ASSERT_EQ(Named(a), (std::vector<uint32_t>{1, 6}));
  EXPECT_NEAR(a.stragglers[0].delay_cost_ns, kN * 3 * 4.0 * kMs, kExact);
  EXPECT_NEAR(a.stragglers[1].delay_cost_ns, kN * 3 * 2.0 * kMs, kExact);
  EXPECT_NEAR(a.stragglers[0].share, 2.0 / 3, 1e-12);
  EXPECT_NEAR(a.stragglers[1].share, 1.0 / 3, 1e-12);
  ASSERT_EQ(a.stragglers[0].communicators.size(), 1u);
  EXPECT_EQ(a.stragglers[0].communicators[0].comm_id, 0xA0u);
  EXPECT_EQ(a.stragglers[0].communicators[0].members, (std::vector<uint32_t>{0, 1, 2, 3}));
  ASSERT_EQ(a.stragglers[1].communicators.size(), 1u);
  EXPECT_EQ(a.stragglers[1].communicators[0].comm_id, 0xB0u);
  EXPECT_EQ(a.stragglers[1].communicators[0].members, (std::vector<uint32_t>{4, 5, 6, 7}));
  EXPECT_EQ(a.stragglers[0].pattern, "persistent");
  EXPECT_EQ(a.stragglers[1].pattern, "persistent");
}

TEST(DelayCosts, AReduceRootLateHoldsOnlyTheNonRootsStillInTheCall) {
  // MPI_Reduce to local rank 0, 4 ranks, 10 instances 20 ms apart. The root arrives 10 ms late;
  // ranks 1 and 2 arrive at 0 and leave at 10.05 ms, after the root's arrival but before rank 3's
  // (11 ms, the last): held by the root, 10 ms each. Rank 3 leaves after it arrived (11.05 ms):
  // it waits for everyone, who were all there: 0. The root waits 1 ms for rank 3.
  constexpr int kN = 10;
  std::vector<CollectiveInstance> held, eager;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 20 * kMs;
    held.push_back(Instance(COMMPROF_COMM_WORLD_ID, s, COMMPROF_OP_REDUCE,
                            {{0, t + 10 * kMs, t + 11 * kMs + 100 * kUs},
                             {1, t, t + 10 * kMs + 50 * kUs},
                             {2, t, t + 10 * kMs + 50 * kUs},
                             {3, t + 11 * kMs, t + 11 * kMs + 50 * kUs}},
                            0));
    // Eager: the non-roots leave at 100 us, long before the root arrives: nobody waits.
    eager.push_back(Instance(COMMPROF_COMM_WORLD_ID, s, COMMPROF_OP_REDUCE,
                             {{0, t + 10 * kMs, t + 10 * kMs + 100 * kUs},
                              {1, t, t + 100 * kUs},
                              {2, t, t + 100 * kUs},
                              {3, t, t + 100 * kUs}},
                             0));
  }
  Analysis a = Analyze(Job(4), held);
  EXPECT_EQ(a.measured[0].deps,
            (std::vector<WaitDeps>{WaitDeps::kAll, WaitDeps::kRoot, WaitDeps::kRoot, WaitDeps::kAll}));
  EXPECT_EQ(a.measured[0].waits, (std::vector<int64_t>{1 * kMs, 10 * kMs, 10 * kMs, 0}));
  EXPECT_NEAR(a.rank(0).direct_ns, kN * 2 * 10.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(3).direct_ns, kN * 1.0 * kMs, kExact);
  // Whom each waiter waited for (its time categories' wait_by_culprit): ranks 1 and 2 only for
  // the root, the root only for rank 3 (never for itself).
  ExpectCulprits(a.rank(1).wait_by_culprit, {{0, kN * 10.0 * kMs}}, "rank 1");
  ExpectCulprits(a.rank(2).wait_by_culprit, {{0, kN * 10.0 * kMs}}, "rank 2");
  ExpectCulprits(a.rank(0).wait_by_culprit, {{3, kN * 1.0 * kMs}}, "the root");
  EXPECT_EQ(Named(a), (std::vector<uint32_t>{0}));  // rank 3's 10 ms are under a tenth of the 210

  Analysis e = Analyze(Job(4), eager);
  EXPECT_EQ(e.measured[0].waits, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_NEAR(e.delay.total_wait_ns, 0, kExact);
  EXPECT_TRUE(e.stragglers.empty());
}

TEST(DelayCosts, RandomJitterAloneNamesNobody) {
  // 4 ranks, 300 allreduces 10 ms apart, each arrival uniform in 0..2 ms (fixed seed), all
  // leaving 100 us after the last: every rank is late about as often and as much.
  constexpr int kN = 300;
  std::mt19937_64 rng(2024);
  std::vector<CollectiveInstance> in;
  for (int s = 0; s < kN; ++s) {
    const int64_t t = s * 10 * kMs;
    std::vector<At> at;
    int64_t last = 0;
    for (uint32_t r = 0; r < 4; ++r) {
      const int64_t arrive = t + static_cast<int64_t>(rng() % (2 * kMs + 1));
      at.push_back({r, arrive, 0});
      last = std::max(last, arrive);
    }
    for (At& x : at) x.end = last + 100 * kUs;
    in.push_back(Allreduce(COMMPROF_COMM_WORLD_ID, s, at));
  }
  Analysis a = Analyze(Job(4), in);
  EXPECT_GT(a.delay.attributed_ns, 0);
  EXPECT_TRUE(a.stragglers.empty()) << "named rank " << a.stragglers[0].rank << " with share " << a.stragglers[0].share;
}

TEST(DelayCosts, SeveralLateRanksInOneInstanceShareEachInstantEqually) {
  // 4 ranks, one allreduce: ranks 0 and 1 at 0, A = rank 2 at 10 ms, B = rank 3 at 20 ms.
  // Ranks 0 and 1 wait 20 ms: for 0..10 ms both A and B are missing (5 ms each), for 10..20 ms
  // only B (10 ms). A waits 10 ms for B. A: 2 x 5 ms = 10 ms; B: 2 x 15 ms + 10 ms = 40 ms.
  std::vector<CollectiveInstance> in = {
      Allreduce(COMMPROF_COMM_WORLD_ID, 0,
                {{0, 0, 21 * kMs}, {1, 0, 21 * kMs}, {2, 10 * kMs, 21 * kMs}, {3, 20 * kMs, 21 * kMs}})};
  Analysis a = Analyze(Job(4), in);
  EXPECT_NEAR(a.rank(2).direct_ns, 10.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(3).direct_ns, 40.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(0).cost() + a.rank(1).cost(), 0, kExact);
  EXPECT_NEAR(a.delay.total_wait_ns, 50.0 * kMs, kExact);
  EXPECT_NEAR(a.delay.attributed_ns, 50.0 * kMs, kExact);
  // Each waiter's own wait is charged in full.
  EXPECT_NEAR(a.rank(0).waited_ns, 20.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(2).waited_ns, 10.0 * kMs, kExact);
  // ... to whom it waited for: ranks 0 and 1 5 ms for A and 15 ms for B; A 10 ms for B (never
  // for itself).
  ExpectCulprits(a.rank(0).wait_by_culprit, {{3, 15.0 * kMs}, {2, 5.0 * kMs}}, "rank 0");
  ExpectCulprits(a.rank(2).wait_by_culprit, {{3, 10.0 * kMs}}, "A");
}

TEST(DelayCosts, AChainOfWaitsIsChargedToTheRankAtItsEnd) {
  // C (rank 0) is 5 ms late to a call with B (rank 1, communicator 0x30, B there at 0); B leaves
  // 10 us after C arrives and 10 us later enters a call with A (rank 2, 0x31, A there at 1 ms); A
  // leaves 10 us after B arrives and 10 us later enters a call with D (rank 3, 0x32, D there at
  // 2 ms). Waits: B 5 ms (C direct); A 1..5.02 ms: B held by C until 5 ms (4 ms propagated to C),
  // running after (20 us direct to B); D 2..5.04 ms: A held until 5.02 ms, itself by B held until
  // 5 ms by C (3 ms to C, two hops), 20 us to B (one hop), the last 20 us A's own.
  std::vector<CollectiveInstance> in = {
      Allreduce(0x30, 0, {{0, 5 * kMs, 5 * kMs + 10 * kUs}, {1, 0, 5 * kMs + 10 * kUs}}),
      Allreduce(0x31, 0, {{1, 5 * kMs + 20 * kUs, 5 * kMs + 30 * kUs}, {2, 1 * kMs, 5 * kMs + 30 * kUs}}),
      Allreduce(0x32, 0, {{2, 5 * kMs + 40 * kUs, 5 * kMs + 50 * kUs}, {3, 2 * kMs, 5 * kMs + 50 * kUs}}),
  };
  Analysis a = Analyze(Job(4), in);
  EXPECT_NEAR(a.rank(0).direct_ns, 5.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(0).propagated_ns, 4.0 * kMs + 3.0 * kMs, 40.0 * kUs);
  EXPECT_LE(a.rank(1).cost(), 30.0 * kUs);
  EXPECT_LE(a.rank(2).cost(), 30.0 * kUs);
  EXPECT_NEAR(a.rank(3).cost(), 0, kExact);
  ASSERT_EQ(a.rank(3).wait_by_culprit.size(), 3u);
  EXPECT_EQ(a.rank(3).wait_by_culprit[0].first, 0u);  // D's wait: mostly C's
  EXPECT_NEAR(a.rank(3).wait_by_culprit[0].second, 3.0 * kMs, kExact);
  EXPECT_EQ(Named(a), (std::vector<uint32_t>{0}));
}

TEST(DelayCosts, WaitsInInstancesUnderTheClockThresholdAreUnattributed) {
  // Error bound 5 us: threshold 10 us. 20 allreduces of 3 ranks; rank 2 is 8 us late in the even
  // ones (could be the clocks: unattributed) and 50 us late in the odd ones (attributed).
  std::vector<CollectiveInstance> in;
  for (int s = 0; s < 20; ++s) {
    const int64_t t = s * kMs, late = (s % 2 == 0 ? 8 : 50) * kUs, exit = t + late + 100 * kUs;
    in.push_back(Allreduce(COMMPROF_COMM_WORLD_ID, s, {{0, t, exit}, {1, t, exit}, {2, t + late, exit}}));
  }
  ProfileInfo info = Job(3, 5 * kUs);
  ASSERT_EQ(SkewThresholdNs(info), 10 * kUs);
  Analysis a = Analyze(info, in);
  EXPECT_NEAR(a.delay.total_wait_ns, 10 * 2 * (8.0 + 50.0) * kUs, kExact);
  EXPECT_NEAR(a.delay.attributed_ns, 10 * 2 * 50.0 * kUs, kExact);
  EXPECT_NEAR(a.delay.unattributed_ns, 10 * 2 * 8.0 * kUs, kExact);
  EXPECT_NEAR(a.rank(2).cost(), 10 * 2 * 50.0 * kUs, kExact);
  EXPECT_NEAR(a.rank(0).waited_ns, 10 * 50.0 * kUs, kExact);
  EXPECT_NEAR(a.rank(0).unattributed_wait_ns, 10 * 8.0 * kUs, kExact);
}

// ---------------------------------------------------------------------------------------------
// Time categories (analysis/metrics/time_categories.h, docs/metrics.md §9.5).

commprof_event Ev(uint8_t kind, uint64_t start, uint64_t end, uint8_t op = COMMPROF_OP_NONE, uint16_t flags = 0) {
  commprof_event e{};
  e.kind = kind;
  e.subtype = op;
  e.start_ns = start;
  e.end_ns = end;
  e.flags = flags;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  e.comm_id = COMMPROF_COMM_WORLD_ID;
  return e;
}

TEST(TimeCategories, TheCategoriesAddUpToTheSpan) {
  // One rank, span 0..22000 (the overlap pass's), compute 12000 there:
  //   start-up: MPI_Init 0..1000 + NCCL communicator init 1000..1500 = 1500
  //   shutdown: MPI_Finalize 20000..22000 = 2000
  //   blocked in host communication: Allreduce 5000..9000, Send 10000..10500, Wait 12000..13000,
  //   MPI_Comm_split 2000..2200 = 5700 (the Isend 11000..14000 is issue to completion: not
  //   blocked time); of it the delay analysis charged 3000 to a root cause (wait) and 1500 is
  //   transfer: unattributed 1200.
  //   idle: 22000 - 1500 - 2000 - 5700 - 12000 = 800.
  RankTimeBuilder b;
  std::vector<commprof_event> ev = {
      Ev(COMMPROF_KIND_MPI_INIT, 0, 1000),
      Ev(COMMPROF_KIND_MPI_COMM, 1000, 1500, COMMPROF_OP_NCCL_COMM_INIT),
      Ev(COMMPROF_KIND_MPI_COMM, 2000, 2200, COMMPROF_OP_COMM_SPLIT),
      events::Collective(COMMPROF_OP_ALLREDUCE, 0, 5000, 9000),
      events::Send(10000, 10500, 1, 0),
      events::P2p(COMMPROF_OP_SEND, 11000, 14000, 1, 0, 8, COMMPROF_COMM_WORLD_ID, COMMPROF_FLAG_NONBLOCKING),
      events::WaitCall(COMMPROF_OP_WAIT, 12000, 13000),
      Ev(COMMPROF_KIND_MPI_FINALIZE, 20000, 22000),
  };
  b.Add(std::span(ev).first(3));  // in chunks, as a rank is read
  b.Add(std::span(ev).subspan(3));
  RankOverlap o;
  o.breakdown.span_ns = 22000;
  o.breakdown.compute_ns = 12000;
  RankDelay d;
  d.host_wait_ns = 3000.4;
  d.host_transfer_ns = 1500;
  d.wait_by_culprit = {{3, 2000.0}, {1, 1000.4}};
  RankTime t = ComposeRankTime(b.Summarize(), o, d);
  EXPECT_EQ(t.span_ns, 22000);
  EXPECT_EQ(t.startup_ns, 1500);
  EXPECT_EQ(t.shutdown_ns, 2000);
  EXPECT_EQ(t.wait_ns, 3000);
  EXPECT_EQ(t.transfer_ns, 1500);
  EXPECT_EQ(t.unattributed_ns, 1200);
  EXPECT_EQ(t.compute_ns, 12000);
  EXPECT_EQ(t.idle_ns, 800);
  EXPECT_EQ(t.startup_ns + t.shutdown_ns + t.wait_ns + t.transfer_ns + t.unattributed_ns + t.compute_ns + t.idle_ns,
            t.span_ns);
  EXPECT_EQ(t.wait_by_culprit, (std::vector<std::pair<uint32_t, int64_t>>{{3, 2000}, {1, 1000}}));
}

TEST(TimeCategories, FiguresThatOverflowTheSpanAreCutSoTheyStillAddUp) {
  // Compute 30000 reported over a span of 10000 with 4000 blocked: compute gets what is left.
  RankTimeBuilder b;
  std::vector<commprof_event> ev = {events::Collective(COMMPROF_OP_BARRIER, 0, 1000, 5000)};
  b.Add(ev);
  RankOverlap o;
  o.breakdown.span_ns = 10000;
  o.breakdown.compute_ns = 30000;
  RankDelay d;
  d.host_wait_ns = 9000;  // more than the blocked time: capped
  RankTime t = ComposeRankTime(b.Summarize(), o, d);
  EXPECT_EQ(t.wait_ns, 4000);
  EXPECT_EQ(t.transfer_ns, 0);
  EXPECT_EQ(t.unattributed_ns, 0);
  EXPECT_EQ(t.compute_ns, 6000);
  EXPECT_EQ(t.idle_ns, 0);
}

TEST(TimeCategories, ACollectiveJobsWaitsAndTransfersReachTheCategories) {
  // The persistent case in small: 3 ranks, 10 allreduces, rank 2 3 ms late, transfer 100 us.
  // Rank 0's host wait is its 3 ms per call charged to rank 2, its transfer 100 us per call.
  std::vector<CollectiveInstance> in;
  std::vector<commprof_event> rank0;
  for (int s = 0; s < 10; ++s) {
    const int64_t t = s * 10 * kMs, exit = t + 8 * kMs + 100 * kUs;
    in.push_back(
        Allreduce(COMMPROF_COMM_WORLD_ID, s, {{0, t + 5 * kMs, exit}, {1, t + 5 * kMs, exit}, {2, t + 8 * kMs, exit}}));
    rank0.push_back(
        events::Collective(COMMPROF_OP_ALLREDUCE, s, static_cast<uint64_t>(t + 5 * kMs), static_cast<uint64_t>(exit)));
  }
  Analysis a = Analyze(Job(3), in);
  EXPECT_NEAR(a.rank(0).host_wait_ns, 10 * 3.0 * kMs, kExact);
  EXPECT_NEAR(a.rank(0).host_transfer_ns, 10 * 100.0 * kUs, kExact);
  RankTimeBuilder b;
  b.Add(rank0);
  RankOverlap o;
  o.breakdown.span_ns = 95 * kMs + 100 * kUs;  // 5 ms .. 98.1 ms, plus room
  o.breakdown.compute_ns = 60 * kMs;
  RankTime t = ComposeRankTime(b.Summarize(), o, a.rank(0));
  EXPECT_EQ(t.wait_ns, 10 * 3 * kMs);
  EXPECT_EQ(t.transfer_ns, 10 * 100 * kUs);
  EXPECT_EQ(t.unattributed_ns, 0);
  ASSERT_EQ(t.wait_by_culprit.size(), 1u);
  EXPECT_EQ(t.wait_by_culprit[0], (std::pair<uint32_t, int64_t>{2, 10 * 3 * kMs}));
  EXPECT_EQ(t.compute_ns + t.idle_ns + t.wait_ns + t.transfer_ns, t.span_ns);
}

}  // namespace
}  // namespace commprof
