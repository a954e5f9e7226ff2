// hang::Diagnose on hand-built inputs whose truth is known: every category of docs/hangs.md.
#include "analysis/hang/hang_diagnosis.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace commprof::hang {
namespace {

constexpr uint64_t kSec = 1'000'000'000ull;
constexpr uint64_t kNow = 1000 * kSec;  // every rank's local now in these inputs
constexpr uint64_t kWorld = COMMPROF_COMM_WORLD_ID;

commprof_event Coll(uint8_t op, uint64_t comm, uint64_t seq, uint64_t bytes = 1024, int32_t root = -1,
                    uint8_t dt = COMMPROF_DT_FLOAT32, uint8_t red = COMMPROF_RED_SUM) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_COLLECTIVE;
  e.subtype = op;
  e.comm_id = comm;
  e.seq = seq;
  e.bytes = op == COMMPROF_OP_BARRIER ? 0 : bytes;
  e.peer = root;
  e.datatype = op == COMMPROF_OP_BARRIER ? uint8_t{COMMPROF_DT_NONE} : dt;
  e.reduce_op = red;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

commprof_event Nccl(uint8_t op, uint64_t comm, uint64_t seq, uint64_t bytes = 4096) {
  commprof_event e = Coll(op, comm, seq, bytes);
  e.kind = COMMPROF_KIND_NCCL_COLLECTIVE;
  e.reduce_op = 0x32;  // algorithm/protocol, not a reduction: must never be compared
  e.device = 0;
  return e;
}

commprof_event P2p(uint8_t op, uint64_t comm, int32_t peer, uint32_t tag) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_P2P;
  e.subtype = op;
  e.comm_id = comm;
  e.peer = peer;
  e.correlation = tag;
  e.bytes = 8;
  return e;
}

// Builds a HangInput rank by rank.
class Job {
 public:
  explicit Job(uint32_t n) {
    in_.world_size = n;
    in_.source = "live";
    in_.timeout_s = 10;
    for (uint32_t r = 0; r < n; ++r) {
      RankSnapshot s;
      s.rank = r;
      s.has_state = true;
      s.state.local_now_ns = kNow;
      s.state.last_completion_ns = kNow - 20 * kSec;
      s.state.comms.push_back({kWorld, n, r});
      in_.ranks.push_back(s);
    }
  }
  RankSnapshot& R(uint32_t r) { return in_.ranks[r]; }
  // Rank r entered `e` `age_s` seconds ago and is still in it.
  Job& In(uint32_t r, commprof_event e, double age_s, uint32_t stack = 0) {
    e.start_ns = e.end_ns = kNow - static_cast<uint64_t>(age_s * kSec);
    R(r).state.inflight.push_back({e, stack});
    return *this;
  }
  Job& Done(uint32_t r, commprof_event e) {
    e.start_ns = kNow - 30 * kSec;
    e.end_ns = e.start_ns + 1000;
    R(r).state.recent.push_back(e);
    return *this;
  }
  // Every rank in `ranks` completed collectives 0..last on the comm (MPI allreduce).
  Job& History(const std::vector<uint32_t>& ranks, uint64_t comm, uint64_t last) {
    for (uint32_t r : ranks) {
      for (uint64_t s = 0; s <= last; ++s) {
        Done(r, Coll(COMMPROF_OP_ALLREDUCE, comm, s));
      }
    }
    return *this;
  }
  Job& Member(uint32_t r, uint64_t comm, uint32_t size, uint32_t rank_in) {
    R(r).state.comms.push_back({comm, size, rank_in});
    return *this;
  }
  std::vector<uint32_t> All() const {
    std::vector<uint32_t> v;
    for (uint32_t r = 0; r < in_.world_size; ++r) {
      v.push_back(r);
    }
    return v;
  }
  HangInput in_;
};

const CommFinding& Only(const HangReport& r) {
  EXPECT_EQ(r.comms.size(), 1u) << RenderText(r);
  return r.comms.front();
}

const Mismatch* FindMismatch(const CommFinding& f, const std::string& kind) {
  for (const Mismatch& m : f.mismatches) {
    if (m.kind == kind) {
      return &m;
    }
  }
  return nullptr;
}

TEST(HangDiagnosis, HealthyInputHasNoHangAndNoCulprits) {
  Job j(4);
  j.History(j.All(), kWorld, 10);
  HangReport r = Diagnose(j.in_);
  EXPECT_FALSE(r.hang);
  EXPECT_TRUE(r.culprits.empty());
  EXPECT_TRUE(r.comms.empty());
  EXPECT_TRUE(r.p2p.empty());
  EXPECT_EQ(r.ranks.size(), 4u);
  EXPECT_NE(RenderText(r).find("hang: none"), std::string::npos);
}

