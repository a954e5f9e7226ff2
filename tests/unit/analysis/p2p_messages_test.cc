// Point-to-point matching and Late Sender / Late Receiver (analysis/match/p2p_messages.h,
// analysis/metrics/p2p_wait.h, docs/metrics.md §5) on tiny multi-rank files written with the real
// Hdf5Writer. Every expected number is worked out by hand in the comment above it. Also the
// communicator membership map (analysis/match/comm_membership.h) on its own.
#include "analysis/match/p2p_messages.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/match/comm_membership.h"
#include "analysis/metrics/p2p_wait.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
using test_support::events::CommCreated;
using test_support::events::P2p;
using test_support::events::Recv;
using test_support::events::Send;
using test_support::events::WaitCall;

constexpr uint16_t kNb = COMMPROF_FLAG_NONBLOCKING;
constexpr uint16_t kRecvHalf = COMMPROF_FLAG_RECV_HALF;

// An MPI_Sendrecv as the collector records it: the send half, then the receive half (RECV_HALF)
// with the source, tag and bytes it got, both over the one call [start, end].
std::vector<commprof_event> Sendrecv(uint64_t start, uint64_t end, int32_t dest, uint32_t send_tag, int32_t source,
                                     uint32_t recv_tag, uint64_t bytes = 16) {
  return {P2p(COMMPROF_OP_SENDRECV, start, end, dest, send_tag, bytes),
          P2p(COMMPROF_OP_SENDRECV, start, end, source, recv_tag, bytes, COMMPROF_COMM_WORLD_ID, kRecvHalf)};
}

// The kept message on `tag` (keep_messages), or a failure.
P2PMessage MessageOnTag(const P2PMatchResult& m, uint32_t tag) {
  for (const P2PMessage& msg : m.messages) {
    if (msg.tag == tag) {
      return msg;
    }
  }
  ADD_FAILURE() << "no message with tag " << tag;
  return {};
}

class P2PMessagesTest : public ::testing::Test {
 protected:
  P2PMatchResult Match(const std::vector<RankData>& ranks, P2PMatchOptions opt = {}) {
    auto r = test_support::WriteProfile(dir_ / ("f" + std::to_string(n_++) + ".h5"), ranks, {.job_id = "job-p2p"});
    if (r == nullptr) return {};
    auto m = MatchP2PMessages(*r, opt);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return m.ok() ? std::move(m.value()) : P2PMatchResult{};
  }
  TempDir dir_{"commprof-p2p"};
  int n_ = 0;
};

// ---- the two formulas ----

TEST(P2PWait, LateSenderIsTheReceiversTimeInItsCallBeforeTheSendWasPosted) {
  EXPECT_EQ(LateSenderWait(700, {100, 1000}), 600);   // posted inside the call
  EXPECT_EQ(LateSenderWait(50, {100, 1000}), 0);      // posted before the receiver arrived
  EXPECT_EQ(LateSenderWait(1500, {100, 1000}), 900);  // "after" the call returned (clock error): capped
}

TEST(P2PWait, LateReceiverOnlyWhileTheSenderWasStillInsideItsCall) {
  EXPECT_EQ(LateReceiverWait(3000, {100, 5000}), 2900);  // rendezvous: the send waited for the post
  EXPECT_EQ(LateReceiverWait(3000, {100, 150}), 0);      // eager: returned before the post
  EXPECT_EQ(LateReceiverWait(3000, {100, 3000}), 0);     // returned exactly at the post
  EXPECT_EQ(LateReceiverWait(50, {100, 5000}), 0);       // receive posted first
}

// ---- matching and charging ----

TEST_F(P2PMessagesTest, LateSenderIsChargedToTheBlockedReceiver) {
  // rank 0 blocks in MPI_Recv(src 1, tag 5) over [100, 1000]; rank 1 posts MPI_Send at 700.
  // Late Sender = min(700, 1000) - 100 = 600 on rank 0. Late Receiver on rank 1: the receive was
  // posted (100) before the send (700): 0. p2p time: rank 0 900, rank 1 10.
  std::vector<RankData> r(2);
  r[0].events = {Recv(100, 1000, 1, 5, 64)};
  r[1].events = {Send(700, 710, 0, 5, 64)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 1u);
  EXPECT_EQ(m.unmatched_sends + m.unmatched_recvs, 0u);
  EXPECT_EQ(m.bytes, 64u);
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].late_sender_wait_ns, 600);
  EXPECT_EQ(m.ranks[0].late_sender_calls, 1u);
  EXPECT_EQ(m.ranks[1].late_receiver_wait_ns, 0);
  EXPECT_EQ(m.late_sender_wait_ns, 600);
  EXPECT_EQ(m.late_receiver_wait_ns, 0);
  EXPECT_EQ(m.ranks[0].p2p_time_ns, 900);
  EXPECT_EQ(m.ranks[1].p2p_time_ns, 10);
  EXPECT_EQ(m.ranks[0].received, 1u);
  EXPECT_EQ(m.ranks[0].bytes_received, 64u);
  EXPECT_EQ(m.ranks[1].sent, 1u);
  EXPECT_EQ(m.ranks[1].bytes_sent, 64u);
  ASSERT_EQ(m.worst.size(), 1u);
  EXPECT_EQ(m.worst[0].src, 1u);
  EXPECT_EQ(m.worst[0].dst, 0u);
  EXPECT_EQ(m.worst[0].late_sender_ns, 600);
}

