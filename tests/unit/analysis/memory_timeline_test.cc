// The memory timeline (docs/metrics.md §7.1-§7.3, docs/memory-timeline.md): a planted allocation
// pattern written with the project's writer, its peaks, live sets and names recovered exactly; the
// JSON document parsed back against the same truth; the page's escaping; the Kineto importer's
// [memory] fields.
#include "analysis/metrics/memory_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/export/memory_html.h"
#include "analysis/export/memory_json.h"
#include "analysis/load/kineto_trace.h"
#include "analysis/metrics/memory_usage.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;

constexpr uint8_t kPageable = 1, kPinned = 2, kDevice = 3, kManaged = 5, kDeviceStatic = 6;
constexpr int64_t kMs = 1'000'000;
constexpr uint64_t kGiB = 1ull << 30, kMiB = 1ull << 20;

commprof_event Mem(bool alloc, int64_t t, uint64_t address, uint64_t bytes, uint16_t device, uint8_t kind,
                   uint32_t correlation = 0, uint32_t thread = 0xFFFFFFFFu, uint32_t name = 0) {
  commprof_event e{};
  e.kind = alloc ? COMMPROF_KIND_MEM_ALLOC : COMMPROF_KIND_MEM_FREE;
  e.start_ns = e.end_ns = static_cast<uint64_t>(t);
  e.seq = address;
  e.bytes = bytes;
  e.device = device;
  e.subtype = kind;
  e.correlation = correlation;
  e.thread_id = thread;
  e.name_id = name;
  e.peer = COMMPROF_NO_PEER;
  return e;
}

commprof_event Span(uint8_t kind, int64_t start, int64_t end, uint32_t name, uint32_t thread,
                    uint32_t correlation = 0) {
  commprof_event e{};
  e.kind = kind;
  e.start_ns = static_cast<uint64_t>(start);
  e.end_ns = static_cast<uint64_t>(end);
  e.name_id = name;
  e.thread_id = thread;
  e.correlation = correlation;
  e.device = COMMPROF_HOST_DEVICE;
  e.peer = COMMPROF_NO_PEER;
  return e;
}

// The planted job (aligned times; rank 1's clock reads 1 ms behind rank 0's):
//   rank 0, cuda:0: 1 GiB device at 5 ms (inside aten::empty, itself inside forward, thread 9),
//     256 MiB pinned at 6 ms (cudaHostAlloc, correlation 5); the 1 GiB freed at 8 ms; a free of an
//     address never allocated at 9 ms; 64 MiB device at 10 ms.
//     Peak 1.25 GiB at 6 ms: device 1 GiB + pinned 256 MiB; live: the 1 GiB, then the 256 MiB.
//   rank 0, host: an imported CPU block of 100 B at 1 ms whose Total Allocated says 1100:
//     1000 B were in use before the trace.
//   rank 1, cuda:1: a static 4096 B block named with markup at 1 ms; twelve 1 KiB managed blocks
//     at 2.0-3.1 ms; 2 GiB managed at 12 ms (cudaMallocManaged, correlation 77), freed at 13 ms.
//     Peak 2 GiB + 16 KiB at 12 ms; 14 live, the 10 largest listed, 4 more of 4 KiB.
//   rank 2: no allocation record.
constexpr const char* kHostile = "weights<script>alert(1)</script>&\"'";