TEST(HangDiagnosis, SkippedAllreduceBlamesTheRankInTheBarrierAsTypeMismatch) {
  Job j(4);
  j.History(j.All(), kWorld, 40);
  for (uint32_t r : {0u, 1u, 2u}) {
    j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 41), 12.5 - r);
  }
  j.In(3, Coll(COMMPROF_OP_BARRIER, kWorld, 41), 12.0);
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.comm_name, "MPI_COMM_WORLD");
  EXPECT_EQ(f.seq, 41u);
  EXPECT_EQ(f.op, "MPI_Allreduce");
  EXPECT_EQ(f.kind, "mismatch");
  const Mismatch* m = FindMismatch(f, "COLLECTIVE_TYPE");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->sides.size(), 2u);
  EXPECT_EQ(m->sides[0].value, "MPI_Allreduce");
  EXPECT_EQ(m->sides[0].ranks, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(m->sides[1].value, "MPI_Barrier");
  EXPECT_EQ(m->sides[1].ranks, std::vector<uint32_t>{3});
  // No size/dtype comparison between different types.
  EXPECT_EQ(f.mismatches.size(), 1u);
  ASSERT_EQ(f.waiting.size(), 4u);
  EXPECT_DOUBLE_EQ(f.waiting[0].waiting_s, 12.5);
  EXPECT_DOUBLE_EQ(f.waiting[2].waiting_s, 10.5);
  EXPECT_EQ(r.verdict,
            "rank 3 never entered MPI_Allreduce #41 on MPI_COMM_WORLD (it is in MPI_Barrier #41): collective type "
            "mismatch");
}

TEST(HangDiagnosis, BcastRootMismatchSeenAgainstCompletedHistory) {
  // Ranks 0 and 1 completed Bcast #7 with root 0 (their copies are in `recent`); rank 2 is still in
  // it with root 0; rank 3 called it with root 1 and waits for rank 1's data forever.
  Job j(4);
  j.History(j.All(), kWorld, 6);
  j.Done(0, Coll(COMMPROF_OP_BCAST, kWorld, 7, 64, 0)).Done(1, Coll(COMMPROF_OP_BCAST, kWorld, 7, 64, 0));
  j.In(0, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 8), 5).In(1, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 8), 5);
  j.In(2, Coll(COMMPROF_OP_BCAST, kWorld, 7, 64, 0), 6).In(3, Coll(COMMPROF_OP_BCAST, kWorld, 7, 64, 1), 6);
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.seq, 7u);
  EXPECT_EQ(f.op, "MPI_Bcast");
  EXPECT_EQ(f.completed, (std::vector<uint32_t>{0, 1}));
  ASSERT_EQ(f.waiting.size(), 2u);
  const Mismatch* m = FindMismatch(f, "ROOT");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->sides[0].value, "root 0");
  EXPECT_EQ(m->sides[0].ranks, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(m->sides[1].value, "root 1");
  EXPECT_EQ(m->sides[1].ranks, std::vector<uint32_t>{3});
  EXPECT_EQ(FindMismatch(f, "SIZE"), nullptr);
  EXPECT_NE(r.verdict.find("MPI_Bcast #7 on MPI_COMM_WORLD: root mismatch (ranks 0,1,2: root 0; rank 3: root 1)"),
            std::string::npos)
      << r.verdict;
}

TEST(HangDiagnosis, RankInRecvFromAPeerInTheBarrierIsTheCulpritWithItsWaitFor) {
  Job j(4);
  j.History(j.All(), kWorld, 3);
  for (uint32_t r : {1u, 2u, 3u}) {
    j.In(r, Coll(COMMPROF_OP_BARRIER, kWorld, 4), 9);
  }
  j.In(0, P2p(COMMPROF_OP_RECV, kWorld, 1, 7), 12.3);
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{0});
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.kind, "never_entered");
  ASSERT_EQ(f.not_entered.size(), 1u);
  EXPECT_EQ(f.not_entered[0].rank, 0u);
  EXPECT_EQ(f.not_entered[0].state, "in_other_op");
  EXPECT_EQ(f.not_entered[0].where, "in MPI_Recv from rank 1 tag 7 on MPI_COMM_WORLD for 12.3 s");
  ASSERT_EQ(r.p2p.size(), 1u);
  EXPECT_EQ(r.p2p[0].rank, 0u);
  EXPECT_EQ(r.p2p[0].peer_world, 1);
  EXPECT_EQ(r.p2p[0].tag, 7u);
  EXPECT_EQ(r.p2p[0].peer_doing, "in MPI_Barrier #4 on MPI_COMM_WORLD for 9.0 s");
  EXPECT_EQ(r.verdict,
            "rank 0 never entered MPI_Barrier #4 on MPI_COMM_WORLD (it is in MPI_Recv from rank 1 tag 7 on "
            "MPI_COMM_WORLD for 12.3 s)");
}