TEST_F(P2PMessagesTest, LateReceiverIsChargedToARendezvousSendButNotToAnEagerOne) {
  // tag 1, 4 MiB: rank 2 in MPI_Send over [100, 5000]; rank 3 posts MPI_Recv at 3000 (to 5100).
  //   Late Receiver = 3000 - 100 = 2900 on rank 2; Late Sender on rank 3: send posted (100)
  //   before the receive (3000): 0.
  // tag 2, 8 B: rank 2 in MPI_Send over [6000, 6050]; rank 3 posts at 7000. The send returned
  //   before the post (eager): 0. Rank 3 waits for nothing either: 0.
  std::vector<RankData> r(4);
  r[2].events = {Send(100, 5000, 3, 1, 4u << 20), Send(6000, 6050, 3, 2)};
  r[3].events = {Recv(3000, 5100, 2, 1, 4u << 20), Recv(7000, 7010, 2, 2)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 2u);
  EXPECT_EQ(m.ranks[2].late_receiver_wait_ns, 2900);
  EXPECT_EQ(m.ranks[2].late_receiver_calls, 1u);
  EXPECT_EQ(m.ranks[3].late_sender_wait_ns, 0);
  EXPECT_EQ(m.late_receiver_wait_ns, 2900);
  EXPECT_EQ(m.late_sender_wait_ns, 0);
  EXPECT_EQ(m.bytes, (4u << 20) + 8u);
  EXPECT_EQ(m.ranks[2].bytes_sent, (4u << 20) + 8u);
  ASSERT_EQ(m.worst.size(), 1u) << "only messages with a wait are listed";
  EXPECT_EQ(m.worst[0].late_receiver_ns, 2900);
  EXPECT_EQ(m.worst[0].bytes, 4u << 20);
}

TEST_F(P2PMessagesTest, NonBlockingOperationsWaitOnlyInsideTheWaitThatCompletedThem) {
  // tag 9: rank 0 MPI_Irecv posted at 100, completed by MPI_Wait [500, 900]; rank 1 MPI_Isend
  //   posted at 800, completed by MPI_Wait [820, 850].
  //   Late Sender on rank 0 = min(800, 900) - 500 = 300 (from the Wait's entry, not the post at
  //   100: rank 0 was free to compute until 500). Late Receiver on rank 1: receive posted first: 0.
  // tag 4 on thread 1: rank 1 MPI_Isend posted at 1000, MPI_Wait [1200, 3000]; rank 0 MPI_Irecv
  //   posted at 2500, MPI_Wait [2600, 3100].
  //   Late Receiver on rank 1 = 2500 - 1200 = 1300. Late Sender on rank 0: send first: 0.
  // tag 6: rank 0 MPI_Irecv posted at 4000, completed by MPI_Test [4900, 4901]; rank 1 sends at
  //   4500. A Test does not block: no Late Sender (it would be 4500 - 4000 = 500 counted from
  //   the post).
  // p2p time: rank 0 = 400 + 500 + 1 (Wait, Wait, Test); rank 1 = 30 + 1800 + 10.
  std::vector<RankData> r(2);
  r[0].events = {
      WaitCall(COMMPROF_OP_WAIT, 500, 900),   P2p(COMMPROF_OP_RECV, 100, 900, 1, 9, 8, COMMPROF_COMM_WORLD_ID, kNb),
      WaitCall(COMMPROF_OP_WAIT, 2600, 3100), P2p(COMMPROF_OP_RECV, 2500, 3100, 1, 4, 8, COMMPROF_COMM_WORLD_ID, kNb),
      WaitCall(COMMPROF_OP_TEST, 4900, 4901), P2p(COMMPROF_OP_RECV, 4000, 4901, 1, 6, 8, COMMPROF_COMM_WORLD_ID, kNb)};
  r[1].events = {WaitCall(COMMPROF_OP_WAIT, 820, 850),
                 P2p(COMMPROF_OP_SEND, 800, 850, 0, 9, 8, COMMPROF_COMM_WORLD_ID, kNb),
                 WaitCall(COMMPROF_OP_WAIT, 1200, 3000, 1),
                 P2p(COMMPROF_OP_SEND, 1000, 3000, 0, 4, 8, COMMPROF_COMM_WORLD_ID, kNb, 1), Send(4500, 4510, 0, 6)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 3u);
  EXPECT_EQ(m.ranks[0].late_sender_wait_ns, 300);
  EXPECT_EQ(m.ranks[0].late_receiver_wait_ns, 0);
  EXPECT_EQ(m.ranks[1].late_receiver_wait_ns, 1300);
  EXPECT_EQ(m.ranks[1].late_sender_wait_ns, 0);
  EXPECT_EQ(m.ranks[0].p2p_time_ns, 901);
  EXPECT_EQ(m.ranks[1].p2p_time_ns, 1840);
}

