// HTA-compatible per-rank GPU analyses (analysis/metrics/gpu_*.h, docs/metrics.md §8): golden
// tests on hand-made traces whose expected values are derived by hand from HTA's definitions
// (docs/metrics.md §8) in the comments, then the shipped torch.profiler trace
// imported through the importer, checked against a recomputation straight from its raw JSON.
#include "analysis/metrics/gpu_breakdown.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/load/kineto_import.h"
#include "analysis/metrics/gpu_launch_analysis.h"
#include "analysis/metrics/gpu_trace.h"
#include "cli/import_writer.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;

// String table of the hand-made ranks.
enum Name : uint32_t {
  kNone = 0,
  kGemm,
  kNccl,
  kMemcpy,
  kLaunch,
  kElementwise,
  kStreamSyncCall,
  kStreamSync,
  kMemcpyAsync,
  kA,
  kB,
  kC,
  kD,
  kE
};
const std::vector<std::string> kStrings = {"",
                                           "gemm",
                                           "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                           "Memcpy HtoD",
                                           "cudaLaunchKernel",
                                           "elementwise",
                                           "cudaStreamSynchronize",
                                           "Stream Sync",
                                           "cudaMemcpyAsync",
                                           "a",
                                           "b",
                                           "c",
                                           "d",
                                           "e"};

commprof_event Gpu(uint8_t kind, uint32_t name, uint64_t start, uint64_t end, uint32_t stream, uint32_t corr = 0) {
  commprof_event e{};
  e.kind = kind;
  e.name_id = name;
  e.start_ns = start;
  e.end_ns = end;
  e.thread_id = stream;
  e.correlation = corr;
  e.device = 0;
  e.peer = COMMPROF_NO_PEER;
  return e;
}
commprof_event Kernel(uint32_t name, uint64_t start, uint64_t end, uint32_t stream, uint32_t corr = 0) {
  return Gpu(COMMPROF_KIND_COMPUTE_KERNEL, name, start, end, stream, corr);
}
commprof_event Api(uint32_t name, uint64_t start, uint64_t end, uint32_t corr) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_CUDA_API;
  e.name_id = name;
  e.start_ns = start;
  e.end_ns = end;
  e.thread_id = 1;
  e.correlation = corr;
  e.device = COMMPROF_HOST_DEVICE;
  e.peer = COMMPROF_NO_PEER;
  return e;
}

// Writes the events as rank 0 of a file through the real writer and collects them back.
RankGpuTrace Collect(const TempDir& dir, std::vector<commprof_event> events) {
  RankData r;
  r.events = std::move(events);
  r.strings = kStrings;
  auto reader = test_support::WriteProfile(dir / "t.h5", {r});
  EXPECT_NE(reader, nullptr);
  if (reader == nullptr) return {};
  auto t = CollectRankGpuTrace(*reader, 0);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t.value()) : RankGpuTrace{};
}

// Stream 7: gemm [0,100), elementwise [150,250), Memcpy [300,340), Stream Sync (kind 20) [400,420);
// stream 20: ncclDevKernel [50,200).
std::vector<commprof_event> OverlapTrace() {
  return {Kernel(kGemm, 0, 100, 7), Gpu(COMMPROF_KIND_COMM_KERNEL, kNccl, 50, 200, 20),
          Kernel(kElementwise, 150, 250, 7), Gpu(COMMPROF_KIND_MEMCPY, kMemcpy, 300, 340, 7),
          Gpu(COMMPROF_KIND_SYNC, kStreamSync, 400, 420, 7)};
}