std::vector<RankData> PlantedJob() {
  std::vector<RankData> ranks(3);
  ranks[0].strings = {"", "forward", "aten::empty", "cudaHostAlloc", "[memory]"};
  ranks[0].events = {
      Span(COMMPROF_KIND_HOST_OP, 0, 20 * kMs, 1, 9),
      Span(COMMPROF_KIND_HOST_OP, 4 * kMs, 5 * kMs + kMs / 2, 2, 9),
      Mem(true, 5 * kMs, 0xA000, kGiB, 0, kDevice, 0, 9, 4),
      Span(COMMPROF_KIND_CUDA_API, 6 * kMs - 1000, 6 * kMs + 1000, 3, 1, 5),
      Mem(true, 6 * kMs, 0xB000, 256 * kMiB, 0, kPinned, 5),
      Mem(false, 8 * kMs, 0xA000, kGiB, 0, kDevice),
      Mem(false, 9 * kMs, 0xDEAD, 4096, 0, kDevice),
      Mem(true, 10 * kMs, 0xC000, 64 * kMiB, 0, kDevice),
  };
  commprof_event cpu = Mem(true, 1 * kMs, 0x77, 100, COMMPROF_HOST_DEVICE, kPageable, 0, 9, 4);
  cpu.comm_id = 1100;  // the importer's Total Allocated
  ranks[0].events.push_back(cpu);
  ranks[1].strings = {"", kHostile, "cudaMallocManaged"};
  ranks[1].points = {ClockPoint{0, kMs, 10}};
  const int64_t behind = kMs;  // local = aligned - 1 ms
  ranks[1].events.push_back(Mem(true, 1 * kMs - behind, 0x5000, 4096, 1, kDeviceStatic, 0, 0xFFFFFFFFu, 1));
  for (int i = 0; i < 12; ++i) {
    ranks[1].events.push_back(Mem(true, 2 * kMs + i * 100'000 - behind, 0x9000 + i, 1024, 1, kManaged));
  }
  ranks[1].events.push_back(Span(COMMPROF_KIND_CUDA_API, 12 * kMs - behind - 500, 12 * kMs - behind + 500, 2, 1, 77));
  ranks[1].events.push_back(Mem(true, 12 * kMs - behind, 0xF000, 2 * kGiB, 1, kManaged, 77));
  ranks[1].events.push_back(Mem(false, 13 * kMs - behind, 0xF000, 2 * kGiB, 1, kManaged, 78));
  ranks[2].events = {test_support::events::Collective(COMMPROF_OP_BARRIER, 0, 100, 200)};
  return ranks;
}

TEST(MemoryTimeline, PlantedPatternGivesExactPeaksLiveSetsAndNames) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "mem.h5", PlantedJob());
  ASSERT_NE(reader, nullptr);
  auto t = BuildMemoryTimeline(*reader, {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->devices.size(), 3u);
  EXPECT_EQ(t->ranks_without_records, std::vector<uint32_t>{2});
  EXPECT_EQ(t->start_ns, 1 * kMs);
  EXPECT_EQ(t->end_ns, 13 * kMs);

  const DeviceTimeline& g0 = t->devices[0];
  EXPECT_EQ(g0.rank, 0u);
  EXPECT_EQ(g0.device, 0u);
  EXPECT_EQ(g0.categories, (std::vector<uint8_t>{kPinned, kDevice}));
  EXPECT_EQ(g0.time_ns, (std::vector<int64_t>{5 * kMs, 6 * kMs, 8 * kMs, 9 * kMs, 10 * kMs}));
  const int64_t G = static_cast<int64_t>(kGiB), M = static_cast<int64_t>(kMiB);
  EXPECT_EQ(g0.in_use[0], (std::vector<int64_t>{0, 256 * M, 256 * M, 256 * M, 256 * M}));
  EXPECT_EQ(g0.in_use[1], (std::vector<int64_t>{G, G, 0, 0, 64 * M}));
  EXPECT_EQ(g0.peak_bytes, G + 256 * M);
  EXPECT_EQ(g0.peak_time_ns, 6 * kMs);
  EXPECT_EQ(g0.peak_by_category, (std::vector<int64_t>{256 * M, G}));
  EXPECT_EQ(g0.unmatched_frees, 1u);
  EXPECT_EQ(g0.allocs, 3u);
  EXPECT_EQ(g0.frees, 2u);
  EXPECT_EQ(g0.final_bytes, 320 * M);
  EXPECT_FALSE(g0.baseline_bytes.has_value());
  ASSERT_EQ(g0.live.size(), 2u);
  EXPECT_EQ(g0.live_count, 2u);
  EXPECT_EQ(g0.live[0].address, 0xA000u);
  EXPECT_EQ(g0.live[0].bytes, G);
  EXPECT_EQ(g0.live[0].allocated_ns, 5 * kMs);
  EXPECT_EQ(g0.live[0].name, "");                     // "[memory]" says nothing
  EXPECT_EQ(g0.live[0].allocated_by, "aten::empty");  // the innermost op enclosing it on its thread
  EXPECT_EQ(g0.live[1].address, 0xB000u);
  EXPECT_EQ(g0.live[1].memory_kind, kPinned);
  EXPECT_EQ(g0.live[1].allocated_by, "cudaHostAlloc");  // by correlation id

  const DeviceTimeline& host = t->devices[1];
  EXPECT_EQ(host.device, COMMPROF_HOST_DEVICE);
  EXPECT_EQ(host.peak_bytes, 100);
  ASSERT_TRUE(host.baseline_bytes.has_value());
  EXPECT_EQ(*host.baseline_bytes, 1000);
  EXPECT_EQ(host.live[0].allocated_by, "forward");

  const DeviceTimeline& g1 = t->devices[2];
  EXPECT_EQ(g1.rank, 1u);
  EXPECT_EQ(g1.device, 1u);
  EXPECT_EQ(g1.categories, (std::vector<uint8_t>{kManaged, kDeviceStatic}));
  EXPECT_EQ(g1.peak_time_ns, 12 * kMs);  // on the aligned clock
  EXPECT_EQ(g1.peak_bytes, 2 * G + 4096 + 12 * 1024);
  EXPECT_EQ(g1.live_count, 14u);
  ASSERT_EQ(g1.live.size(), 10u);
  EXPECT_EQ(g1.live[0].bytes, 2 * G);
  EXPECT_EQ(g1.live[0].allocated_by, "cudaMallocManaged");
  EXPECT_EQ(g1.live[1].bytes, 4096);
  EXPECT_EQ(g1.live[1].name, kHostile);
  EXPECT_EQ(g1.live[2].allocated_ns, 2 * kMs);  // equal sizes: the earliest first
  EXPECT_EQ(g1.live[9].allocated_ns, 2 * kMs + 7 * 100'000);
  EXPECT_EQ(g1.more_bytes, 4 * 1024);
  EXPECT_EQ(g1.final_bytes, 4096 + 12 * 1024);
}

TEST(MemoryTimeline, CategoriesAgreeWithMemoryUsageAtEveryRecord) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "mem.h5", PlantedJob());
  ASSERT_NE(reader, nullptr);
  auto t = BuildMemoryTimeline(*reader, {});
  auto usage = ComputeMemoryUsage(*reader);
  ASSERT_TRUE(t.ok() && usage.ok());
  size_t checked = 0;
  for (const MemorySeries& s : usage.value()) {
    for (const DeviceTimeline& d : t->devices) {
      for (size_t c = 0; c < d.categories.size(); ++c) {
        if (d.rank != s.rank || d.device != s.device || d.categories[c] != s.memory_kind) continue;
        // memory_usage has one point per record of the kind; the timeline holds each value until
        // the device's next record of any kind.
        for (const MemoryPoint& p : s.points) {
          size_t i = 0;
          while (i + 1 < d.time_ns.size() && d.time_ns[i + 1] <= p.time_ns) ++i;
          EXPECT_EQ(d.in_use[c][i], p.bytes_in_use) << "rank " << s.rank << " kind " << int(s.memory_kind);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 5u + 1u + 1u + 14u);
}

TEST(MemoryTimeline, RankSelectionReadsOnlyThoseRanks) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "mem.h5", PlantedJob());
  ASSERT_NE(reader, nullptr);
  MemoryTimelineOptions o;
  o.ranks = {1, 2};
  auto t = BuildMemoryTimeline(*reader, o);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->devices.size(), 1u);
  EXPECT_EQ(t->devices[0].rank, 1u);
  EXPECT_EQ(t->start_ns, 1 * kMs);
  EXPECT_EQ(t->ranks_without_records, std::vector<uint32_t>{2});
}