TEST_F(P2PMessagesTest, AWaitallCompletingSeveralReceivesIsChargedItsLatestSenderOnce) {
  // rank 0 posts MPI_Irecv(src 1) at 100 and MPI_Irecv(src 2) at 110, then MPI_Waitall [200, 1000].
  // Rank 1 sends at 600, rank 2 at 800. Per message: 600 - 200 = 400 and 800 - 200 = 600. The call
  // waited 600 ns in all, not 1000 (Scalasca's rule for multi-request waits): rank 0 is charged 600.
  std::vector<RankData> r(3);
  r[0].events = {WaitCall(COMMPROF_OP_WAITALL, 200, 1000),
                 P2p(COMMPROF_OP_RECV, 100, 1000, 1, 0, 8, COMMPROF_COMM_WORLD_ID, kNb),
                 P2p(COMMPROF_OP_RECV, 110, 1000, 2, 0, 8, COMMPROF_COMM_WORLD_ID, kNb)};
  r[1].events = {Send(600, 610, 0, 0)};
  r[2].events = {Send(800, 810, 0, 0)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 2u);
  EXPECT_EQ(m.ranks[0].late_sender_wait_ns, 600);
  EXPECT_EQ(m.ranks[0].late_sender_calls, 1u);
  EXPECT_EQ(m.ranks[0].p2p_time_ns, 800) << "the Waitall counted once";
  ASSERT_EQ(m.worst.size(), 2u);
  EXPECT_EQ(m.worst[0].late_sender_ns, 600);
  EXPECT_EQ(m.worst[0].src, 2u);
  EXPECT_EQ(m.worst[1].late_sender_ns, 400);
}

TEST_F(P2PMessagesTest, PeersInASubCommunicatorAreMappedToWorldRanks) {
  // Communicator X = {world 1 as rank 0, world 3 as rank 1}. On X, world 3 sends to peer 0
  // (= world 1) and world 1 receives from peer 1 (= world 3). Taken as world ranks the peers would
  // be world 0 (sends nothing) and world 1 (itself): both would stay unmatched.
  // Rank 3 posts the X send at 400, then a world send (same world ranks, same tag) at 1050.
  // Rank 1 receives the world message first, in [100, 1100], then the X one in [1100, 1200].
  // By communicator: world Late Sender min(1050, 1100) - 100 = 950; X: sent (400) before its
  // receive (1100): 0. Total 950. Ignoring the communicator would pair by order: the first
  // receive with the send at 400 (300) and the second with 1050 (0): 300.
  const uint64_t x = (uint64_t{2} << 32) | 1;
  std::vector<RankData> r(4);
  r[1].events = {CommCreated(x, 0, 2), Recv(100, 1100, 3, 4), Recv(1100, 1200, 1, 4, 8, x)};
  r[3].events = {CommCreated(x, 1, 2), Send(1050, 1060, 1, 4), Send(400, 410, 0, 4, 8, x)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 2u);
  EXPECT_EQ(m.unmatched_sends + m.unmatched_recvs, 0u);
  EXPECT_EQ(m.ranks[1].late_sender_wait_ns, 950);
  EXPECT_EQ(m.ranks[1].late_sender_calls, 1u);
  EXPECT_EQ(m.membership_conflicts, 0u);
}

TEST_F(P2PMessagesTest, TagsKeepTwoMessagesBetweenTheSameRanksApart) {
  // rank 1 sends tag 1 at 100, then tag 2 at 200. Rank 0 receives tag 2 first, in [50, 300],
  // then tag 1 in [300, 400].
  // By tag: tag 2 pairs with the send at 200: Late Sender 200 - 50 = 150; tag 1 with the send at
  // 100, posted before that receive: 0. Total 150. (Pairing by order alone would give
  // 100 - 50 = 50 and 0.)
  std::vector<RankData> r(2);
  r[0].events = {Recv(50, 300, 1, 2, 16), Recv(300, 400, 1, 1, 8)};
  r[1].events = {Send(100, 110, 0, 1, 8), Send(200, 210, 0, 2, 16)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 2u);
  EXPECT_EQ(m.late_sender_wait_ns, 150);
  ASSERT_EQ(m.worst.size(), 1u);
  EXPECT_EQ(m.worst[0].tag, 2u);
  EXPECT_EQ(m.worst[0].bytes, 16u);
}

