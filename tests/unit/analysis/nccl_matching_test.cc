// NCCL collectives in the cross-rank analysis (docs/metrics.md §1): records as the NCCL profiler
// plugin writes them (docs/file-format.md: kind 6 subtype NCCL_COMM_INIT, kind 17), matched by
// (commHash, type, seqNumber), since NCCL counts seqNumber per collective type.
#include <gtest/gtest.h>

#include "analysis/match/collective_instances.h"
#include "analysis/report/job_report.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
using test_support::events::Collective;

constexpr uint64_t kCommHash = 0x9a3b5c7d1e2f4051ull;

commprof_event NcclInit(int32_t rank, uint64_t nranks) {
  commprof_event e = test_support::events::CommCreated(kCommHash, rank, nranks);
  e.subtype = COMMPROF_OP_NCCL_COMM_INIT;
  return e;
}

commprof_event Nccl(uint8_t op, uint64_t seq, uint64_t start, uint64_t end, uint64_t bytes) {
  return test_support::events::NcclCollective(op, seq, start, end, kCommHash, bytes);
}

// 3 ranks of one NCCL communicator; AllReduce seq 0, 1 and AllGather seq 0, 1 (the same numbers:
// NCCL counts per type), rank 2's kernels start 4000 ns late in all four; every rank's kernels end
// at t + 10000. An MPI Allreduce on MPI_COMM_WORLD seq 0 beside them, and a kind-17 Send that is
// not a collective, with the matching Recv from the rank before (a ring). Expected per NCCL instance: L = t + 4000,
// waits 4000, 4000, 0, transfer 10000 - 4000 = 6000 on every rank; rank 2 the straggler (4 of 4 NCCL instances, and it
// is late in the MPI one too: 5 of 5, p = (1/3)^5 = 0.004).
std::vector<RankData> Job() {
  std::vector<RankData> ranks(3);
  for (int32_t r = 0; r < 3; ++r) {
    auto& ev = ranks[r].events;
    ev.push_back(NcclInit(r, 3));
    const uint64_t late = r == 2 ? 4000 : 0;
    uint64_t t = 100000;
    for (uint64_t s = 0; s < 2; ++s) {
      ev.push_back(Nccl(COMMPROF_OP_ALLREDUCE, s, t + late, t + 10000, 1 << 20));
      t += 100000;
      ev.push_back(Nccl(COMMPROF_OP_ALLGATHER, s, t + late, t + 10000, 3 << 20));
      t += 100000;
    }
    ev.push_back(Collective(COMMPROF_OP_ALLREDUCE, 0, t + late, t + 10000, {.bytes = 8}));
    commprof_event send = Nccl(COMMPROF_OP_SEND, 0, t + 50000, t + 60000, 64);
    send.peer = (r + 1) % 3;
    send.correlation = 2;  // channels, not a tag
    ev.push_back(send);
    commprof_event recv = Nccl(COMMPROF_OP_RECV, 0, t + 40000, t + 60000, 64);
    recv.peer = (r + 2) % 3;
    recv.correlation = 4;
    ev.push_back(recv);
  }
  return ranks;
}