TEST(HtaOverlap, CommunicationUnderComputationOverCommunication) {
  TempDir dir;
  GpuBreakdown b = ComputeGpuBreakdown(Collect(dir, OverlapTrace()));
  // C = [0,100) ∪ [150,250) = 200 ns; M = [50,200) = 150 ns; C ∩ M = [50,100) ∪ [150,200) = 100 ns.
  // ratio = 100 / 150 = 0.6667, HTA's pctg = round(66.667, 2) = 66.67.
  EXPECT_EQ(b.gpu_records, 5u);
  EXPECT_TRUE(b.overlap.has_comm);
  EXPECT_EQ(b.overlap.comm_ns, 150);
  EXPECT_EQ(b.overlap.compute_ns, 200);
  EXPECT_EQ(b.overlap.overlap_ns, 100);
  EXPECT_NEAR(b.overlap.ratio, 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(b.overlap.pctg, 66.67);
}

TEST(HtaOverlap, NoCommunicationKernelsIsReportedNotNaN) {
  TempDir dir;
  GpuBreakdown b = ComputeGpuBreakdown(Collect(dir, {Kernel(kGemm, 0, 100, 7)}));
  EXPECT_FALSE(b.overlap.has_comm);  // HTA gives NaN here
  EXPECT_EQ(b.overlap.ratio, 0.0);
  EXPECT_EQ(b.overlap.compute_ns, 100);
}

TEST(HtaTemporal, SpanOfGpuActivityCutIntoIdleComputeAndNonCompute) {
  TempDir dir;
  GpuBreakdown b = ComputeGpuBreakdown(Collect(dir, OverlapTrace()));
  // kernel_time = 420 - 0 (the sync record counts: HTA takes every GPU event).
  // union = [0,250) + [300,340) + [400,420) = 310 -> idle = 110; compute = |C| = 200;
  // non_compute = 420 - 200 - 110 = 110 (= comm alone [100,150) 50 + memcpy 40 + sync 20).
  // pctg: 110/420 = 26.19, 200/420 = 47.62.
  EXPECT_EQ(b.temporal.kernel_time_ns, 420);
  EXPECT_EQ(b.temporal.idle_ns, 110);
  EXPECT_EQ(b.temporal.compute_ns, 200);
  EXPECT_EQ(b.temporal.non_compute_ns, 110);
  EXPECT_DOUBLE_EQ(b.temporal.idle_pctg, 26.19);
  EXPECT_DOUBLE_EQ(b.temporal.compute_pctg, 47.62);
  EXPECT_DOUBLE_EQ(b.temporal.non_compute_pctg, 26.19);
}

TEST(HtaKernelBreakdown, TimeGoesToTheRunningKernelTypeMask) {
  TempDir dir;
  auto events = OverlapTrace();
  events.push_back(Gpu(COMMPROF_KIND_MEMSET, kMemcpy, 160, 170, 30));  // under both C and M
  GpuBreakdown b = ComputeGpuBreakdown(Collect(dir, events));
  // Sweep (sync is HTA's "other", not in the table):
  // [0,50) C -> 1: 50; [50,100) C+M -> 3: 50; [100,150) M -> 2: 50; [150,160) 3: 10;
  // [160,170) C+M+MEM -> 7: 10; [170,200) 3: 30; [200,250) 1: 50; [300,340) MEM -> 4: 40.
  // Mask 1: 100, 2: 50, 3: 90, 4: 40, 7: 10; total 290.
  std::map<uint32_t, int64_t> got;
  std::map<uint32_t, double> pct;
  for (const auto& k : b.kernels.by_mask) {
    got[k.mask] = k.time_ns;
    pct[k.mask] = k.pctg;
  }
  EXPECT_EQ(got, (std::map<uint32_t, int64_t>{{1, 100}, {2, 50}, {3, 90}, {4, 40}, {7, 10}}));
  EXPECT_DOUBLE_EQ(pct[1], 34.48);  // 100/290
  EXPECT_DOUBLE_EQ(pct[7], 3.45);   // 10/290
  EXPECT_EQ(KernelTypeMaskName(3), "COMPUTATION overlapping COMMUNICATION");
  EXPECT_EQ(KernelTypeMaskName(7), "COMPUTATION overlapping COMMUNICATION overlapping MEMORY");
}

// Compute kernels a (20 + 30 = 50), b 30, c 10, d 6, e 4: total 100 ns over 6 kernels.
std::vector<commprof_event> TopTrace() {
  return {Kernel(kA, 0, 20, 7),    Kernel(kA, 100, 130, 7), Kernel(kB, 200, 230, 7),
          Kernel(kC, 300, 310, 7), Kernel(kD, 400, 406, 7), Kernel(kE, 500, 504, 7)};
}

const KernelStats* Find(const KernelTypeTop& top, const std::string& name) {
  for (const auto& k : top.kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

TEST(HtaKernelBreakdown, TopKernelsFoldTheTailIntoOthers) {
  TempDir dir;
  RankGpuTrace t = Collect(dir, TopTrace());
  // num_kernels 3, ratio 0.8: 5 names > 3, so fold. By sum: a 50, b 30 (kept: 80, not < 0.8*100),
  // so c, d, e go to others: count 3, sum 20, max 10, min 4, mean 20/3,
  // std = sqrt(((10-6.667)^2 + (6-6.667)^2 + (4-6.667)^2) / 2) = sqrt(9.3333) = 3.0551.
  GpuBreakdown b = ComputeGpuBreakdown(t, {3, 0.8});
  ASSERT_EQ(b.kernels.top.size(), 1u);
  const KernelTypeTop& top = b.kernels.top[0];
  EXPECT_EQ(top.type, GpuKernelType::kComputation);
  EXPECT_EQ(top.distinct_names, 5u);
  ASSERT_EQ(top.kernels.size(), 3u);
  EXPECT_EQ(top.kernels[0].name, "a");
  EXPECT_EQ(top.kernels[0].count, 2u);
  EXPECT_EQ(top.kernels[0].sum_ns, 50);
  EXPECT_EQ(top.kernels[0].max_ns, 30);
  EXPECT_EQ(top.kernels[0].min_ns, 20);
  EXPECT_DOUBLE_EQ(top.kernels[0].mean_ns, 25.0);
  EXPECT_NEAR(top.kernels[0].std_ns, std::sqrt(50.0), 1e-9);  // (25 + 25) / 1
  EXPECT_EQ(top.kernels[1].name, "b");
  EXPECT_EQ(top.kernels[1].std_ns, 0.0);  // a single kernel (HTA: NaN)
  const KernelStats& others = top.kernels[2];
  EXPECT_EQ(others.name, "others");
  EXPECT_EQ(others.count, 3u);
  EXPECT_EQ(others.sum_ns, 20);
  EXPECT_EQ(others.max_ns, 10);
  EXPECT_EQ(others.min_ns, 4);
  EXPECT_NEAR(others.mean_ns, 20.0 / 3.0, 1e-9);
  EXPECT_NEAR(others.std_ns, std::sqrt(28.0 / 3.0), 1e-9);

  // num_kernels caps first: 2 names, ratio 1.0 -> a, b, others(c, d, e).
  b = ComputeGpuBreakdown(t, {2, 1.0});
  ASSERT_EQ(b.kernels.top[0].kernels.size(), 3u);
  EXPECT_NE(Find(b.kernels.top[0], "b"), nullptr);
  EXPECT_EQ(Find(b.kernels.top[0], "others")->count, 3u);
  // A small ratio keeps only the largest name.
  b = ComputeGpuBreakdown(t, {10, 0.4});
  EXPECT_EQ(b.kernels.top[0].kernels.size(), 5u);  // 5 names <= 10: HTA does not fold at all
  b = ComputeGpuBreakdown(t, {4, 0.4});
  ASSERT_EQ(b.kernels.top[0].kernels.size(), 2u);
  EXPECT_EQ(b.kernels.top[0].kernels[1].sum_ns, 50);  // others = b..e
}

// Stream 7, all times ns:
//  K1 [1000,2000) corr 1, launch [900,950)
//  K2 [32000,33000) corr 2, launch [1500,1510): gap 30000 = the threshold, launched before K1
//     ended -> other (kernel_wait needs gap < threshold)
//  K3 [62999,63999) corr 3, launch [32500,32510): gap 29999 < 30000 -> kernel_wait
//  K4 [70000,71000) corr 4, launch [65000,65020) after K3's end 63999 -> host_wait 6001
//  K5 [71000,72000) corr 5: no gap
//  K6 [100000,100500) corr 6, no launch call: gap 28000 -> kernel_wait
std::vector<commprof_event> IdleTrace() {
  return {Api(kLaunch, 900, 950, 1),         Kernel(kGemm, 1000, 2000, 7, 1),    Api(kLaunch, 1500, 1510, 2),
          Kernel(kGemm, 32000, 33000, 7, 2), Api(kLaunch, 32500, 32510, 3),      Kernel(kGemm, 62999, 63999, 7, 3),
          Api(kLaunch, 65000, 65020, 4),     Api(kLaunch, 66000, 66010, 5),      Kernel(kGemm, 70000, 71000, 7, 4),
          Kernel(kGemm, 71000, 72000, 7, 5), Kernel(kGemm, 100000, 100500, 7, 6)};
}

TEST(HtaIdleTime, GapsAreHostWaitKernelWaitOrOtherWithTheThresholdEdge) {
  TempDir dir;
  RankGpuTrace t = Collect(dir, IdleTrace());
  auto idle = ComputeIdleBreakdown(t);  // HTA's default, 30 µs
  ASSERT_EQ(idle.size(), 1u);
  const StreamIdle& s = idle[0];
  EXPECT_EQ(s.stream, 7u);
  EXPECT_EQ(s.records, 6u);
  EXPECT_EQ(s.other_ns, 30000);
  EXPECT_EQ(s.other_gaps, 1u);
  EXPECT_EQ(s.kernel_wait_ns, 29999 + 28000);
  EXPECT_EQ(s.kernel_wait_gaps, 2u);
  EXPECT_EQ(s.host_wait_ns, 6001);
  EXPECT_EQ(s.host_wait_gaps, 1u);
  // span 100500 - 1000 = 99500, busy 5 x 1000 + 500 = 5500, idle 94000 = the three categories.
  EXPECT_EQ(s.span_ns, 99500);
  EXPECT_EQ(s.busy_ns, 5500);
  EXPECT_EQ(s.idle_ns(), 94000);

  // One ns more of threshold and the 30000 ns gap is kernel_wait.
  idle = ComputeIdleBreakdown(t, {30001});
  EXPECT_EQ(idle[0].other_ns, 0);
  EXPECT_EQ(idle[0].kernel_wait_ns, 30000 + 29999 + 28000);
  EXPECT_EQ(idle[0].host_wait_ns, 6001);
}

// Stream 7: L1 [0,10) -> K1 [100,200); L2 [20,30) -> K2 [200,300); L3 [40,50) launches a kernel
// that is missing; L4 [250,260) -> K4 [400,500); K5 [600,700) has no launch call.
std::vector<commprof_event> QueueTrace() {
  return {Api(kLaunch, 0, 10, 1),        Api(kLaunch, 20, 30, 2),       Api(kLaunch, 40, 50, 3),
          Kernel(kGemm, 100, 200, 7, 1), Kernel(kGemm, 200, 300, 7, 2), Api(kLaunch, 250, 260, 4),
          Kernel(kGemm, 400, 500, 7, 4), Kernel(kGemm, 600, 700, 7, 5)};
}

TEST(HtaQueueLength, StepFunctionOfMatchedLaunchesAndKernelStarts) {
  TempDir dir;
  auto q = ComputeQueueLength(Collect(dir, QueueTrace()));
  // Only matched pairs step: 0 +1 -> 1, 20 +1 -> 2, 100 -1 -> 1, 200 -1 -> 0, 250 +1 -> 1,
  // 400 -1 -> 0. L3 (kernel missing) and K5 (no launch) leave it alone, so it never goes negative.
  // Samples [1,2,1,0,1,0]: mean 5/6; sorted [0,0,1,1,1,2]: p25 at 1.25 -> 0.25, p50 at 2.5 -> 1,
  // p75 at 3.75 -> 1; never >= 1024.
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].count, 6u);
  EXPECT_NEAR(q[0].mean, 5.0 / 6.0, 1e-12);
  EXPECT_EQ(q[0].min, 0.0);
  EXPECT_DOUBLE_EQ(q[0].p25, 0.25);
  EXPECT_DOUBLE_EQ(q[0].p50, 1.0);
  EXPECT_DOUBLE_EQ(q[0].p75, 1.0);
  EXPECT_EQ(q[0].max, 2.0);
  EXPECT_EQ(q[0].blocked_ns, 0);
}

TEST(HtaQueueLength, TimeBlockedOnAFullQueue) {
  TempDir dir;
  // 1024 launches [i, i+1) for i = 0..1023, kernel j at [5000 + j, 5001 + j): the queue reaches
  // 1024 at t = 1023 and drops to 1023 at t = 5000, so 3977 ns blocked; the rank's events span
  // [0, 6024), blocked_ratio = 3977 / 6024.
  std::vector<commprof_event> ev;
  for (uint32_t i = 0; i < 1024; ++i) ev.push_back(Api(kLaunch, i, i + 1, i + 1));
  for (uint32_t j = 0; j < 1024; ++j) ev.push_back(Kernel(kGemm, 5000 + j, 5001 + j, 9, j + 1));
  auto q = ComputeQueueLength(Collect(dir, ev));
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].max, 1024.0);
  EXPECT_EQ(q[0].blocked_ns, 3977);
  EXPECT_NEAR(q[0].blocked_ratio, 3977.0 / 6024.0, 1e-12);
}