TEST_F(P2PMessagesTest, MessagesOnOneKeyPairInPostingOrderWhateverTheStoredOrder) {
  // Two messages on the same key (world, 1 -> 0, tag 3): A posted at 100 (8 B), B at 500 (16 B),
  // stored B first (rows are arrival order, not time order). Rank 0 receives in [50, 120] then
  // [130, 520]. In posting order: A with the first receive, Late Sender min(100, 120) - 50 = 50;
  // B with the second, min(500, 520) - 130 = 370. Total 420. (Pairing by stored order would put
  // B with the first receive: min(500, 120) - 50 = 70, and A with the second: 0, total 70.)
  std::vector<RankData> r(2);
  r[0].events = {Recv(50, 120, 1, 3, 8), Recv(130, 520, 1, 3, 16)};
  r[1].events = {Send(500, 505, 0, 3, 16), Send(100, 105, 0, 3, 8)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 2u);
  EXPECT_EQ(m.late_sender_wait_ns, 420);
  ASSERT_EQ(m.worst.size(), 2u);
  EXPECT_EQ(m.worst[0].late_sender_ns, 370);
  EXPECT_EQ(m.worst[0].bytes, 16u);
  EXPECT_EQ(m.worst[1].late_sender_ns, 50);
  EXPECT_EQ(m.worst[1].bytes, 8u);
}

TEST_F(P2PMessagesTest, LeftoversAreCountedByReasonAndListedEarliestFirst) {
  // rank 0: MPI_Send(to 1, tag 7) at 300, never received           -> unmatched send, no_partner
  //         MPI_Send to MPI_PROC_NULL (-2) at 10                     -> proc_null, not unmatched
  //         MPI_Send on an untracked communicator at 200             -> unmatched send, untracked_comm
  //         MPI_Send on a sub-communicator whose members are unknown -> unmatched send, unknown_peer
  // rank 1: MPI_Recv(from 0, tag 8) at 100, never sent              -> unmatched receive, no_partner
  //         MPI_Irecv(MPI_ANY_SOURCE) at 400 still pending (INCOMPLETE, source -1)
  //                                                                  -> unmatched receive, wildcard_source
  //         MPI_Recv from MPI_PROC_NULL at 20                       -> proc_null
  //         one ordinary message (tag 1) that matches, at 500/510.
  const uint64_t untracked = (uint64_t{1} << 63) | (uint64_t{1} << 32) | 1;
  const uint64_t unknown = (uint64_t{1} << 32) | 7;
  std::vector<RankData> r(2);
  commprof_event on_untracked = Send(200, 201, 1, 7);
  on_untracked.comm_id = untracked;
  on_untracked.flags = COMMPROF_FLAG_UNTRACKED_COMM;
  r[0].events = {Send(300, 301, 1, 7), Send(10, 11, -2, 7), on_untracked, Send(250, 251, 1, 7, 8, unknown),
                 Send(510, 511, 1, 1)};
  r[1].events = {Recv(100, 150, 0, 8),
                 P2p(COMMPROF_OP_RECV, 400, 400, COMMPROF_NO_PEER, 0xFFFFFFFFu, 8, COMMPROF_COMM_WORLD_ID,
                     kNb | COMMPROF_FLAG_INCOMPLETE),
                 Recv(20, 21, -2, 0, 0), Recv(500, 520, 0, 1)};
  P2PMatchOptions opt;
  opt.max_unmatched_listed = 4;  // of 5: the latest (the wildcard at 400) is counted, not listed
  P2PMatchResult m = Match(r, opt);
  EXPECT_EQ(m.matched, 1u);
  EXPECT_EQ(m.proc_null, 2u);
  EXPECT_EQ(m.sends, 4u);
  EXPECT_EQ(m.recvs, 3u);
  EXPECT_EQ(m.unmatched_sends, 3u);
  EXPECT_EQ(m.unmatched_recvs, 2u);
  EXPECT_EQ(m.ranks[0].unmatched_sends, 3u);
  EXPECT_EQ(m.ranks[1].unmatched_recvs, 2u);
  EXPECT_EQ(m.unmatched_by_reason[static_cast<size_t>(P2PUnmatchedReason::kNoPartner)], 2u);
  EXPECT_EQ(m.unmatched_by_reason[static_cast<size_t>(P2PUnmatchedReason::kUntrackedComm)], 1u);
  EXPECT_EQ(m.unmatched_by_reason[static_cast<size_t>(P2PUnmatchedReason::kUnknownPeer)], 1u);
  EXPECT_EQ(m.unmatched_by_reason[static_cast<size_t>(P2PUnmatchedReason::kWildcardSource)], 1u);
  // earliest first: recv 100 (no_partner), send 200 (untracked), send 250 (unknown), send 300
  ASSERT_EQ(m.unmatched.size(), 4u);
  EXPECT_EQ(m.unmatched[0].start, 100);
  EXPECT_FALSE(m.unmatched[0].is_send);
  EXPECT_EQ(m.unmatched[0].rank, 1u);
  EXPECT_EQ(m.unmatched[0].tag, 8u);
  EXPECT_EQ(m.unmatched[0].reason, P2PUnmatchedReason::kNoPartner);
  EXPECT_EQ(m.unmatched[1].start, 200);
  EXPECT_EQ(m.unmatched[1].reason, P2PUnmatchedReason::kUntrackedComm);
  EXPECT_EQ(m.unmatched[2].start, 250);
  EXPECT_EQ(m.unmatched[2].reason, P2PUnmatchedReason::kUnknownPeer);
  EXPECT_EQ(m.unmatched[3].start, 300);
  EXPECT_TRUE(m.unmatched[3].is_send);
  EXPECT_EQ(m.unmatched[3].peer, 1);
  EXPECT_EQ(m.unmatched[3].reason, P2PUnmatchedReason::kNoPartner);
  EXPECT_STREQ(P2PUnmatchedReasonName(m.unmatched[1].reason), "untracked_comm");
  // bytes sent: the matched message 8 + the three unmatched sends 8 each (PROC_NULL excluded)
  EXPECT_EQ(m.ranks[0].bytes_sent, 32u);
}