TEST(MemoryTimeline, DownsamplingBoundsThePointsAndKeepsEveryBucketsExtremesAndThePeak) {
  DeviceTimeline d;
  d.categories = {kDevice};
  d.in_use.resize(1);
  std::mt19937_64 rng(7);
  int64_t v = 0;
  for (int i = 0; i < 100'000; ++i) {
    v = std::max<int64_t>(0, v + static_cast<int64_t>(rng() % 2001) - 1000);
    d.time_ns.push_back(i * 10);
    d.in_use[0].push_back(i == 61'234 ? v + 10'000'000 : v);  // one narrow spike
  }
  d.peak_index = 61'234;
  const auto keep = DownsampleIndices(d, 400, 0, 999'990);
  EXPECT_LE(keep.size(), 400u);
  EXPECT_GE(keep.size(), 300u);
  EXPECT_TRUE(std::is_sorted(keep.begin(), keep.end()));
  EXPECT_EQ(std::adjacent_find(keep.begin(), keep.end()), keep.end());
  EXPECT_EQ(keep.front(), 0u);
  EXPECT_EQ(keep.back(), 99'999u);
  EXPECT_NE(std::find(keep.begin(), keep.end(), 61'234u), keep.end());
  // Every bucket's maximum is among the points kept (100 buckets of 1000 records).
  for (int b = 0; b < 100; ++b) {
    auto first = d.in_use[0].begin() + b * 1000;
    const size_t argmax = static_cast<size_t>(std::max_element(first, first + 1000) - d.in_use[0].begin());
    EXPECT_NE(std::find(keep.begin(), keep.end(), argmax), keep.end()) << "bucket " << b;
  }
  EXPECT_EQ(DownsampleIndices(d, 0, 0, 999'990).size(), 100'000u);  // 0: every record
}

TEST(MemoryTimelineJson, DocumentParsesBackToThePlantedTruth) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "mem.h5", PlantedJob());
  ASSERT_NE(reader, nullptr);
  auto t = BuildMemoryTimeline(*reader, {});
  ASSERT_TRUE(t.ok());
  std::ostringstream out;
  WriteMemoryTimelineJson(t.value(), {.file = "mem.h5", .window = 3, .max_points = 0}, out);
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["schema"], "commprof-memory-timeline");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["file"], "mem.h5");
  EXPECT_EQ(j["window"], 3);
  EXPECT_EQ(j["start_ns"], 1 * kMs);
  EXPECT_EQ(j["end_ns"], 13 * kMs);
  EXPECT_EQ(j["ranks_without_records"], nlohmann::json::array({2}));
  ASSERT_EQ(j["devices"].size(), 3u);
  const auto& g0 = j["devices"][0];
  EXPECT_EQ(g0["rank"], 0);
  EXPECT_EQ(g0["device"], 0);
  EXPECT_EQ(g0["label"], "cuda:0");
  EXPECT_EQ(g0["categories"], nlohmann::json::array({"pinned", "device"}));
  EXPECT_EQ(g0["memory_kinds"], nlohmann::json::array({kPinned, kDevice}));
  EXPECT_EQ(g0["unmatched_frees"], 1);
  EXPECT_TRUE(g0["baseline_bytes"].is_null());
  EXPECT_EQ(g0["peak"]["time_ns"], 6 * kMs);
  EXPECT_EQ(g0["peak"]["bytes"], kGiB + 256 * kMiB);
  EXPECT_EQ(g0["peak"]["by_category"], nlohmann::json::array({256 * kMiB, kGiB}));
  EXPECT_EQ(g0["peak"]["live"][0]["address"], 0xA000);
  EXPECT_EQ(g0["peak"]["live"][0]["bytes"], kGiB);
  EXPECT_EQ(g0["peak"]["live"][0]["category"], "device");
  EXPECT_EQ(g0["peak"]["live"][0]["allocated_ns"], 5 * kMs);
  EXPECT_EQ(g0["peak"]["live"][0]["allocated_by"], "aten::empty");
  EXPECT_EQ(g0["peak"]["more_count"], 0);
  EXPECT_EQ(g0["points"]["records"], 5);
  EXPECT_EQ(g0["points"]["downsampled"], false);
  EXPECT_EQ(g0["points"]["time_ns"], nlohmann::json::array({5 * kMs, 6 * kMs, 8 * kMs, 9 * kMs, 10 * kMs}));
  EXPECT_EQ(g0["points"]["total"][1], kGiB + 256 * kMiB);
  EXPECT_EQ(g0["points"]["by_category"][1][2], 0);
  const auto& host = j["devices"][1];
  EXPECT_TRUE(host["device"].is_null());
  EXPECT_EQ(host["label"], "host");
  EXPECT_EQ(host["baseline_bytes"], 1000);
  const auto& g1 = j["devices"][2];
  EXPECT_EQ(g1["peak"]["live_count"], 14);
  EXPECT_EQ(g1["peak"]["live"].size(), 10u);
  EXPECT_EQ(g1["peak"]["live"][1]["name"], kHostile);
  EXPECT_EQ(g1["peak"]["more_count"], 4);
  EXPECT_EQ(g1["peak"]["more_bytes"], 4096);

  std::ostringstream small;
  WriteMemoryTimelineJson(t.value(), {.file = "mem.h5", .window = std::nullopt, .max_points = 4}, small);
  const auto s = nlohmann::json::parse(small.str());
  EXPECT_TRUE(s["window"].is_null());
  EXPECT_EQ(s["max_points"], 4);
  const auto& p1 = s["devices"][2]["points"];
  EXPECT_EQ(p1["downsampled"], true);
  EXPECT_EQ(p1["records"], 15);
  EXPECT_LE(p1["time_ns"].size(), 4u);
  // The peak survives: one bucket holds all 15 records, its highest is kept.
  bool has_peak = false;
  for (size_t i = 0; i < p1["time_ns"].size(); ++i)
    has_peak = has_peak || (p1["time_ns"][i] == 12 * kMs && p1["total"][i] == 2 * kGiB + 4096 + 12 * 1024);
  EXPECT_TRUE(has_peak);
}

TEST(MemoryTimelineHtml, StringsFromTheFileStayTextAndTheDataCannotCloseItsScript) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "mem.h5", PlantedJob());
  ASSERT_NE(reader, nullptr);
  auto t = BuildMemoryTimeline(*reader, {});
  ASSERT_TRUE(t.ok());
  std::ostringstream out;
  WriteMemoryTimelineHtml(t.value(), {.file = "a<b>.h5", .window = std::nullopt, .max_points = 1000}, out);
  const std::string page = out.str();
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(page.find("a<b>.h5"), std::string::npos);
  EXPECT_NE(page.find("a&lt;b&gt;.h5"), std::string::npos);
  EXPECT_NE(page.find("weights&lt;script&gt;alert(1)&lt;/script&gt;&amp;"), std::string::npos);  // the table
  EXPECT_NE(page.find("weights\\u003cscript>alert(1)\\u003c/script>"), std::string::npos);       // the data
  // Exactly the page's two scripts: the data and the drawing code.
  size_t scripts = 0;
  for (size_t at = page.find("<script"); at != std::string::npos; at = page.find("<script", at + 1)) ++scripts;
  EXPECT_EQ(scripts, 2u);
  EXPECT_NE(page.find("4 more, 4.00 KiB in all"), std::string::npos);
}