TEST(HangDiagnosis, RankFinishedEarlyIsNamedFinished) {
  Job j(4);
  j.History(j.All(), kWorld, 2);
  for (uint32_t r : {0u, 1u, 2u}) {
    j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 3), 4);
  }
  j.R(3).condition = RankCondition::kFinished;
  j.R(3).end_reason = "bye";
  j.R(3).has_state = false;
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  const CommFinding& f = Only(r);
  ASSERT_EQ(f.not_entered.size(), 1u);
  EXPECT_EQ(f.not_entered[0].state, "finished");
  EXPECT_EQ(f.not_entered[0].where, "finished (bye)");
  EXPECT_EQ(r.ranks[3].condition, "finished");
  EXPECT_FALSE(r.ranks[3].answered);
}

TEST(HangDiagnosis, FinishedRankWithItsEventsIsStillFinished) {
  // The file path: a finished rank has its events (state) but no in-flight call.
  Job j(4);
  j.History(j.All(), kWorld, 2);
  for (uint32_t r : {0u, 1u, 2u}) {
    j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 3), 4);
  }
  j.R(3).condition = RankCondition::kFinished;
  j.R(3).end_reason = "MPI_Finalize";
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  EXPECT_EQ(Only(r).not_entered.at(0).where, "finished (MPI_Finalize)");
}

TEST(HangDiagnosis, DeadRankIsTheCulprit) {
  Job j(4);
  j.History(j.All(), kWorld, 2);
  for (uint32_t r : {0u, 2u, 3u}) {
    j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 3), 4);
  }
  j.R(1).condition = RankCondition::kDied;
  j.R(1).end_reason = "disconnected without a bye";
  j.R(1).has_state = false;
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{1});
  EXPECT_EQ(Only(r).not_entered.at(0).state, "died");
  EXPECT_NE(r.verdict.find("rank 1 never entered MPI_Allreduce #3 on MPI_COMM_WORLD (died (disconnected"),
            std::string::npos)
      << r.verdict;
}

// From a file, a rank killed before its shipper sent anything has a state with no records (the
// others completed allreduces #0-#10, which need every member, and wait in #11), or only its older
// ones (records up to #5 shipped, the rest lost in its rings). Neither may pull the stuck operation
// below what the living ranks show: the verdict is #11, named, not "#0" with no operation name.
TEST(HangDiagnosis, DeadRankWhoseLastRecordsDiedWithItDoesNotMoveTheStuckOperation) {
  for (const uint64_t shipped_up_to : {UINT64_MAX, uint64_t{5}}) {
    SCOPED_TRACE(shipped_up_to);
    Job j(4);
    j.in_.source = "file";
    j.History({0, 1, 2}, kWorld, 10);
    if (shipped_up_to != UINT64_MAX) {
      j.History({3}, kWorld, shipped_up_to);
    }
    for (uint32_t r : {0u, 1u, 2u}) {
      j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 11), 1);
    }
    j.R(3).condition = RankCondition::kDied;
    j.R(3).end_reason = "connection closed";
    HangReport r = Diagnose(j.in_);
    const CommFinding& f = Only(r);
    EXPECT_EQ(f.seq, 11u);
    EXPECT_EQ(f.op, "MPI_Allreduce");
    EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
    EXPECT_EQ(f.waiting.size(), 3u);
    ASSERT_EQ(f.not_entered.size(), 1u);
    EXPECT_EQ(f.not_entered[0].state, "died");
    EXPECT_NE(r.verdict.find("rank 3 never entered MPI_Allreduce #11 on MPI_COMM_WORLD (died"), std::string::npos)
        << r.verdict;
  }
  // A dead rank's records stand where the living completed without it: rank 3 shipped everything
  // up to #4, the others completed a broadcast #5 from root 0 (which needs no rank 3) and wait in
  // a barrier #6. Rank 3 never entered the broadcast.
  {
    Job j(4);
    j.in_.source = "file";
    j.History(j.All(), kWorld, 4);
    for (uint32_t r : {0u, 1u, 2u}) {
      j.Done(r, Coll(COMMPROF_OP_BCAST, kWorld, 5, 4096, 0));
      j.In(r, Coll(COMMPROF_OP_BARRIER, kWorld, 6), 1);
    }
    j.R(3).condition = RankCondition::kDied;
    HangReport r = Diagnose(j.in_);
    const CommFinding& f = Only(r);
    EXPECT_EQ(f.seq, 5u) << RenderText(r);
    EXPECT_EQ(f.op, "MPI_Bcast");
    EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  }
  // When every member died, their records are all there is: the lowest still counts.
  Job j(2);
  j.in_.source = "file";
  j.History({0}, kWorld, 3);
  j.In(0, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 4), 1);
  for (uint32_t r : {0u, 1u}) {
    j.R(r).condition = RankCondition::kDied;
  }
  j.History({1}, kWorld, 1);
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(Only(r).seq, 2u) << RenderText(r);
}