TEST_F(P2PMessagesTest, AlignmentRemovesAClockOffsetThatWouldHideTheLateSender) {
  // Reference time: rank 0 in MPI_Recv [10.0 ms, 10.9 ms]; rank 1 posts MPI_Send at 10.4 ms.
  // Rank 1's clock is 5 ms behind (local = ref - 5 ms), its model offset +5 ms.
  // Aligned: Late Sender = 10.4 - 10.0 ms = 400 us.
  // Raw: the send is "posted" at 5.4 ms, before the receive: no Late Sender; and the send
  // "returned" (5.41 ms) before the receive was posted: no Late Receiver either.
  std::vector<RankData> r(2);
  r[0].events = {Recv(10'000'000, 10'900'000, 1, 0)};
  r[0].points = {{1'000'000, 0, 0}, {20'000'000, 0, 0}};
  r[1].events = {Send(5'400'000, 5'410'000, 0, 0)};
  r[1].points = {{1'000'000, 5'000'000, 300}, {20'000'000, 5'000'000, 300}};
  P2PMatchResult aligned = Match(r);
  EXPECT_EQ(aligned.matched, 1u);
  EXPECT_EQ(aligned.late_sender_wait_ns, 400'000);
  ASSERT_EQ(aligned.worst.size(), 1u);
  EXPECT_EQ(aligned.worst[0].send_start, 10'400'000);
  P2PMatchOptions raw_opt;
  raw_opt.aligned = false;
  P2PMatchResult raw = Match(r, raw_opt);
  EXPECT_EQ(raw.matched, 1u);
  EXPECT_EQ(raw.late_sender_wait_ns, 0);
  EXPECT_EQ(raw.late_receiver_wait_ns, 0);
}

TEST_F(P2PMessagesTest, AnOlderFilesSendrecvIsASendWithTheReceiversByteCountAndNoLateReceiver) {
  // Files from before the receive half was recorded: one SENDRECV event per call, no RECV_HALF.
  // rank 0 MPI_Sendrecv(dest 1, tag 6) over [100, 900], recorded bytes 8 + 8 = 16; rank 1
  // MPI_Recv(src 0, tag 6) [500, 600] gets 8 B. One message of 8 B. Under the MPI_Send rule rank 0
  // would be charged 500 - 100 = 400 Late Receiver, but a Sendrecv also waits for its own receive
  // in that call: 0. Rank 1: the send was posted first: no Late Sender.
  // rank 1 also does an MPI_Sendrecv(dest 0, tag 2) that rank 0 never receives: an unmatched
  // send, counted as a Sendrecv, adding no bytes sent (its 16 B mix both directions).
  std::vector<RankData> r(2);
  r[0].events = {P2p(COMMPROF_OP_SENDRECV, 100, 900, 1, 6, 16)};
  r[1].events = {Recv(500, 600, 0, 6, 8), P2p(COMMPROF_OP_SENDRECV, 1000, 1100, 0, 2, 16)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 1u);
  EXPECT_EQ(m.bytes, 8u);
  EXPECT_EQ(m.ranks[0].bytes_sent, 8u);
  EXPECT_EQ(m.ranks[0].late_receiver_wait_ns, 0);
  EXPECT_EQ(m.ranks[1].late_sender_wait_ns, 0);
  EXPECT_EQ(m.unmatched_sends, 1u);
  EXPECT_EQ(m.unmatched_sendrecv, 1u);
  EXPECT_EQ(m.ranks[1].bytes_sent, 0u);
  EXPECT_EQ(m.ranks[1].sent, 1u);
  EXPECT_EQ(m.ranks[0].p2p_time_ns, 800);
  EXPECT_EQ(m.ranks[1].p2p_time_ns, 200);
}

TEST_F(P2PMessagesTest, AnOlderFilesSendrecvRingLeavesEverySendUnmatched) {
  // The ring below, recorded the old way (one event each, bytes 16 + 16): four sends whose
  // receives were not recorded. All unmatched (no_partner), all Sendrecv, no bytes sent, no wait;
  // each call's time counted once.
  std::vector<RankData> r(4);
  for (int k = 0; k < 4; ++k) {
    r[k].events = {P2p(COMMPROF_OP_SENDRECV, 100 * (k + 1), 1000, (k + 1) % 4, k, 32)};
  }
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 0u);
  EXPECT_EQ(m.sends, 4u);
  EXPECT_EQ(m.recvs, 0u);
  EXPECT_EQ(m.unmatched_sends, 4u);
  EXPECT_EQ(m.unmatched_sendrecv, 4u);
  EXPECT_EQ(m.unmatched_recvs, 0u);
  EXPECT_EQ(m.unmatched_by_reason[static_cast<size_t>(P2PUnmatchedReason::kNoPartner)], 4u);
  EXPECT_EQ(m.late_sender_wait_ns + m.late_receiver_wait_ns, 0);
  EXPECT_EQ(m.ranks[0].bytes_sent, 0u);
  EXPECT_EQ(m.ranks[0].p2p_time_ns, 900);
}