TEST(MemoryTimelineKineto, MemoryInstantsKeepAddressKindDeviceAndTotalAllocated) {
  TempDir tmp;
  const std::string path = tmp / "mem.json";
  {
    std::ofstream f(path);
    f << R"({"traceEvents": [
{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 10,
 "args": {"Device Type": 1, "Device Id": 3, "Addr": 139926520725504, "Bytes": 5242880, "Total Allocated": 9000000}},
{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 11,
 "args": {"Device Type": 0, "Device Id": -1, "Addr": 4096, "Bytes": -64, "Total Allocated": 0}},
{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 12,
 "args": {"Device Type": 1, "Device Id": 0, "Bytes": 8}}]})";
  }
  auto t = kineto::ReadKinetoTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->events.size(), 3u);
  const commprof_event& a = t->events[0];
  EXPECT_EQ(a.kind, COMMPROF_KIND_MEM_ALLOC);
  EXPECT_EQ(a.seq, 139926520725504u);
  EXPECT_EQ(a.bytes, 5242880u);
  EXPECT_EQ(a.device, 3u);
  EXPECT_EQ(a.subtype, kDevice);
  EXPECT_EQ(a.comm_id, 9000000u);
  EXPECT_EQ(a.thread_id, 2u);
  const commprof_event& f = t->events[1];
  EXPECT_EQ(f.kind, COMMPROF_KIND_MEM_FREE);
  EXPECT_EQ(f.seq, 4096u);
  EXPECT_EQ(f.bytes, 64u);
  EXPECT_EQ(f.device, COMMPROF_HOST_DEVICE);
  EXPECT_EQ(f.subtype, kPageable);
  EXPECT_EQ(f.comm_id, 0u);
  EXPECT_EQ(t->events[2].seq, 0u);  // no Addr: address 0
  EXPECT_EQ(t->events[2].comm_id, 0u);
}

}  // namespace
}  // namespace commprof