// The count-mismatch crash as the file shows it: rank 2 died, rank 3 waits with twice the bytes.
// Both are culprits of the one finding; rank 3 waiting in it is not "held up" behind rank 2.
TEST(HangDiagnosis, MismatchCulpritWaitingBesideADeadRankIsNotHeldUpByIt) {
  Job j(4);
  j.History(j.All(), kWorld, 1);
  j.In(0, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 2, 1024), 4).In(1, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 2, 1024), 4);
  j.In(3, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 2, 2048), 4);
  j.R(2).condition = RankCondition::kDied;
  j.R(2).end_reason = "connection closed";
  j.R(2).has_state = false;
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(Only(r).kind, "never_entered+mismatch");
  EXPECT_EQ(r.culprits, (std::vector<uint32_t>{2, 3}));
  EXPECT_TRUE(r.consequences.empty());
}

// Rank 3 skipped an MPI_Comm_split (collective over the world) and waits in the barrier after it;
// the others are in the split. The split takes the world's next number: a type mismatch naming
// rank 3, not "ranks 0,1,2 never entered the barrier".
TEST(HangDiagnosis, RankSkippingACommSplitIsATypeMismatchAgainstTheSplit) {
  Job j(4);
  j.History(j.All(), kWorld, 4);
  for (uint32_t r : {0u, 1u, 2u}) {
    commprof_event e{};
    e.kind = COMMPROF_KIND_MPI_COMM;
    e.subtype = COMMPROF_OP_COMM_SPLIT;
    e.comm_id = kWorld;  // the parent, as the collector publishes it
    e.peer = COMMPROF_NO_PEER;
    j.In(r, e, 5);
  }
  j.In(3, Coll(COMMPROF_OP_BARRIER, kWorld, 5), 5);
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.seq, 5u);
  EXPECT_EQ(f.op, "MPI_Comm_split");
  EXPECT_EQ(f.kind, "mismatch");
  ASSERT_EQ(f.mismatches.size(), 1u);
  EXPECT_EQ(f.mismatches[0].kind, "COLLECTIVE_TYPE");
  EXPECT_EQ(f.mismatches[0].sides[1].value, "MPI_Barrier");
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  EXPECT_NE(r.ranks[0].doing.find("MPI_Comm_split #5 on MPI_COMM_WORLD"), std::string::npos) << r.ranks[0].doing;
}

TEST(HangDiagnosis, NoAnswerRankIsBlamedOnlyWhenNothingElseExplains) {
  Job j(4);
  j.History(j.All(), kWorld, 2);
  for (uint32_t r : {0u, 1u, 3u}) {
    j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 3), 4);
  }
  j.R(2).condition = RankCondition::kNoAnswer;
  j.R(2).has_state = false;
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{2});
  EXPECT_EQ(Only(r).not_entered.at(0).state, "no_answer");

  // With a rank that did answer and is elsewhere, the silent one is listed but not blamed.
  Job k(4);
  k.History(k.All(), kWorld, 2);
  k.In(0, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 3), 4).In(1, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 3), 4);
  k.R(2).condition = RankCondition::kNoAnswer;
  k.R(2).has_state = false;
  HangReport r2 = Diagnose(k.in_);  // rank 3 idle
  EXPECT_EQ(r2.culprits, std::vector<uint32_t>{3});
  EXPECT_EQ(Only(r2).not_entered.size(), 2u);
}

TEST(HangDiagnosis, SubCommunicatorHangDoesNotBlameTheWorld) {
  // Ranks 0-3 in comm A (size 4, all of the world's first half of 8); rank 2 never enters its
  // Allreduce #5; the world's collectives are all complete.
  const uint64_t kA = (uint64_t{1} << 32) | 1;
  Job j(8);
  j.History(j.All(), kWorld, 9);
  for (uint32_t r = 0; r < 4; ++r) {
    j.Member(r, kA, 4, r);
    for (uint64_t s = 0; s <= 4; ++s) {
      j.Done(r, Coll(COMMPROF_OP_ALLREDUCE, kA, s));
    }
  }
  for (uint32_t r : {0u, 1u, 3u}) {
    j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kA, 5), 3);
  }
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{2});
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.comm_id, kA);
  EXPECT_EQ(f.comm_name, "comm 0x100000001");
  EXPECT_EQ(f.size, 4u);
  EXPECT_EQ(f.unknown_members, 0u);
  EXPECT_EQ(f.not_entered.at(0).state, "idle");
}