TEST_F(P2PMessagesTest, ASendrecvRingMatchesBothHalvesAndChargesEachCallOnce) {
  // Rank k: MPI_Sendrecv(dest k+1, tag k; source k-1, tag k-1), 16 B each way, over
  // [100 (k + 1), 1000]: entries 100, 200, 300, 400. Four messages k -> k+1, none left over.
  // Late Sender (receive half, §5.2): rank 0 gets rank 3's message, sent at 400: 400 - 100 = 300;
  //   ranks 1-3 get theirs from a rank that entered earlier: 0.
  // Late Receiver (send half, §5.3): rank k's message is received by rank k+1's call entered 100
  //   later, while rank k is still inside: 100 for ranks 0, 1, 2; rank 3's receiver (rank 0)
  //   entered first: 0.
  // Once per call (§5.4): rank 0 is charged its Late Sender 300 and not its Late Receiver 100;
  //   ranks 1 and 2 their Late Receiver 100. Totals: Late Sender 300, Late Receiver 200.
  std::vector<RankData> r(4);
  for (int k = 0; k < 4; ++k) {
    r[k].events = Sendrecv(100 * (k + 1), 1000, (k + 1) % 4, k, (k + 3) % 4, (k + 3) % 4);
  }
  P2PMatchOptions opt;
  opt.keep_messages = true;
  P2PMatchResult m = Match(r, opt);
  EXPECT_EQ(m.matched, 4u);
  EXPECT_EQ(m.sends, 4u);
  EXPECT_EQ(m.recvs, 4u);
  EXPECT_EQ(m.unmatched_sends + m.unmatched_recvs + m.unmatched_sendrecv, 0u);
  EXPECT_EQ(m.bytes, 64u) << "each message counts its send half's 16 B";
  EXPECT_EQ(m.late_sender_wait_ns, 300);
  EXPECT_EQ(m.late_receiver_wait_ns, 200);
  EXPECT_EQ(m.ranks[0].late_sender_wait_ns, 300);
  EXPECT_EQ(m.ranks[0].late_sender_calls, 1u);
  EXPECT_EQ(m.ranks[0].late_receiver_wait_ns, 0);
  EXPECT_EQ(m.ranks[0].late_receiver_calls, 0u);
  EXPECT_EQ(m.ranks[1].late_receiver_wait_ns, 100);
  EXPECT_EQ(m.ranks[2].late_receiver_wait_ns, 100);
  EXPECT_EQ(m.ranks[3].late_sender_wait_ns + m.ranks[3].late_receiver_wait_ns, 0);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(m.ranks[k].sent, 1u) << k;
    EXPECT_EQ(m.ranks[k].received, 1u) << k;
    EXPECT_EQ(m.ranks[k].bytes_sent, 16u) << k;
    EXPECT_EQ(m.ranks[k].bytes_received, 16u) << k;
    EXPECT_EQ(m.ranks[k].p2p_time_ns, 1000 - 100 * (k + 1)) << "one call, counted once: " << k;
  }
  ASSERT_EQ(m.messages.size(), 4u);
  for (uint32_t k = 0; k < 4; ++k) {
    P2PMessage msg = MessageOnTag(m, k);
    EXPECT_EQ(msg.src, k);
    EXPECT_EQ(msg.dst, (k + 1) % 4);
    EXPECT_EQ(msg.send_op, COMMPROF_OP_SENDRECV);
    EXPECT_EQ(msg.send_flags & kRecvHalf, 0);
    EXPECT_EQ(msg.recv_flags & kRecvHalf, kRecvHalf);
    EXPECT_EQ(msg.send_call_start, 100 * (k + 1));
    EXPECT_EQ(msg.recv_call_start, 100 * ((k + 1) % 4 + 1));
  }
  EXPECT_EQ(MessageOnTag(m, 3).late_sender_ns, 300);
  EXPECT_EQ(MessageOnTag(m, 0).late_receiver_ns, 100) << "per message, before the per-call choice";
}