TEST(HtaLaunchStats, DelaysClampAtZeroAndOutliersAreCounted) {
  TempDir dir;
  // L1 [0,5000) -> K1 [10000,20000): cpu 5000, gpu 10000, delay 5000
  // L2 [20000,80000) -> K2 [70000,75000): cpu 60000 (> 50 µs), gpu 5000 < cpu (short),
  //    delay max(0, 70000 - 80000) = 0
  // L3 [90000,91000) -> K3 [300000,301000): cpu 1000, gpu 1000, delay 209000 (> 100 µs)
  // L4 [100000,101000): no kernel. cudaStreamSynchronize + its Stream Sync record: not a launch.
  RankGpuTrace t = Collect(
      dir, {Api(kLaunch, 0, 5000, 1), Kernel(kGemm, 10000, 20000, 7, 1), Api(kLaunch, 20000, 80000, 2),
            Kernel(kGemm, 70000, 75000, 7, 2), Api(kMemcpyAsync, 90000, 91000, 3),
            Gpu(COMMPROF_KIND_MEMCPY, kMemcpy, 300000, 301000, 7, 3), Api(kLaunch, 100000, 101000, 4),
            Api(kStreamSyncCall, 302000, 303000, 5), Gpu(COMMPROF_KIND_SYNC, kStreamSync, 302000, 302900, 7, 5)});
  LaunchStats s = ComputeLaunchStats(t);
  EXPECT_EQ(s.pairs, 3u);
  EXPECT_EQ(s.launches_without_gpu, 1u);
  // cpu [1000, 5000, 60000]: mean 22000, p50 5000, p95 at 1.9 -> 5000 + 0.9 * 55000 = 54500.
  EXPECT_DOUBLE_EQ(s.cpu_duration.mean, 22000.0);
  EXPECT_DOUBLE_EQ(s.cpu_duration.p50, 5000.0);
  EXPECT_NEAR(s.cpu_duration.p95, 54500.0, 1e-6);
  EXPECT_EQ(s.cpu_duration.max, 60000);
  // delay [0, 5000, 209000]: mean 71333.33, p95 5000 + 0.9 * 204000 = 188600.
  EXPECT_NEAR(s.launch_delay.mean, 214000.0 / 3.0, 1e-6);
  EXPECT_NEAR(s.launch_delay.p95, 188600.0, 1e-6);
  EXPECT_EQ(s.launch_delay.max, 209000);
  // gpu [1000, 5000, 10000].
  EXPECT_NEAR(s.gpu_duration.mean, 16000.0 / 3.0, 1e-6);
  EXPECT_EQ(s.gpu_duration.max, 10000);
  EXPECT_EQ(s.launch_delay_outliers, 1u);
  EXPECT_EQ(s.cpu_duration_outliers, 1u);
  EXPECT_EQ(s.short_kernels, 1u);
}