TEST(HangDiagnosis, TwoIndependentHangsAreBothNamed) {
  const uint64_t kA = (uint64_t{1} << 32) | 1;
  const uint64_t kB = (uint64_t{5} << 32) | 1;
  Job j(8);
  j.History(j.All(), kWorld, 0);
  for (uint32_t r = 0; r < 4; ++r) {
    j.Member(r, kA, 4, r);
  }
  for (uint32_t r = 4; r < 8; ++r) {
    j.Member(r, kB, 4, r - 4);
  }
  for (uint32_t r : {0u, 1u, 2u}) {
    j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kA, 0), 3);
  }
  for (uint32_t r : {4u, 6u, 7u}) {
    j.In(r, Coll(COMMPROF_OP_BCAST, kB, 0, 64, 0), 3);
  }
  j.In(5, Coll(COMMPROF_OP_BCAST, kB, 0, 32, 0), 3);
  HangReport r = Diagnose(j.in_);
  ASSERT_EQ(r.comms.size(), 2u);
  EXPECT_EQ(r.culprits, (std::vector<uint32_t>{3, 5}));
  EXPECT_EQ(r.comms[0].culprits, std::vector<uint32_t>{3});
  EXPECT_EQ(r.comms[1].culprits, std::vector<uint32_t>{5});
  const Mismatch* m = FindMismatch(r.comms[1], "SIZE");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->sides[1].value, "32 B");
  EXPECT_NE(r.verdict.find("; "), std::string::npos);
}

TEST(HangDiagnosis, NcclSequenceNumbersArePerTypeSoAllReduceAndBroadcastOfOneNumberAgree) {
  const uint64_t kNcclComm = 0x5f1e2d3c4b5a6978ull;
  Job j(4);
  for (uint32_t r = 0; r < 4; ++r) {
    j.Member(r, kNcclComm, 4, r);
    for (uint64_t s = 0; s < 5; ++s) {
      j.Done(r, Nccl(COMMPROF_OP_ALLREDUCE, kNcclComm, s));
    }
    j.Done(r, Nccl(COMMPROF_OP_BCAST, kNcclComm, 5));  // a Broadcast numbered 5 is no mismatch
  }
  for (uint32_t r : {0u, 1u, 2u}) {
    j.In(r, Nccl(COMMPROF_OP_ALLREDUCE, kNcclComm, 5), 7);
  }
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  const CommFinding& f = Only(r);
  EXPECT_TRUE(f.nccl);
  EXPECT_EQ(f.comm_name, "nccl comm 0x5f1e2d3c4b5a6978");
  EXPECT_EQ(f.op, "ncclAllReduce");
  EXPECT_EQ(f.seq, 5u);
  EXPECT_TRUE(f.mismatches.empty());  // the algorithm byte in reduce_op is never compared
  EXPECT_EQ(f.kind, "never_entered");
}

TEST(HangDiagnosis, SizeDatatypeAndReduceOpMismatchesNameBothSides) {
  Job j(4);
  j.History(j.All(), kWorld, 0);
  j.In(0, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 1, 1024, -1, COMMPROF_DT_FLOAT32, COMMPROF_RED_SUM), 2);
  j.In(1, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 1, 1024, -1, COMMPROF_DT_FLOAT32, COMMPROF_RED_SUM), 2);
  j.In(2, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 1, 2048, -1, COMMPROF_DT_FLOAT64, COMMPROF_RED_SUM), 2);
  j.In(3, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 1, 1024, -1, COMMPROF_DT_FLOAT32, COMMPROF_RED_MAX), 2);
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, (std::vector<uint32_t>{2, 3}));
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.kind, "mismatch");
  const Mismatch* size = FindMismatch(f, "SIZE");
  const Mismatch* dt = FindMismatch(f, "DTYPE");
  const Mismatch* red = FindMismatch(f, "REDUCE_OP");
  ASSERT_NE(size, nullptr);
  ASSERT_NE(dt, nullptr);
  ASSERT_NE(red, nullptr);
  EXPECT_EQ(size->sides[0].ranks, (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(size->sides[1].value, "2048 B");
  EXPECT_EQ(dt->sides[1].value, "float64");
  EXPECT_EQ(dt->sides[0].value, "float32");
  EXPECT_EQ(red->sides[1].value, "max");
  EXPECT_EQ(red->sides[1].ranks, std::vector<uint32_t>{3});
  EXPECT_NE(r.verdict.find("datatype mismatch (ranks 0,1,3: float32; rank 2: float64)"), std::string::npos)
      << r.verdict;
}

TEST(HangDiagnosis, VFormsMayDifferInSizeWithoutAMismatch) {
  Job j(3);
  j.In(0, Coll(COMMPROF_OP_GATHERV, kWorld, 0, 300, 0), 2);
  j.In(1, Coll(COMMPROF_OP_GATHERV, kWorld, 0, 100, 0), 2);
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{2});
  EXPECT_TRUE(Only(r).mismatches.empty());
}