TEST(NcclMatching, CollectivesMatchByCommHashTypeAndSeqNumberBesideMpi) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "nccl.h5", Job());
  ASSERT_NE(reader, nullptr);
  auto instances = LoadCollectiveInstances(*reader, true);
  ASSERT_TRUE(instances.ok()) << instances.status().message();
  ASSERT_EQ(instances->size(), 5u);  // 4 NCCL + 1 MPI; the Send is not a collective
  int nccl = 0;
  for (const auto& in : instances.value()) {
    EXPECT_TRUE(in.complete()) << in.comm_id << "/" << in.seq;
    EXPECT_EQ(in.arrivals.size(), 3u);
    if (!in.nccl) {
      EXPECT_EQ(in.comm_id, COMMPROF_COMM_WORLD_ID);
      continue;
    }
    ++nccl;
    EXPECT_EQ(in.comm_id, kCommHash);
    EXPECT_EQ(in.comm_size, 3u);  // from the NCCL init records
    for (const auto& a : in.arrivals) EXPECT_EQ(a.local_rank, static_cast<int32_t>(a.world_rank));
    InstanceMetrics m = MeasureInstance(in, 1000);
    EXPECT_EQ(m.waits, (std::vector<int64_t>{4000, 4000, 0}));
    EXPECT_EQ(m.transfer_ns, 6000);
    EXPECT_EQ(m.straggler_index, 2);
  }
  EXPECT_EQ(nccl, 4);

  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->wait.matched, 5u);
  EXPECT_EQ(rep->wait.incomplete, 0u);
  // rank 2 held the two others 4000 ns in each of the 5 instances: it alone is named
  ASSERT_EQ(rep->stragglers.size(), 1u);
  EXPECT_EQ(rep->stragglers[0].rank, 2u);
  EXPECT_DOUBLE_EQ(rep->delay.ranks[2].direct_ns, 5 * 2 * 4000.0);
  EXPECT_EQ(rep->wait.ranks[0].wait_time_ns, 5 * 4000);
  // the ring's three messages pair by (commHash, source, destination, order), whatever the
  // channel counts; each receive was posted 10000 ns before its send: Late Sender 10000 each
  EXPECT_EQ(rep->p2p.matched, 3u);
  EXPECT_EQ(rep->p2p.unmatched_sends + rep->p2p.unmatched_recvs, 0u);
  EXPECT_EQ(rep->p2p.late_sender_wait_ns, 3 * 10000);
  // per type: allreduce holds the 2 NCCL ones and the MPI one; allgather busbw factor 2/3:
  // algbw = 3 MiB / 6000 ns
  for (const auto& t : rep->wait.types) {
    if (t.op == COMMPROF_OP_ALLGATHER) {
      EXPECT_EQ(t.count, 2u);
      EXPECT_DOUBLE_EQ(t.algbw_gbps, (3 << 20) / 6000.0);
      EXPECT_DOUBLE_EQ(t.busbw_gbps, (3 << 20) / 6000.0 * 2.0 / 3.0);
    } else {
      EXPECT_EQ(t.op, COMMPROF_OP_ALLREDUCE);
      EXPECT_EQ(t.count, 3u);
    }
  }
}

TEST(NcclMatching, AMissingRanksKernelsLeaveTheInstanceIncompleteNotMatchedWithAnotherType) {
  TempDir dir;
  std::vector<RankData> job = Job();
  job[1].events.erase(job[1].events.begin() + 2);  // rank 1's AllGather seq 0 (after init, AllReduce 0)
  auto reader = test_support::WriteProfile(dir / "nccl.h5", job);
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->wait.matched, 4u);
  EXPECT_EQ(rep->wait.incomplete, 1u);
  ASSERT_EQ(rep->wait.incomplete_list.size(), 1u);
  EXPECT_EQ(rep->wait.incomplete_list[0].op, COMMPROF_OP_ALLGATHER);
  EXPECT_EQ(rep->wait.incomplete_list[0].seq, 0u);
  EXPECT_EQ(rep->wait.incomplete_list[0].ranks_present, (std::vector<uint32_t>{0, 2}));
}

TEST(NcclMatching, WithoutInitRecordsAV2CommunicatorIsTakenToSpanTheJob) {
  // v2 plugins write no init record: the same job without them still matches all 4 NCCL
  // instances, with comm size = world size (3) and local rank = world rank
  TempDir dir;
  std::vector<RankData> job = Job();
  for (auto& r : job) r.events.erase(r.events.begin());  // the NcclInit records
  auto reader = test_support::WriteProfile(dir / "v2.h5", job);
  ASSERT_NE(reader, nullptr);
  auto instances = LoadCollectiveInstances(*reader, true);
  ASSERT_TRUE(instances.ok()) << instances.status().message();
  int nccl = 0;
  for (const auto& in : instances.value()) {
    if (!in.nccl) continue;
    ++nccl;
    EXPECT_TRUE(in.complete());
    EXPECT_EQ(in.comm_size, 3u);
    for (const auto& a : in.arrivals) EXPECT_EQ(a.local_rank, static_cast<int32_t>(a.world_rank));
  }
  EXPECT_EQ(nccl, 4);
}

}  // namespace
}  // namespace commprof
