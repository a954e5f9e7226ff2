// Memory in use over time from allocation/free records (docs/metrics.md §7): the series, the
// /analysis/memory table, the JSON report's summary and the Chrome trace's counter tracks.
#include "analysis/metrics/memory_usage.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/export/chrome_trace.h"
#include "analysis/report/analysis_group.h"
#include "analysis/report/job_report.h"
#include "core/h5/h5_util.h"
#include "core/schema/enums.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;

constexpr uint8_t kDevice = 3, kPinned = 2, kManaged = 5;  // CUpti_ActivityMemoryKind

// A MEMORY2 record as the CUPTI source stores it (docs/file-format.md, kinds 14/15): start = end =
// the timestamp, seq = address, bytes = size, subtype = memory kind.
commprof_event Mem(bool alloc, uint64_t t, uint64_t address, uint64_t bytes, uint16_t device = 0,
                   uint8_t kind = kDevice) {
  commprof_event e{};
  e.kind = alloc ? COMMPROF_KIND_MEM_ALLOC : COMMPROF_KIND_MEM_FREE;
  e.start_ns = e.end_ns = t;
  e.seq = address;
  e.bytes = bytes;
  e.device = device;
  e.subtype = kind;
  e.peer = COMMPROF_NO_PEER;
  return e;
}

TEST(MemoryUsage, FreesSubtractWhatWasAllocatedAtTheirAddressAndUnknownFreesChangeNothing) {
  MemoryUsageBuilder b(0, ClockModel{});
  // Two chunks, the second holding an earlier record (stored order is not time order).
  std::vector<commprof_event> first = {Mem(true, 100, 0xA000, 1000), Mem(true, 200, 0xB000, 500),
                                       Mem(false, 300, 0xA000, 0)};     // the free's own size is not trusted
  std::vector<commprof_event> second = {Mem(false, 400, 0xDEAD, 4096),  // allocated before tracing
                                        Mem(true, 150, 0xC000, 2000),   // earlier than the free above
                                        Mem(true, 500, 0xB000, 700)};   // B again without its free
  b.Add(first);
  b.Add(second);
  auto series = b.Finish();
  ASSERT_EQ(series.size(), 1u);
  const MemorySeries& s = series[0];
  EXPECT_EQ(s.device, 0u);
  EXPECT_EQ(s.memory_kind, kDevice);
  // time order: +1000 (100), +2000 (150), +500 (200), -1000 (300), unmatched (400), B 500 -> 700 (500)
  const std::vector<std::pair<int64_t, int64_t>> want = {{100, 1000}, {150, 3000}, {200, 3500},
                                                         {300, 2500}, {400, 2500}, {500, 2700}};
  ASSERT_EQ(s.points.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(s.points[i].time_ns, want[i].first) << i;
    EXPECT_EQ(s.points[i].bytes_in_use, want[i].second) << i;
  }
  EXPECT_EQ(s.points[4].delta_bytes, 0);
  EXPECT_EQ(s.points[5].delta_bytes, 200);
  EXPECT_EQ(s.peak_bytes, 3500);
  EXPECT_EQ(s.peak_time_ns, 200);
  EXPECT_EQ(s.final_bytes, 2700);
  EXPECT_EQ(s.allocs, 4u);
  EXPECT_EQ(s.frees, 2u);
  EXPECT_EQ(s.unmatched_frees, 1u);
}

TEST(MemoryUsage, DevicesAndMemoryKindsAreSeparateSeriesAndOtherKindsAreIgnored) {
  MemoryUsageBuilder b(7, ClockModel{});
  commprof_event kernel{};
  kernel.kind = COMMPROF_KIND_COMPUTE_KERNEL;
  kernel.bytes = 1 << 30;
  std::vector<commprof_event> ev = {
      Mem(true, 10, 0x1, 64, 0),           Mem(true, 20, 0x1, 128, 1),           kernel,
      Mem(true, 30, 0x2, 256, 0, kPinned), Mem(true, 40, 0x3, 512, 0, kManaged), Mem(false, 50, 0x1, 64, 1)};
  b.Add(ev);
  auto series = b.Finish();
  ASSERT_EQ(series.size(), 4u);  // (0, device), (0, pinned), (0, managed), (1, device), by (device, kind)
  EXPECT_EQ(series[0].device, 0u);
  EXPECT_EQ(series[0].memory_kind, kPinned);
  EXPECT_EQ(series[0].peak_bytes, 256);
  EXPECT_EQ(series[1].memory_kind, kDevice);
  EXPECT_EQ(series[1].peak_bytes, 64);
  EXPECT_EQ(series[2].memory_kind, kManaged);
  EXPECT_EQ(series[3].device, 1u);
  EXPECT_EQ(series[3].peak_bytes, 128);
  EXPECT_EQ(series[3].final_bytes, 0);  // freed on device 1: the address is per device
  for (const auto& s : series) EXPECT_EQ(s.rank, 7u);
  EXPECT_STREQ(schema::MemoryKindName(kDevice), "device");
  EXPECT_STREQ(schema::MemoryKindName(kPinned), "pinned");
  EXPECT_STREQ(schema::MemoryKindName(200), "unknown");
}

TEST(MemoryUsage, NoAllocationRecordsNoSeries) {
  MemoryUsageBuilder b(0, ClockModel{});
  EXPECT_TRUE(b.Finish().empty());
}