TEST(HangDiagnosis, PendingNonblockingRequestCountsAsEnteredAndItsWaitIsShown) {
  Job j(4);
  j.History(j.All(), kWorld, 1);
  for (uint32_t r : {0u, 1u, 2u}) {
    commprof_event e = Coll(COMMPROF_OP_ALLREDUCE, kWorld, 2);
    e.flags = COMMPROF_FLAG_NONBLOCKING;
    j.In(r, e, 6);
    commprof_event w{};
    w.kind = COMMPROF_KIND_MPI_WAIT;
    w.subtype = COMMPROF_OP_WAIT;
    j.In(r, w, 5);
  }
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.op, "MPI_Allreduce");
  ASSERT_EQ(f.waiting.size(), 3u);
  EXPECT_EQ(f.waiting[0].op, "MPI_Iallreduce (pending)");
  EXPECT_DOUBLE_EQ(f.waiting[0].waiting_s, 6.0);
  EXPECT_EQ(r.ranks[0].doing, "in MPI_Wait for 5.0 s (pending: MPI_Iallreduce #2 on MPI_COMM_WORLD)");
  EXPECT_TRUE(r.p2p.empty());
}

TEST(HangDiagnosis, IallreduceAndAllreduceOfOneNumberAreNoTypeMismatch) {
  Job j(2);
  commprof_event e = Coll(COMMPROF_OP_ALLREDUCE, kWorld, 0);
  e.flags = COMMPROF_FLAG_NONBLOCKING;
  j.In(0, e, 1).In(1, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 0), 1);
  HangReport r = Diagnose(j.in_);
  EXPECT_TRUE(Only(r).mismatches.empty());
  EXPECT_EQ(Only(r).kind, "stuck");
  EXPECT_TRUE(r.culprits.empty());
  EXPECT_EQ(r.verdict,
            "all 2 members are in MPI_Allreduce #0 on MPI_COMM_WORLD and none completed it (waiting up to 1.0 s)");
}

TEST(HangDiagnosis, P2pOnlyHangBlamesThePeerAndMutualWaitsBlameBoth) {
  Job j(4);
  j.In(2, P2p(COMMPROF_OP_RECV, kWorld, 3, 9), 5);
  j.R(3).condition = RankCondition::kFinished;
  j.R(3).end_reason = "bye";
  j.R(3).has_state = false;
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_TRUE(r.comms.empty());
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  EXPECT_EQ(r.verdict, "rank 3: finished (bye); rank 2 waits for it in MPI_Recv");

  Job k(2);
  k.In(0, P2p(COMMPROF_OP_RECV, kWorld, 1, 0), 5).In(1, P2p(COMMPROF_OP_RECV, kWorld, 0, 0), 5);
  HangReport r2 = Diagnose(k.in_);
  EXPECT_EQ(r2.culprits, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(r2.verdict,
            "rank 0: in MPI_Recv from rank 1 tag 0 on MPI_COMM_WORLD for 5.0 s; rank 1 waits for it in MPI_Recv; "
            "rank 1: in MPI_Recv from rank 0 tag 0 on MPI_COMM_WORLD for 5.0 s; rank 0 waits for it in MPI_Recv");
}

// Tensor-parallel pairs {0,1},{2,3}, data-parallel pairs {0,2},{1,3}. Rank 3 stops computing
// (in no call). Rank 2 waits for it in TP allreduce #7; rank 0 waits in DP allreduce #7 for rank
// 2; rank 1 waits in DP #7 for rank 3. Truth: rank 3 alone; rank 2 is held up.
TEST(HangDiagnosis, WaitChainAcrossSubCommunicatorsBlamesTheEndOfTheChainNotTheRankHeldUp) {
  const uint64_t kTp01 = (uint64_t{1} << 32) | 1, kTp23 = (uint64_t{1} << 32) | 2;
  const uint64_t kDp02 = (uint64_t{2} << 32) | 1, kDp13 = (uint64_t{2} << 32) | 2;
  Job j(4);
  j.History(j.All(), kWorld, 0);
  j.Member(0, kTp01, 2, 0).Member(1, kTp01, 2, 1).Member(2, kTp23, 2, 0).Member(3, kTp23, 2, 1);
  j.Member(0, kDp02, 2, 0).Member(2, kDp02, 2, 1).Member(1, kDp13, 2, 0).Member(3, kDp13, 2, 1);
  for (uint32_t r = 0; r < 4; ++r) {
    const uint64_t tp = r < 2 ? kTp01 : kTp23, dp = r % 2 == 0 ? kDp02 : kDp13;
    for (uint64_t s = 0; s <= 6; ++s) {
      j.Done(r, Coll(COMMPROF_OP_ALLREDUCE, tp, s)).Done(r, Coll(COMMPROF_OP_ALLREDUCE, dp, s));
    }
  }
  j.Done(0, Coll(COMMPROF_OP_ALLREDUCE, kTp01, 7)).Done(1, Coll(COMMPROF_OP_ALLREDUCE, kTp01, 7));
  j.In(2, Coll(COMMPROF_OP_ALLREDUCE, kTp23, 7), 8);
  j.In(0, Coll(COMMPROF_OP_ALLREDUCE, kDp02, 7), 7.5);
  j.In(1, Coll(COMMPROF_OP_ALLREDUCE, kDp13, 7), 7.6);
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  ASSERT_EQ(r.comms.size(), 3u) << RenderText(r);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3}) << RenderText(r);
  EXPECT_EQ(r.consequences, std::vector<uint32_t>{2});
  for (const CommFinding& f : r.comms) {  // each finding still names whom it misses
    EXPECT_EQ(f.culprits, std::vector<uint32_t>{f.comm_id == kDp02 ? 2u : 3u}) << f.verdict;
  }
  EXPECT_EQ(r.verdict.rfind("rank 3 never entered", 0), 0u) << "the root cause's finding first: " << r.verdict;
  EXPECT_NE(RenderText(r).find("held up behind them: rank 2"), std::string::npos) << RenderText(r);
}