TEST_F(P2PMessagesTest, ASendrecvWaitingOnBothHalvesIsChargedItsLateSenderOnly) {
  // rank 0 MPI_Sendrecv(dest 1, tag 1; source 1, tag 2) over [100, 1000]. Rank 1 posts MPI_Recv
  // (tag 1) at 400 and MPI_Send (tag 2) at 600. Receive half: Late Sender 600 - 100 = 500. Send
  // half: Late Receiver 400 - 100 = 300. One blocked interval: charged 500 as Late Sender, no Late
  // Receiver, its 900 ns of p2p time once.
  std::vector<RankData> r(2);
  r[0].events = Sendrecv(100, 1000, 1, 1, 1, 2, 8);
  r[1].events = {Recv(400, 1100, 0, 1, 8), Send(600, 610, 0, 2, 8)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 2u);
  EXPECT_EQ(m.ranks[0].late_sender_wait_ns, 500);
  EXPECT_EQ(m.ranks[0].late_sender_calls, 1u);
  EXPECT_EQ(m.ranks[0].late_receiver_wait_ns, 0);
  EXPECT_EQ(m.ranks[0].late_receiver_calls, 0u);
  EXPECT_EQ(m.ranks[0].p2p_time_ns, 900);
  EXPECT_EQ(m.late_sender_wait_ns, 500);
  EXPECT_EQ(m.late_receiver_wait_ns, 0);
  EXPECT_TRUE(m.messages.empty()) << "kept only when asked";
}

TEST_F(P2PMessagesTest, CallStartsAreWhereEachSideBlockedToCompleteItsOperation) {
  // tag 1: rank 1 MPI_Send [700, 710], rank 0 MPI_Recv [100, 1000]: the blocking calls, 700 / 100.
  // tag 2: rank 1 MPI_Isend posted at 2000, completed by MPI_Wait [2500, 2600] (2500); rank 0
  //   MPI_Irecv posted at 1900, completed by MPI_Test [2700, 2701]: no blocking call.
  // tag 3: rank 1 MPI_Isend posted at 3000, freed (INCOMPLETE): none; rank 0 MPI_Irecv posted at
  //   2900, completed with another by MPI_Waitall [3200, 3400] (3200).
  // tag 4: rank 0 MPI_Irecv posted at 2950 and completed by the same Waitall (3200); rank 1
  //   MPI_Isend posted at 3100 ending at 3150, a time no Wait* call of rank 1 ends at: out of sight.
  std::vector<RankData> r(2);
  r[0].events = {Recv(100, 1000, 1, 1),
                 WaitCall(COMMPROF_OP_TEST, 2700, 2701),
                 P2p(COMMPROF_OP_RECV, 1900, 2701, 1, 2, 8, COMMPROF_COMM_WORLD_ID, kNb),
                 WaitCall(COMMPROF_OP_WAITALL, 3200, 3400),
                 P2p(COMMPROF_OP_RECV, 2900, 3400, 1, 3, 8, COMMPROF_COMM_WORLD_ID, kNb),
                 P2p(COMMPROF_OP_RECV, 2950, 3400, 1, 4, 8, COMMPROF_COMM_WORLD_ID, kNb)};
  r[1].events = {Send(700, 710, 0, 1), WaitCall(COMMPROF_OP_WAIT, 2500, 2600),
                 P2p(COMMPROF_OP_SEND, 2000, 2600, 0, 2, 8, COMMPROF_COMM_WORLD_ID, kNb),
                 P2p(COMMPROF_OP_SEND, 3000, 3050, 0, 3, 8, COMMPROF_COMM_WORLD_ID, kNb | COMMPROF_FLAG_INCOMPLETE),
                 P2p(COMMPROF_OP_SEND, 3100, 3150, 0, 4, 8, COMMPROF_COMM_WORLD_ID, kNb)};
  P2PMatchOptions opt;
  opt.keep_messages = true;
  P2PMatchResult m = Match(r, opt);
  EXPECT_EQ(m.matched, 4u);
  ASSERT_EQ(m.messages.size(), 4u);
  EXPECT_EQ(MessageOnTag(m, 1).send_call_start, 700);
  EXPECT_EQ(MessageOnTag(m, 1).recv_call_start, 100);
  EXPECT_EQ(MessageOnTag(m, 2).send_call_start, 2500);
  EXPECT_EQ(MessageOnTag(m, 2).recv_call_start, kNoCallStart);
  EXPECT_EQ(MessageOnTag(m, 3).send_call_start, kNoCallStart);
  EXPECT_EQ(MessageOnTag(m, 3).recv_call_start, 3200);
  EXPECT_EQ(MessageOnTag(m, 4).send_call_start, kNoCallStart);
  EXPECT_EQ(MessageOnTag(m, 4).recv_call_start, 3200);
  EXPECT_EQ(kNoCallStart, std::numeric_limits<int64_t>::min());
}

