// NCCL API calls decoded from NCCL's own NVTX ranges (kind 16 with COMMPROF_FLAG_FROM_NVTX,
// docs/nvtx.md) in the cross-rank analysis (docs/metrics.md §1): on a rank without the plugin's
// kind-17 records for a communicator they are its collective instances (arrival = host API entry,
// sequence = order per (communicator, type) on the rank); where the plugin's records exist, they
// win and the NVTX copies of the same calls are not counted again.
#include <gtest/gtest.h>

#include "analysis/match/collective_instances.h"
#include "analysis/report/job_report.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;

constexpr uint64_t kComm = 0x51ab0c0ffee00001ull;
constexpr uint64_t kOtherComm = 0x51ab0c0ffee00002ull;

commprof_event NvtxCall(uint8_t op, uint64_t comm, uint64_t start, uint64_t end, uint64_t bytes) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_NCCL_API;
  e.flags = COMMPROF_FLAG_FROM_NVTX;
  e.subtype = op;
  e.comm_id = comm;
  e.start_ns = start;
  e.end_ns = end;
  e.bytes = bytes;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

commprof_event PluginCollective(uint8_t op, uint64_t seq, uint64_t start, uint64_t end) {
  return test_support::events::NcclCollective(op, seq, start, end, kComm, 1024);
}

// 3 ranks, each: AllReduce, AllGather, AllReduce on kComm, entered at t (rank 2: t + 4000), all
// returning at t + 10000; rank 1 stores its rows out of time order (as two threads' rings would).
// A Send and a plugin-style API record (no FROM_NVTX flag) beside them must not become instances.
std::vector<RankData> NvtxOnlyJob() {
  std::vector<RankData> ranks(3);
  for (uint32_t r = 0; r < 3; ++r) {
    auto& ev = ranks[r].events;
    const uint64_t late = r == 2 ? 4000 : 0;
    ev.push_back(NvtxCall(COMMPROF_OP_ALLREDUCE, kComm, 100000 + late, 110000, 4096));
    ev.push_back(NvtxCall(COMMPROF_OP_ALLGATHER, kComm, 200000 + late, 210000, 8192));
    ev.push_back(NvtxCall(COMMPROF_OP_ALLREDUCE, kComm, 300000 + late, 310000, 4096));
    if (r == 1) std::swap(ev[0], ev[2]);
    commprof_event send = NvtxCall(COMMPROF_OP_SEND, kComm, 400000, 401000, 64);
    send.peer = static_cast<int32_t>((r + 1) % 3);
    ev.push_back(send);
    commprof_event plugin_api = NvtxCall(COMMPROF_OP_ALLREDUCE, kComm, 500000, 501000, 4096);
    plugin_api.flags = 0;
    ev.push_back(plugin_api);
  }
  return ranks;
}

TEST(NvtxNcclMatching, WithoutPluginRecordsTheNvtxCallsAreTheInstancesInTimeOrder) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "nvtx.h5", NvtxOnlyJob());
  ASSERT_NE(reader, nullptr);
  auto instances = LoadCollectiveInstances(*reader, true);
  ASSERT_TRUE(instances.ok()) << instances.status().message();
  ASSERT_EQ(instances->size(), 3u);
  const uint64_t expected_start[] = {100000, 200000, 300000};
  for (size_t i = 0; i < 3; ++i) {
    const CollectiveInstance& in = (*instances)[i];
    EXPECT_TRUE(in.nccl);
    EXPECT_EQ(in.comm_id, kComm);
    EXPECT_EQ(in.op, i == 1 ? COMMPROF_OP_ALLGATHER : COMMPROF_OP_ALLREDUCE);
    EXPECT_EQ(in.seq, i == 2 ? 1u : 0u) << "sequence per (communicator, type)";
    ASSERT_TRUE(in.complete()) << "no init record: the communicator spans the job";
    for (const auto& a : in.arrivals) {
      EXPECT_EQ(a.start, static_cast<int64_t>(expected_start[i] + (a.world_rank == 2 ? 4000 : 0))) << i;
    }
    InstanceMetrics m = MeasureInstance(in, 1000);
    EXPECT_EQ(m.waits, (std::vector<int64_t>{4000, 4000, 0}));
    EXPECT_EQ(m.straggler_index, 2);
  }
}

TEST(NvtxNcclMatching, PluginRecordsWinAndTheNvtxCopiesOfTheSameCallsAreNotCountedAgain) {
  // Every rank: the plugin's kind-17 records of AllReduce 0 and 1 on kComm, and NCCL's NVTX
  // ranges of the same two calls (a file written before the collector dropped them, or merged
  // spools); plus NVTX-only AllReduces on kOtherComm, which the plugin never saw.
  std::vector<RankData> ranks(2);
  for (uint32_t r = 0; r < 2; ++r) {
    auto& ev = ranks[r].events;
    const uint64_t late = r == 1 ? 3000 : 0;
    for (uint64_t s = 0; s < 2; ++s) {
      const uint64_t t = 100000 * (s + 1);
      ev.push_back(NvtxCall(COMMPROF_OP_ALLREDUCE, kComm, t - 5000, t - 4000, 1024));
      ev.push_back(PluginCollective(COMMPROF_OP_ALLREDUCE, s, t + late, t + 9000));
    }
    ev.push_back(NvtxCall(COMMPROF_OP_ALLREDUCE, kOtherComm, 700000 + late, 710000, 16));
  }
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "both.h5", ranks);
  ASSERT_NE(reader, nullptr);
  auto instances = LoadCollectiveInstances(*reader, true);
  ASSERT_TRUE(instances.ok()) << instances.status().message();
  ASSERT_EQ(instances->size(), 3u) << "two plugin instances and one NVTX-only one, each counted once";
  int on_comm = 0, on_other = 0;
  for (const auto& in : instances.value()) {
    ASSERT_EQ(in.arrivals.size(), 2u);
    if (in.comm_id == kComm) {
      ++on_comm;
      // the plugin's arrival (kernel start), not the NVTX host entry 5000 ns earlier
      EXPECT_EQ(in.arrivals[0].start, static_cast<int64_t>(100000 * (in.seq + 1)));
    } else {
      ++on_other;
      EXPECT_EQ(in.comm_id, kOtherComm);
      EXPECT_EQ(in.bytes, 16u);
    }
  }
  EXPECT_EQ(on_comm, 2);
  EXPECT_EQ(on_other, 1);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->wait.matched, 3u);
  EXPECT_EQ(rep->wait.ranks[0].wait_time_ns, 3 * 3000);
}

}  // namespace
}  // namespace commprof