// A chain of receives: 0 waits for 1, 1 waits for 2, 2 computes. Only 2 is the cause.
// A periodic 1-D halo (Irecv/Isend to both neighbours, then Waitall) on 4 ranks; rank 2 stopped
// computing. Ranks 1 and 3 wait on requests to and from rank 2 and on each other's neighbour 0;
// rank 0 waits on 1 and 3. One culprit, three held up, and one verdict part, not one per request.
TEST(HangDiagnosis, HaloExchangeWithAStoppedRankNamesItOnceAndTheOthersAsHeldUp) {
  Job j(4);
  auto pending = [](uint8_t op, int32_t peer, uint32_t tag) {
    commprof_event e = P2p(op, kWorld, peer, tag);
    e.flags = COMMPROF_FLAG_NONBLOCKING;
    return e;
  };
  for (uint32_t r : {0u, 1u, 3u}) {
    const int32_t left = static_cast<int32_t>((r + 3) % 4), right = static_cast<int32_t>((r + 1) % 4);
    j.In(r, pending(COMMPROF_OP_RECV, left, 1), 6).In(r, pending(COMMPROF_OP_RECV, right, 2), 6);
    j.In(r, pending(COMMPROF_OP_SEND, left, 2), 6).In(r, pending(COMMPROF_OP_SEND, right, 1), 6);
    commprof_event w{};
    w.kind = COMMPROF_KIND_MPI_WAIT;
    w.subtype = COMMPROF_OP_WAITALL;
    j.In(r, w, 6);
  }
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_TRUE(r.comms.empty());
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{2});
  EXPECT_EQ(r.consequences, (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(r.verdict.rfind("rank 2: idle (in no communication call", 0), 0u) << r.verdict;
  EXPECT_NE(
      r.verdict.find("; ranks 1,3 wait for it in MPI_Waitall (pending MPI_Irecv), MPI_Waitall (pending MPI_Isend)"),
      std::string::npos)
      << r.verdict;
  EXPECT_EQ(r.verdict.find("rank 0"), std::string::npos) << "only the culprit's part: " << r.verdict;
}

TEST(HangDiagnosis, P2pChainEndsAtTheIdleSender) {
  Job j(4);
  j.In(0, P2p(COMMPROF_OP_RECV, kWorld, 1, 5), 9).In(1, P2p(COMMPROF_OP_RECV, kWorld, 2, 5), 8);
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{2});
  EXPECT_EQ(r.consequences, std::vector<uint32_t>{1});
}

// The culprit of a barrier waits in a receive from a rank that is idle: the idle sender is the
// cause, the receiver held up. (Contrast RankInRecvFromAPeerInTheBarrier...: there the sender
// waits in the barrier, a deadlock the receiver is part of, and the receiver stays the culprit.)
TEST(HangDiagnosis, CulpritWaitingOnAnIdleSenderPassesTheBlameOn) {
  Job j(4);
  j.History(j.All(), kWorld, 3);
  for (uint32_t r : {1u, 2u}) {
    j.In(r, Coll(COMMPROF_OP_BARRIER, kWorld, 4), 9);
  }
  j.In(0, P2p(COMMPROF_OP_RECV, kWorld, 3, 7), 12.3);
  HangReport r = Diagnose(j.in_);
  ASSERT_TRUE(r.hang);
  EXPECT_EQ(Only(r).culprits, (std::vector<uint32_t>{0, 3}));  // neither entered the barrier
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  EXPECT_EQ(r.consequences, std::vector<uint32_t>{0});
}

// Two ranks that each skipped into the other's collective (a cycle across communicators): both
// stay named, none is "held up".
TEST(HangDiagnosis, CycleOfBlamedRanksKeepsBoth) {
  const uint64_t kA = (uint64_t{1} << 32) | 1;
  Job j(4);
  j.Member(2, kA, 2, 0).Member(3, kA, 2, 1);
  for (uint32_t r : {0u, 1u, 3u}) {
    j.In(r, Coll(COMMPROF_OP_BARRIER, kWorld, 0), 5);
  }
  j.In(2, Coll(COMMPROF_OP_ALLREDUCE, kA, 2), 6);
  j.Done(2, Coll(COMMPROF_OP_ALLREDUCE, kA, 1)).Done(3, Coll(COMMPROF_OP_ALLREDUCE, kA, 1));
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, (std::vector<uint32_t>{2, 3})) << RenderText(r);
  EXPECT_TRUE(r.consequences.empty());
}