TEST(HtaLaunchStats, LaunchCallNamesFollowHta) {
  EXPECT_TRUE(IsLaunchCallName("cudaLaunchKernel"));
  EXPECT_TRUE(IsLaunchCallName("cudaLaunchKernel_v7000"));
  EXPECT_TRUE(IsLaunchCallName("cudaLaunchKernelExC_v11060"));
  EXPECT_TRUE(IsLaunchCallName("cuLaunchKernel"));
  EXPECT_TRUE(IsLaunchCallName("cudaMemcpyAsync"));
  EXPECT_TRUE(IsLaunchCallName("hipLaunchKernel"));
  EXPECT_FALSE(IsLaunchCallName("cudaLaunchKernelX"));
  EXPECT_FALSE(IsLaunchCallName("cudaMemcpy"));
  EXPECT_FALSE(IsLaunchCallName("cudaStreamSynchronize"));
  EXPECT_FALSE(IsLaunchCallName("cudaLaunchKernel_"));
}

TEST(HtaNoGpu, HostOnlyRankGivesEmptyResultsNotFailures) {
  TempDir dir;
  RankGpuTrace t = Collect(dir, {test_support::events::Collective(COMMPROF_OP_ALLREDUCE, 0, 100, 200)});
  EXPECT_EQ(t.events_read, 1u);
  EXPECT_TRUE(t.records.empty());
  GpuBreakdown b = ComputeGpuBreakdown(t);
  EXPECT_EQ(b.gpu_records, 0u);
  EXPECT_FALSE(b.overlap.has_comm);
  EXPECT_EQ(b.temporal.kernel_time_ns, 0);
  EXPECT_TRUE(b.kernels.top.empty());
  EXPECT_TRUE(ComputeIdleBreakdown(t).empty());
  EXPECT_TRUE(ComputeQueueLength(t).empty());
  EXPECT_EQ(ComputeLaunchStats(t).pairs, 0u);
}