template <typename T>
std::vector<T> ReadColumn(hid_t dset, const char* field, hid_t mem_type) {
  h5::Handle t(H5Tcreate(H5T_COMPOUND, sizeof(T)));
  H5Tinsert(t.get(), field, 0, mem_type);
  h5::Handle space(H5Dget_space(dset));
  std::vector<T> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space.get())));
  EXPECT_GE(H5Dread(dset, t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  return v;
}

// Rank 1's clock is 5000 ns behind rank 0's: its series is on the aligned clock everywhere.
TEST(MemoryUsage, SeriesReachTheAnalysisGroupTheJsonReportAndTheChromeTrace) {
  TempDir dir;
  const std::string path = dir / "mem.h5";
  std::vector<RankData> ranks(2);
  ranks[0].events = {Mem(true, 1000, 0x10, 1 << 20), Mem(false, 3000, 0x10, 1 << 20)};
  ranks[1].events = {Mem(true, 1000, 0x20, 4 << 20), Mem(true, 2000, 0x30, 2 << 20)};
  ranks[1].points = {ClockPoint{0, 5000, 10}};
  JobReport report;
  {
    auto reader = test_support::WriteProfile(path, ranks);
    ASSERT_NE(reader, nullptr);
    auto rep = AnalyzeJob(*reader);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    report = rep.value();
    ASSERT_EQ(rep.value().memory.size(), 2u);
    auto j = ReportToJson(rep.value());
    ASSERT_EQ(j["memory"].size(), 2u);
    EXPECT_EQ(j["memory"][1]["rank"], 1);
    EXPECT_EQ(j["memory"][1]["memory_kind"], "device");
    EXPECT_EQ(j["memory"][1]["peak_bytes"], 6 << 20);
    EXPECT_EQ(j["memory"][1]["peak_time_ns"], 7000);
    EXPECT_EQ(j["memory"][0]["final_bytes"], 0);
    std::ostringstream text;
    WriteTextReport(rep.value(), text);
    EXPECT_NE(text.str().find("memory in use"), std::string::npos);

    std::ostringstream trace;
    TraceExportStats stats;
    ASSERT_TRUE(WriteChromeTrace(*reader, trace, {}, &stats).ok());
    auto tj = nlohmann::json::parse(trace.str());
    std::vector<nlohmann::json> counters;
    for (const auto& e : tj["traceEvents"])
      if (e["ph"] == "C") counters.push_back(e);
    ASSERT_EQ(counters.size(), 4u);
    EXPECT_EQ(stats.counters, 4u);
    // origin = the earliest event on the aligned clock: rank 0's alloc at 1000
    EXPECT_EQ(counters[0]["pid"], 1);
    EXPECT_EQ(counters[0]["name"], "memory in use: device 0 device");
    EXPECT_DOUBLE_EQ(counters[1]["ts"].get<double>(), 2.0);  // 3000 - 1000 ns, in us
    EXPECT_EQ(counters[1]["args"]["bytes"], 0);
    EXPECT_EQ(counters[3]["pid"], 2);
    EXPECT_DOUBLE_EQ(counters[3]["ts"].get<double>(), 6.0);  // 2000 + 5000 - 1000
    EXPECT_EQ(counters[3]["args"]["bytes"], 6 << 20);
  }
  ASSERT_TRUE(WriteAnalysisGroup(path, report).ok());  // the reader is closed: the file opens for writing
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_TRUE(f.valid());
  h5::Handle d(H5Dopen2(f.get(), "/analysis/memory", H5P_DEFAULT));
  ASSERT_TRUE(d.valid());
  EXPECT_EQ(ReadColumn<uint32_t>(d.get(), "rank", H5T_NATIVE_UINT32), (std::vector<uint32_t>{0, 0, 1, 1}));
  EXPECT_EQ(ReadColumn<int64_t>(d.get(), "time_ns", H5T_NATIVE_INT64), (std::vector<int64_t>{1000, 3000, 6000, 7000}));
  EXPECT_EQ(ReadColumn<int64_t>(d.get(), "bytes_in_use", H5T_NATIVE_INT64),
            (std::vector<int64_t>{1 << 20, 0, 4 << 20, 6 << 20}));
  EXPECT_EQ(ReadColumn<int64_t>(d.get(), "delta_bytes", H5T_NATIVE_INT64),
            (std::vector<int64_t>{1 << 20, -(1 << 20), 4 << 20, 2 << 20}));
  EXPECT_EQ(ReadColumn<uint8_t>(d.get(), "memory_kind", H5T_NATIVE_UINT8), (std::vector<uint8_t>{3, 3, 3, 3}));
}

// Host memory (device 0xFFFF: an imported trace's CPU allocations) is named "host" by every output
// that shows a device: the text report, the Chrome counter track, the memory timeline's label.
TEST(MemoryUsage, HostMemoryIsNamedHostNotDevice65535) {
  TempDir dir;
  const std::string path = dir / "host_mem.h5";
  constexpr uint8_t kPageable = 1;
  std::vector<RankData> ranks(1);
  ranks[0].events = {Mem(true, 1000, 0x10, 1 << 20, COMMPROF_HOST_DEVICE, kPageable),
                     Mem(true, 2000, 0x20, 2 << 20, 0, kDevice)};
  auto reader = test_support::WriteProfile(path, ranks);
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  std::ostringstream text;
  WriteTextReport(rep.value(), text);
  EXPECT_EQ(text.str().find("65535"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find(" host pageable"), std::string::npos) << text.str();

  std::ostringstream trace;
  ASSERT_TRUE(WriteChromeTrace(*reader, trace, {}, nullptr).ok());
  const nlohmann::json tj = nlohmann::json::parse(trace.str());
  std::vector<std::string> names;
  for (const auto& e : tj["traceEvents"]) {
    if (e["ph"] == "C") {
      names.push_back(e["name"]);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"memory in use: device 0 device", "memory in use: host pageable"}));
  EXPECT_EQ(MemoryDeviceLabel(COMMPROF_HOST_DEVICE), "host");
  EXPECT_EQ(MemoryDeviceLabel(3), "cuda:3");
}

}  // namespace
}  // namespace commprof