TEST_F(P2PMessagesTest, AnIncompleteOperationMatchesButIsChargedNoWait) {
  // rank 1 MPI_Isend(tag 0) posted at 100 and freed (INCOMPLETE, ends at the free, 150); rank 0
  // MPI_Recv [50, 400]. The pair matches (the message was sent); Late Sender 100 - 50 = 50 on rank 0;
  // rank 1 never blocked for it: no wait, no p2p time.
  std::vector<RankData> r(2);
  r[0].events = {Recv(50, 400, 1, 0)};
  r[1].events = {P2p(COMMPROF_OP_SEND, 100, 150, 0, 0, 8, COMMPROF_COMM_WORLD_ID, kNb | COMMPROF_FLAG_INCOMPLETE)};
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched, 1u);
  EXPECT_EQ(m.ranks[0].late_sender_wait_ns, 50);
  EXPECT_EQ(m.ranks[1].late_receiver_wait_ns, 0);
  EXPECT_EQ(m.ranks[1].p2p_time_ns, 0);
}

TEST_F(P2PMessagesTest, AFileWithoutPointToPointGivesZerosForEveryRank) {
  std::vector<RankData> r(3);
  P2PMatchResult m = Match(r);
  EXPECT_EQ(m.matched + m.unmatched_sends + m.unmatched_recvs + m.proc_null, 0u);
  ASSERT_EQ(m.ranks.size(), 3u);
  EXPECT_EQ(m.ranks[2].rank, 2u);
  EXPECT_TRUE(m.unmatched.empty());
  EXPECT_TRUE(m.worst.empty());
}

// ---- communicator membership ----

TEST(CommMembership, MapsLocalAndWorldRanksBothWaysFromCreationEvents) {
  const uint64_t x = (uint64_t{3} << 32) | 1;
  CommMembership c(4);
  EXPECT_TRUE(c.Add(CommCreated(x, 0, 2), 2));
  EXPECT_TRUE(c.Add(CommCreated(x, 1, 2), 0));
  EXPECT_FALSE(c.Add(Send(1, 2, 0, 0), 1)) << "not a creation event";
  EXPECT_EQ(c.WorldRank(x, 0), 2u);
  EXPECT_EQ(c.WorldRank(x, 1), 0u);
  EXPECT_EQ(c.WorldRank(x, 2), std::nullopt);
  EXPECT_EQ(c.LocalRank(x, 0), 1);
  EXPECT_EQ(c.LocalRank(x, 1), std::nullopt) << "world 1 is not a member";
  EXPECT_EQ(c.Size(x), 2u);
  EXPECT_TRUE(c.Known(x));
  // MPI_COMM_WORLD is implicit: identity within the world size
  EXPECT_EQ(c.WorldRank(COMMPROF_COMM_WORLD_ID, 3), 3u);
  EXPECT_EQ(c.WorldRank(COMMPROF_COMM_WORLD_ID, 4), std::nullopt);
  EXPECT_EQ(c.LocalRank(COMMPROF_COMM_WORLD_ID, 1), 1);
  EXPECT_EQ(c.Size(COMMPROF_COMM_WORLD_ID), 4u);
  EXPECT_EQ(c.Size(x + 1), 0u);
  EXPECT_FALSE(c.Known(x + 1));
  EXPECT_EQ(c.conflicts(), 0u);
  EXPECT_EQ(c.communicators(), 1u);
}

TEST(CommMembership, ContradictingClaimsAreCountedAndTheFirstOneKept) {
  const uint64_t x = (uint64_t{1} << 32) | 1;
  CommMembership c(4);
  EXPECT_TRUE(c.Add(CommCreated(x, 0, 2), 0));
  EXPECT_TRUE(c.Add(CommCreated(x, 0, 2), 0));  // the same claim again: harmless
  EXPECT_EQ(c.conflicts(), 0u);
  EXPECT_TRUE(c.Add(CommCreated(x, 0, 2), 3));  // another world rank as local 0
  EXPECT_TRUE(c.Add(CommCreated(x, 1, 3), 1));  // another size
  EXPECT_TRUE(c.Add(CommCreated(x, 5, 2), 2));  // a local rank outside the size
  EXPECT_EQ(c.conflicts(), 3u);
  EXPECT_EQ(c.WorldRank(x, 0), 0u);
  EXPECT_EQ(c.Size(x), 2u);
  EXPECT_EQ(c.WorldRank(x, 1), std::nullopt);
  commprof_event untracked = CommCreated(x + 1, 0, 2);
  untracked.flags = COMMPROF_FLAG_UNTRACKED_COMM;
  EXPECT_FALSE(c.Add(untracked, 0)) << "rank-local ids say nothing about other ranks";
  EXPECT_FALSE(c.Known(x + 1));
}

}  // namespace
}  // namespace commprof