TEST(HtaNativeFile, NcclPluginChannelIdsAreNotTakenForLaunchCorrelations) {
  // In a native file kind 11 comes from the NCCL plugin with the channel id in `correlation`; a
  // CUPTI launch call that happens to have correlation 3 must not pair with channel 3.
  TempDir dir;
  RankGpuTrace t = Collect(dir, {Api(kLaunch, 0, 10, 3), Gpu(COMMPROF_KIND_COMM_KERNEL, kNccl, 100, 200, 0, 3),
                                 Api(kLaunch, 20, 30, 4), Kernel(kGemm, 300, 400, 7, 4)});
  ASSERT_EQ(t.records.size(), 2u);
  EXPECT_EQ(t.records[0].correlation, 0u);
  EXPECT_EQ(t.records[1].correlation, 4u);
  LaunchStats s = ComputeLaunchStats(t);
  EXPECT_EQ(s.pairs, 1u);  // only the compute kernel
  EXPECT_EQ(s.launches_without_gpu, 1u);
}

// ---------------------------------------------------------------------------------------------
// The shipped trace, imported, against a recomputation from its raw JSON.

std::string DataDir() {
  return (std::filesystem::path(COMMPROF_SOURCE_DIR).parent_path() / "shared" / "data" / "kineto").string();
}