// One GPU's allreduce never finished while the others completed theirs: "stuck", and the verdict
// says who completed it (not "all members are in it").
TEST(HangDiagnosis, StuckWhileOthersCompletedSaysWhoCompleted) {
  const uint64_t kNcclComm = 0x77ull;
  Job j(4);
  for (uint32_t r = 0; r < 4; ++r) {
    j.Member(r, kNcclComm, 4, r);
    for (uint64_t s = 0; s <= (r == 2 ? 2u : 3u); ++s) {
      j.Done(r, Nccl(COMMPROF_OP_ALLREDUCE, kNcclComm, s));
    }
  }
  j.In(2, Nccl(COMMPROF_OP_ALLREDUCE, kNcclComm, 3), 6);
  HangReport r = Diagnose(j.in_);
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.kind, "stuck");
  EXPECT_EQ(f.completed, (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(f.verdict,
            "rank 2 is still in ncclAllReduce #3 on nccl comm 0x77 (up to 6.0 s), which ranks 0,1,3 "
            "completed: no member is missing and nothing differs");
}

TEST(HangDiagnosis, P2pPeerOnASubCommunicatorIsMappedToItsWorldRank) {
  const uint64_t kA = (uint64_t{3} << 32) | 2;
  Job j(4);
  // comm A = world ranks 2,3 (ranks 0,1 in it); world rank 3 waits for A-rank 0 = world rank 2.
  j.Member(2, kA, 2, 0).Member(3, kA, 2, 1);
  j.In(3, P2p(COMMPROF_OP_RECV, kA, 0, 1), 4);
  HangReport r = Diagnose(j.in_);
  ASSERT_EQ(r.p2p.size(), 1u);
  EXPECT_EQ(r.p2p[0].peer_world, 2);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{2});
  EXPECT_NE(r.ranks[3].doing.find("from rank 0 (world rank 2) tag 1 on comm 0x300000002"), std::string::npos)
      << r.ranks[3].doing;
}

TEST(HangDiagnosis, EightRanksWithOneInFinalize) {
  Job j(8);
  j.History(j.All(), kWorld, 99);
  for (uint32_t r = 0; r < 8; ++r) {
    if (r != 6) {
      j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 100), 15);
    }
  }
  commprof_event fin{};
  fin.kind = COMMPROF_KIND_MPI_FINALIZE;
  j.In(6, fin, 14);
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{6});
  EXPECT_EQ(Only(r).not_entered.at(0).state, "in_finalize");
  EXPECT_EQ(Only(r).waiting.size(), 7u);
  EXPECT_NE(r.verdict.find("(it is in MPI_Finalize for 14.0 s)"), std::string::npos) << r.verdict;
}

TEST(HangDiagnosis, SixtyFourRanksOneLaggingByOneCollective) {
  Job j(64);
  j.History(j.All(), kWorld, 499);
  for (uint32_t r = 0; r < 64; ++r) {
    if (r != 37) {
      j.Done(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 500));
      j.In(r, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 501), 11);
    }
  }
  // Rank 37 is computing, still before #500 (a bcast the others completed): it never entered #500.
  HangReport r = Diagnose(j.in_);
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{37});
  const CommFinding& f = Only(r);
  EXPECT_EQ(f.seq, 500u);
  EXPECT_EQ(f.completed.size(), 63u);
  EXPECT_EQ(f.size, 64u);
  const std::string text = RenderText(r);
  EXPECT_NE(text.find("already completed it: ranks 0-36,38-63"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 37 running: idle"), std::string::npos) << text;
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 20);  // grouped, not one line per rank
}

TEST(HangDiagnosis, RenderTextShowsVerdictCulpritsAndCallSite) {
  Job j(2);
  j.R(0).state.call_sites.push_back({42, "train_step (train.c:88) <- main (train.c:120)"});
  j.In(0, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 0), 3, 42);
  HangReport r = Diagnose(j.in_);
  const std::string text = RenderText(r);
  EXPECT_NE(text.find("HANG (live, no rank completed a communication call for 10.0 s, 2 ranks)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("culprits: rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("call site of rank 0: train_step (train.c:88)"), std::string::npos) << text;
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{1});
}

TEST(HangDiagnosis, SameInputSameReport) {
  Job j(4);
  j.In(0, Coll(COMMPROF_OP_ALLREDUCE, kWorld, 0), 3);
  EXPECT_EQ(RenderText(Diagnose(j.in_)), RenderText(Diagnose(j.in_)));
}

}  // namespace
}  // namespace commprof::hang