std::string Gunzip(const std::string& path) {
  std::string out;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

// µs (integer or float text) -> ns; the trace-filter files have integer ts and 3-decimal durs.
int64_t Ns(const nlohmann::json& v) {
  return v.is_number_integer() ? v.get<int64_t>() * 1000 : std::llround(v.get<double>() * 1000.0);
}

struct RawInterval {
  int64_t begin, end;
};

// |union| by sorting and merging, written independently of IntervalSet.
int64_t UnionLength(std::vector<RawInterval> v) {
  std::sort(v.begin(), v.end(), [](const RawInterval& a, const RawInterval& b) { return a.begin < b.begin; });
  int64_t total = 0, cur_b = 0, cur_e = 0;
  bool open = false;
  for (const auto& iv : v) {
    if (!open || iv.begin > cur_e) {
      if (open) total += cur_e - cur_b;
      cur_b = iv.begin;
      cur_e = iv.end;
      open = true;
    } else {
      cur_e = std::max(cur_e, iv.end);
    }
  }
  if (open) total += cur_e - cur_b;
  return total;
}

TEST(HtaRealTrace, TraceFilterRank0MatchesARecomputationFromTheRawJson) {
  const std::string path = DataDir() + "/hta-trace-filter-2rank/sampled_rank-0.json.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "Kineto test data not found: " << path;

  // Raw side: HTA's classification by name on the `kernel` events, gpu_memcpy/gpu_memset as
  // memory, and HTA's own overlap sweep (comm +-1, comp +-2, time summed where the value is 3).
  const auto doc = nlohmann::json::parse(Gunzip(path));
  std::vector<std::pair<int64_t, int>> edges;
  std::vector<RawInterval> comm, all;
  std::map<int64_t, std::vector<RawInterval>> by_stream;
  uint64_t gpu_events = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (!e.contains("cat") || !e.contains("dur") || e.value("ph", "") != "X") continue;
    const std::string cat = e["cat"];
    if (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset") continue;
    const std::string name = e["name"];
    const int64_t b = Ns(e["ts"]), en = b + Ns(e["dur"]);
    ++gpu_events;
    all.push_back({b, en});
    by_stream[e["args"]["stream"].get<int64_t>()].push_back({b, en});
    if (cat != "kernel") continue;
    const bool is_comm = name.rfind("nccl", 0) == 0 || name.find("ncclKernel") != std::string::npos;
    const bool is_mem = name.rfind("Memcpy", 0) == 0 || name.rfind("Memset", 0) == 0;
    if (is_comm) {
      comm.push_back({b, en});
      edges.emplace_back(b, 1);
      edges.emplace_back(en, -1);
    } else if (!is_mem) {
      edges.emplace_back(b, 2);
      edges.emplace_back(en, -2);
    }
  }
  ASSERT_GT(comm.size(), 0u);
  std::sort(edges.begin(), edges.end());
  int64_t both = 0;
  int running = 0;  // with nested same-type kernels the count can exceed 3; HTA's file has none
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    running += edges[i].second;
    if (running == 3) both += edges[i + 1].first - edges[i].first;
  }
  const double raw_ratio = static_cast<double>(both) / static_cast<double>(UnionLength(comm));

  // commprof side: import, write, read back, analyse.
  kineto::ImportOptions opts;
  opts.inputs = {path};
  auto job = kineto::ImportKineto(opts);
  ASSERT_TRUE(job.ok()) << job.status().message();
  TempDir dir;
  ASSERT_TRUE(cli::WriteImportedJob(job.value(), dir / "tf.h5", "test").ok());
  auto reader = ProfileReader::Open(dir / "tf.h5");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto trace = CollectRankGpuTrace(*reader.value(), 0);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  uint64_t kernel_like = 0;
  for (const auto& r : trace->records) kernel_like += r.type != GpuKernelType::kOther ? 1 : 0;
  EXPECT_EQ(kernel_like, gpu_events);

  const GpuBreakdown b = ComputeGpuBreakdown(trace.value());
  EXPECT_NEAR(b.overlap.ratio, raw_ratio, 1e-12) << "raw overlap " << both << " ns";
  EXPECT_EQ(b.overlap.overlap_ns, both);
  EXPECT_EQ(b.temporal.compute_ns + b.temporal.non_compute_ns + b.temporal.idle_ns, b.temporal.kernel_time_ns);
  if (kernel_like == trace->records.size()) {  // no sync records in this file: the same GPU events
    EXPECT_EQ(b.temporal.kernel_time_ns - b.temporal.idle_ns, UnionLength(all));
  }

  // Per stream: the three idle categories add up to the stream's gaps, span - |union|.
  const auto idle = ComputeIdleBreakdown(trace.value());
  ASSERT_EQ(idle.size(), by_stream.size());
  for (const StreamIdle& s : idle) {
    auto it = by_stream.find(s.stream);
    ASSERT_NE(it, by_stream.end()) << "stream " << s.stream;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& iv : it->second) {
      lo = std::min(lo, iv.begin);
      hi = std::max(hi, iv.end);
    }
    EXPECT_EQ(s.records, it->second.size()) << "stream " << s.stream;
    EXPECT_EQ(s.idle_ns(), (hi - lo) - UnionLength(it->second)) << "stream " << s.stream;
  }
}

// HTA keeps this trace (tests/data/negative_queue_length_values_check) because its queue length
// once went negative: kernels without a launch call were subtracted. Only matched pairs step here,
// so every stream stays >= 0, and the steps are two per pair.
TEST(HtaRealTrace, QueueLengthOfHtasNegativeQueueTraceNeverGoesNegative) {
  const std::string path = DataDir() + "/hta-single-rank-nccl/negative_queue_length_rank0.json.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "Kineto test data not found: " << path;
  kineto::ImportOptions opts;
  opts.inputs = {path};
  auto job = kineto::ImportKineto(opts);
  ASSERT_TRUE(job.ok()) << job.status().message();
  TempDir dir;
  ASSERT_TRUE(cli::WriteImportedJob(job.value(), dir / "nq.h5", "test").ok());
  auto reader = ProfileReader::Open(dir / "nq.h5");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto trace = CollectRankGpuTrace(*reader.value(), 0);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const auto queue = ComputeQueueLength(trace.value());
  const LaunchStats launch = ComputeLaunchStats(trace.value());
  ASSERT_FALSE(queue.empty());
  uint64_t steps = 0;
  for (const auto& q : queue) {
    EXPECT_GE(q.min, 0.0) << "stream " << q.stream;
    EXPECT_LE(q.p25, q.p50);
    EXPECT_LE(q.p50, q.p75);
    EXPECT_LE(q.p75, q.max);
    steps += q.count;
  }
  EXPECT_EQ(steps, 2 * launch.pairs);
  EXPECT_GT(launch.pairs, 0u);
}

}  // namespace
}  // namespace commprof
