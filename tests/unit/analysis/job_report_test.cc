// The JobReport behind `commprof report`/`check` and the /analysis group, on a small file written
// with the real Hdf5Writer: hand-computed figures, the JSON schema's keys, the text layout, and the
// tables stored in the file read back through the HDF5 C API (h5py reads them in the e2e test).
#include "analysis/report/job_report.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/metrics/comm_label.h"
#include "analysis/report/analysis_group.h"
#include "analysis/report/html_report.h"
#include "analysis/report/report_json.h"
#include "analysis/report/report_model.h"
#include "analysis/report/text_report.h"
#include "core/h5/h5_util.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
using test_support::events::Collective;

// Three ranks, six allreduces of 1e6 bytes, 1 ms apart; rank 1's clock runs 50 us ahead (its
// clock points say reference = local - 50000), and it arrives 20 us late (aligned) every time.
// Aligned arrivals: 0 and 2 at t, 1 at t + 20000; every rank leaves at t + 30000.
// Per instance: skew 20000, waits 20000, 0, 20000 (total 40000), delay caused 20000 (second
// latest = t), transfer 30000 - 20000 = 10000 -> algbw 1e6 / 1e4 = 100 GB/s, busbw 100 x 4/3.
// Seq 6 has only ranks 0 and 1: incomplete. Delay costs (§9.1): rank 1 holds the two others
// 20000 ns in each of the 6 instances, directly: 6 x 2 x 20000 = 240000 ns, all of the attributed
// waiting, so it alone is named (§9.3), late in every call: persistent.
std::vector<RankData> Job() {
  std::vector<RankData> ranks(3);
  for (uint64_t s = 0; s < 6; ++s) {
    uint64_t t = 1000000 * (s + 1);
    ranks[0].events.push_back(Collective(COMMPROF_OP_ALLREDUCE, s, t, t + 30000, {.bytes = 1000000}));
    ranks[1].events.push_back(
        Collective(COMMPROF_OP_ALLREDUCE, s, t + 20000 + 50000, t + 30000 + 50000, {.bytes = 1000000}));
    ranks[2].events.push_back(Collective(COMMPROF_OP_ALLREDUCE, s, t, t + 30000, {.bytes = 1000000}));
  }
  ranks[0].events.push_back(Collective(COMMPROF_OP_ALLREDUCE, 6, 9000000, 9000100, {.bytes = 8}));
  ranks[1].events.push_back(Collective(COMMPROF_OP_ALLREDUCE, 6, 9050000, 9050100, {.bytes = 8}));
  ranks[0].points = {{0, 0, 0}, {10000000, 0, 0}};  // {local, offset (reference - local), half rtt}
  ranks[1].points = {{0, -50000, 100}, {10000000, -50000, 100}};
  ranks[2].points = {{0, 0, 100}, {10000000, 0, 100}};
  return ranks;
}

TEST(JobReport, FiguresJsonAndTextOfAHandMadeJob) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "job.h5", Job());
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  const WaitReport& w = rep->wait;
  EXPECT_EQ(w.matched, 6u);
  EXPECT_EQ(w.incomplete, 1u);
  EXPECT_EQ(rep->clock.violations, 0u);
  EXPECT_EQ(w.ranks[0].wait_time_ns, 6 * 20000);
  EXPECT_EQ(w.ranks[1].wait_time_ns, 0);
  EXPECT_EQ(w.ranks[1].times_last, 6u);
  EXPECT_EQ(w.ranks[1].delay_caused_ns, 6 * 20000);
  EXPECT_EQ(w.ranks[0].transfer_time_ns, 6 * 10000);
  ASSERT_EQ(w.types.size(), 1u);
  EXPECT_DOUBLE_EQ(w.types[0].algbw_gbps, 100.0);
  EXPECT_DOUBLE_EQ(w.types[0].busbw_gbps, 400.0 / 3.0);

  nlohmann::ordered_json j = ReportToJson(rep.value());
  EXPECT_EQ(j["schema"], "commprof-report");
  EXPECT_EQ(j["schema_version"], kReportSchemaVersion);
  EXPECT_EQ(j["world_size"], 3);
  EXPECT_EQ(j["instances"]["matched"], 6);
  EXPECT_EQ(j["instances"]["incomplete"], 1);
  EXPECT_EQ(j["instances"]["incomplete_list"][0]["ranks_present"], nlohmann::json::array({0, 1}));
  for (const char* key : {"rank", "host", "pid", "comm_time_ns", "wait_time_ns", "wait_share", "times_last",
                          "delay_caused_ns", "wait_imposed_ns", "transfer_time_ns"}) {
    EXPECT_TRUE(j["ranks"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["ranks"][1]["host"], "h1");
  EXPECT_EQ(j["ranks"][1]["pid"], 101);
  for (const char* key : {"type", "count", "bytes", "mean_duration_ns", "mean_wait_ns", "skew_p50_ns", "skew_p99_ns",
                          "busbw_gbps", "algbw_gbps", "mean_transfer_ns"}) {
    EXPECT_TRUE(j["collectives"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["collectives"][0]["skew_p99_ns"], 20000);
  ASSERT_EQ(j["stragglers"].size(), 1u);
  EXPECT_EQ(j["stragglers"][0]["rank"], 1);
  EXPECT_EQ(j["stragglers"][0]["host"], "h1");
  EXPECT_EQ(j["stragglers"][0]["delay_cost_ns"], 6 * 2 * 20000);
  EXPECT_EQ(j["stragglers"][0]["direct_ns"], 6 * 2 * 20000);
  EXPECT_EQ(j["stragglers"][0]["propagated_ns"], 0);
  EXPECT_EQ(j["stragglers"][0]["share"], 1.0);
  EXPECT_EQ(j["stragglers"][0]["pattern"], "persistent");
  EXPECT_EQ(j["stragglers"][0]["late_instances"], 6);
  EXPECT_EQ(j["stragglers"][0]["typical_lateness_ns"], 20000);
  ASSERT_EQ(j["stragglers"][0]["communicators"].size(), 1u);
  EXPECT_EQ(j["stragglers"][0]["communicators"][0]["name"], "MPI_COMM_WORLD");
  EXPECT_EQ(j["stragglers"][0]["communicators"][0]["members"], nlohmann::json::array({0, 1, 2}));
  EXPECT_EQ(j["delay"]["total_wait_ns"], 6 * 2 * 20000);
  EXPECT_EQ(j["delay"]["attributed_ns"], 6 * 2 * 20000);
  EXPECT_EQ(j["delay"]["unattributed_ns"], 0);
  EXPECT_EQ(j["ranks"][1]["delay_cost_ns"], 6 * 2 * 20000);
  EXPECT_EQ(j["ranks"][0]["delay_cost_ns"], 0);
  // rank 0's time: its waits charged to rank 1 (host MPI calls), the rest of its calls transfer
  EXPECT_EQ(j["ranks"][0]["time"]["wait_ns"], 6 * 20000);
  EXPECT_EQ(j["ranks"][0]["time"]["transfer_ns"], 6 * 10000);
  ASSERT_EQ(j["ranks"][0]["time"]["wait_by_culprit"].size(), 1u);
  EXPECT_EQ(j["ranks"][0]["time"]["wait_by_culprit"][0]["rank"], 1);
  EXPECT_EQ(j["ranks"][0]["time"]["wait_by_culprit"][0]["ns"], 6 * 20000);
  EXPECT_EQ(j["worst_instances"].size(), 6u);
  EXPECT_EQ(j["worst_instances"][0]["last_rank"], 1);
  EXPECT_EQ(j["clock"]["ranks"][1]["clock_offset_ns"], -50000);
  // lateness: rank 1 is 20 us late in every bin that has an instance, null where none started
  const auto& lat = j["lateness"];
  EXPECT_EQ(lat["bins"], kLatenessBins);
  int with_data = 0;
  for (const auto& v : lat["ranks"][1]["mean_lateness_ns"]) {
    if (v.is_null()) continue;
    ++with_data;
    EXPECT_EQ(v, 20000.0);
  }
  EXPECT_EQ(with_data, 6);

  std::ostringstream text;
  WriteTextReport(rep.value(), text);
  std::string t = text.str();
  EXPECT_NE(t.find("verdict: 1 straggler"), std::string::npos) << t;
  EXPECT_NE(t.find("rank 1 on h1 is a straggler"), std::string::npos) << t;
  EXPECT_NE(t.find("worst instances"), std::string::npos);
  EXPECT_NE(t.find("incomplete instances"), std::string::npos);
  std::istringstream lines(t);
  std::string line;
  std::getline(lines, line);  // the path
  while (std::getline(lines, line)) EXPECT_LE(line.size(), 100u) << line;
}

// Rejected inputs: the analysis stops with kCorrupt and a message naming the file, the rank's
// events dataset and the row, instead of measuring something wrong.
TEST(JobReport, MalformedInputsAreRejectedNamingFileRankAndRow) {
  struct Case {
    const char* what;
    std::function<void(std::vector<RankData>&)> spoil;
    const char* expected;
  };
  std::vector<Case> cases = {
      {"an event ending before it starts",
       [](std::vector<RankData>& r) { std::swap(r[2].events[1].start_ns, r[2].events[1].end_ns); },
       "/ranks/2/events row 1: mpi_collective ends before it starts"},
      // rank 0 records seq 3 twice: with three ranks it would otherwise look complete without rank 2
      {"a duplicated sequence number", [](std::vector<RankData>& r) { r[0].events.push_back(r[0].events[3]); },
       "/ranks/0/events row 7: a second allreduce with communicator 1 sequence 3 on the same rank"},
      {"ranks disagreeing on the operation",
       [](std::vector<RankData>& r) { r[1].events[2].subtype = COMMPROF_OP_BCAST; },
       "/ranks/1/events row 2: bcast with communicator 1 sequence 2, but rank 0 recorded allreduce"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    std::vector<RankData> job = Job();
    c.spoil(job);
    auto reader = test_support::WriteProfile(dir / "bad.h5", job);
    ASSERT_NE(reader, nullptr);
    auto rep = AnalyzeJob(*reader);
    ASSERT_FALSE(rep.ok()) << c.what;
    EXPECT_EQ(rep.status().code(), StatusCode::kCorrupt) << c.what;
    EXPECT_NE(rep.status().message().find(dir / "bad.h5"), std::string::npos) << rep.status().message();
    EXPECT_NE(rep.status().message().find(c.expected), std::string::npos) << c.what << ": " << rep.status().message();
  }
}

template <typename T>
T ReadField(hid_t dset, const char* field, hid_t mem_type, size_t row) {
  h5::Handle t(H5Tcreate(H5T_COMPOUND, sizeof(T)));
  H5Tinsert(t.get(), field, 0, mem_type);
  h5::Handle space(H5Dget_space(dset));
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<T> v(static_cast<size_t>(n));
  EXPECT_GE(H5Dread(dset, t.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  return row < v.size() ? v[row] : T{};
}

TEST(AnalysisGroup, StoresTheReportsTablesAndReplacesAnOlderGroup) {
  TempDir dir;
  std::string path = dir / "job.h5";
  {
    auto reader = test_support::WriteProfile(path, Job());
    ASSERT_NE(reader, nullptr);
  }
  for (int pass = 0; pass < 2; ++pass) {  // the second write replaces the first
    auto reader = ProfileReader::Open(path);
    ASSERT_TRUE(reader.ok());
    auto rep = AnalyzeJob(*reader.value());
    ASSERT_TRUE(rep.ok());
    reader.value().reset();
    Status st = WriteAnalysisGroup(path, rep.value());
    ASSERT_TRUE(st.ok()) << st.message();
  }
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_TRUE(f.valid());
  h5::Handle g(H5Gopen2(f.get(), "analysis", H5P_DEFAULT));
  ASSERT_TRUE(g.valid());
  EXPECT_EQ(h5::ReadIntAttr(g.get(), "straggler_rank"), 1);
  EXPECT_EQ(h5::ReadIntAttr(g.get(), "matched"), 6);
  EXPECT_EQ(h5::ReadIntAttr(g.get(), "incomplete"), 1);
  // rank 1's gap before each call is 20 us longer than the others' (it enters later, leaves with them)
  EXPECT_EQ(h5::ReadStringAttr(g.get(), "straggler_cause"), "compute");
  h5::Handle ranks(H5Dopen2(g.get(), "ranks", H5P_DEFAULT));
  EXPECT_EQ(ReadField<int64_t>(ranks.get(), "wait_time_ns", H5T_NATIVE_INT64, 2), 6 * 20000);
  EXPECT_EQ(ReadField<uint64_t>(ranks.get(), "times_last", H5T_NATIVE_UINT64, 1), 6u);
  h5::Handle inst(H5Dopen2(g.get(), "instances", H5P_DEFAULT));
  h5::Handle ispace(H5Dget_space(inst.get()));
  EXPECT_EQ(H5Sget_simple_extent_npoints(ispace.get()), 7);  // 6 matched + 1 incomplete, by first arrival
  EXPECT_EQ(ReadField<int64_t>(inst.get(), "straggler_rank", H5T_NATIVE_INT64, 0), 1);
  EXPECT_EQ(ReadField<int64_t>(inst.get(), "transfer_ns", H5T_NATIVE_INT64, 0), 10000);
  EXPECT_EQ(ReadField<uint8_t>(inst.get(), "complete", H5T_NATIVE_UINT8, 6), 0);
  EXPECT_EQ(ReadField<int64_t>(inst.get(), "straggler_rank", H5T_NATIVE_INT64, 6), -1);
  EXPECT_DOUBLE_EQ(ReadField<double>(inst.get(), "busbw_gbps", H5T_NATIVE_DOUBLE, 0), 400.0 / 3.0);
  h5::Handle arr(H5Dopen2(g.get(), "arrivals", H5P_DEFAULT));
  h5::Handle aspace(H5Dget_space(arr.get()));
  EXPECT_EQ(H5Sget_simple_extent_npoints(aspace.get()), 6 * 3 + 2);
  // instance 0's arrivals, by world rank: rank 1 is 20 us late on the aligned base
  EXPECT_EQ(ReadField<int64_t>(arr.get(), "start_ns", H5T_NATIVE_INT64, 1) -
                ReadField<int64_t>(arr.get(), "start_ns", H5T_NATIVE_INT64, 0),
            20000);
  EXPECT_EQ(ReadField<int64_t>(arr.get(), "wait_ns", H5T_NATIVE_INT64, 2), 20000);
  // the whole JSON report is stored too
  h5::Handle js(H5Dopen2(g.get(), "report_json", H5P_DEFAULT));
  char* text = nullptr;
  ASSERT_GE(H5Dread(js.get(), h5::VarStringType(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), 0);
  auto parsed = nlohmann::json::parse(text);
  H5free_memory(text);
  EXPECT_EQ(parsed["stragglers"][0]["rank"], 1);
}

// A report with one entry in every list, so its JSON holds every key the model has.
JobReport EveryListFilled() {
  JobReport r;
  r.info.path = "job.h5";
  r.info.job_id = "j";
  r.info.world_size = 3;  // ranks 1-2 never connected
  RankInfo ri;
  ri.host = "h";
  ri.damaged_tail = 5;  // read without a damaged last chunk: damaged_rows
  r.info.ranks.push_back(ri);
  r.info.faults.push_back({0u, "job.h5: /ranks/0/events records 7-11 cannot be read", true});
  r.info.faults.push_back({2u, "job.h5: /ranks/2/events row 0: unreadable"});
  r.wait.ranks.push_back(RankWaitMetrics{});
  r.wait.incomplete_list.push_back({1, 2, COMMPROF_OP_ALLREDUCE, 2, {0}});
  r.wait.types.push_back(TypeWaitMetrics{});
  r.wait.worst.push_back(WorstInstance{});
  // two stragglers: a periodic one (period) and a transient one (window), each with a communicator
  Straggler periodic;
  periodic.device = 0;
  periodic.saving_ns = 1;
  periodic.pattern = "periodic";
  periodic.communicators.push_back(StragglerCommunicator{});
  Straggler transient = periodic;
  transient.pattern = "transient";
  r.stragglers = {periodic, transient};
  r.delay.ranks.push_back(RankDelay{});
  RankTime time;
  time.wait_by_culprit.emplace_back(0, 1);
  r.time.push_back(time);
  r.wait.lateness.bins = 1;
  r.wait.lateness.mean_lateness_ns = {{1.0}};
  r.wait.lateness.times_last = {{0}};
  RankOverlap o;
  o.devices.push_back(DeviceOverlap{});
  r.overlap.push_back(o);
  r.p2p.ranks.push_back(P2PRankStats{});
  r.p2p.unmatched.push_back(UnmatchedP2P{});
  r.p2p.worst.push_back(P2PMessage{});
  r.memory.push_back(MemorySeries{});
  // a step in a window, with a named straggler (so window, top_cause and straggler are not null)
  StepRow step;
  step.window = 0;
  step.top_rank = 0;
  step.straggler = 0;
  step.ranks.push_back(StepRankFigures{});
  r.steps.steps.push_back(step);
  r.call_sites.sites.push_back(CallSite{});
  // A hang with every list of the hang object non-empty.
  hang::HangReport& h = r.hang.emplace().report;
  h.hang = true;
  h.culprits = {1};
  hang::CommFinding f;
  f.culprits = {1};
  f.completed = {2};
  f.waiting.push_back(hang::Waiter{});
  f.not_entered.push_back(hang::Absent{});
  f.mismatches.push_back({"ROOT", {{"root 0", {0}}}});
  h.comms.push_back(f);
  h.p2p.push_back(hang::P2pWait{});
  h.ranks.push_back(hang::RankPosition{});
  return r;
}

// Every key path of `j`: objects add ".key"; an array of objects is named "key[]" and its entries'
// keys follow it ("ranks[].rank"); an array of numbers is a value like any other.
void CollectKeys(const nlohmann::ordered_json& j, const std::string& prefix, std::set<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    const nlohmann::ordered_json& v = it.value();
    if (v.is_array() && !v.empty() && v.front().is_object()) {
      path += "[]";
      for (const auto& e : v) {
        CollectKeys(e, path, out);
      }
    } else if (v.is_object()) {
      CollectKeys(v, path, out);
    }
    out.insert(path);
  }
}

// The key column of docs/report-json.md's "Keys" table.
std::set<std::string> DocumentedKeys() {
  std::ifstream f(std::string(COMMPROF_SOURCE_DIR) + "/docs/report-json.md");
  EXPECT_TRUE(f) << "docs/report-json.md";
  std::set<std::string> keys;
  bool in_table = false;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("## ", 0) == 0) {
      in_table = line == "## Keys";
    }
    if (!in_table || line.rfind("| `", 0) != 0) {
      continue;
    }
    const size_t end = line.find('`', 3);
    if (end != std::string::npos) {
      keys.insert(line.substr(3, end - 3));
    }
  }
  return keys;
}

TEST(JobReport, EachInstanceIsMeasuredOnceForEveryReader) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "job.h5", Job());
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->measured.size(), rep->instances.size());  // 6 complete + 1 incomplete
  ASSERT_EQ(rep->measured.size(), 7u);
  for (size_t k = 0; k < rep->instances.size(); ++k) {
    const InstanceMetrics m = MeasureInstance(rep->instances[k], rep->wait.skew_threshold_ns);
    EXPECT_EQ(rep->measured[k].waits, m.waits) << k;
    EXPECT_EQ(rep->measured[k].transfers, m.transfers) << k;
    EXPECT_EQ(rep->measured[k].straggler_index, m.straggler_index) << k;
  }
  // the complete instances: waits 20000, 0, 20000 (rank 1 is 20 us late)
  EXPECT_EQ(rep->measured[0].waits, (std::vector<int64_t>{20000, 0, 20000}));
}

TEST(ReportJsonDoc, EveryKeyOfTheModelIsDocumentedAndNoOther) {
  std::set<std::string> produced;
  CollectKeys(ReportToJson(EveryListFilled()), "", produced);
  const std::set<std::string> documented = DocumentedKeys();
  EXPECT_GT(documented.size(), 100u);  // the table was found
  for (const std::string& k : produced) {
    EXPECT_TRUE(documented.count(k)) << k << " is in the report JSON but not in docs/report-json.md";
  }
  for (const std::string& k : documented) {
    EXPECT_TRUE(produced.count(k)) << k << " is in docs/report-json.md but not in the report JSON";
  }
}

TEST(ReportJson, ReadingBackWhatWasWrittenGivesTheSameDocument) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "job.h5", Job());
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  for (const JobReport& r : {rep.value(), EveryListFilled()}) {
    const nlohmann::ordered_json written = ReportToJson(r);
    auto model = ReportModelFromJson(written);
    ASSERT_TRUE(model.ok()) << model.status().message();
    EXPECT_EQ(ReportModelToJson(model.value()).dump(), written.dump());
  }
}

TEST(AnalysisGroup, AFileThatCannotBeOpenedForWritingIsAnErrorNamingIt) {
  TempDir dir;
  JobReport empty;
  Status st = WriteAnalysisGroup(dir / "missing.h5", empty);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("missing.h5"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace commprof

namespace commprof {
namespace {

TEST(CommLabel, IdsInHexExactNamesAndMemberRanges) {
  EXPECT_EQ(CommIdText(1), "0x1");
  EXPECT_EQ(CommIdText(0x8469003215c3130ull), "0x8469003215c3130");  // beyond a double's 53 bits: exact
  EXPECT_EQ(CommIdText(~0ull), "0xffffffffffffffff");
  EXPECT_EQ(CommName(COMMPROF_COMM_WORLD_ID, false), "MPI_COMM_WORLD");
  EXPECT_EQ(CommName(0xb0, false), "MPI communicator 0xb0");
  EXPECT_EQ(CommName(0xb0, true), "NCCL communicator 0xb0");
  EXPECT_EQ(MemberRanks({}), "members unknown");
  EXPECT_EQ(MemberRanks({5}), "rank 5");
  EXPECT_EQ(MemberRanks({3, 0, 1, 2, 8, 10, 11, 12, 2}), "ranks 0-3,8,10-12");
  EXPECT_EQ(MemberRanks({0, 2, 4, 6, 8}, 2), "ranks 0,2, ... 3 more");
}

// The text and HTML reports name a communicator the same way: the id in hex, the name, the member
// ranks; the HTML's comm cells are hex too (a decimal through a double would round a 64-bit id).
TEST(JobReport, TextAndHtmlShowCommunicatorsTheSameWayWithTheirMembers) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "job.h5", Job());
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  const ReportModel model = BuildReportModel(rep.value());
  ASSERT_TRUE(model.communicators.has_value());
  ASSERT_EQ(model.communicators->size(), 1u);
  const ReportModel::Communicator& c = model.communicators->front();
  EXPECT_EQ(c.comm_id, std::optional<uint64_t>(COMMPROF_COMM_WORLD_ID));
  EXPECT_EQ(c.name, std::optional<std::string>("MPI_COMM_WORLD"));
  EXPECT_EQ(c.members, std::optional<std::vector<int64_t>>(std::vector<int64_t>{0, 1, 2}));
  std::ostringstream text, html;
  WriteTextReport(model, text);
  ASSERT_TRUE(WriteHtmlReport(model, html).ok());
  EXPECT_NE(text.str().find("  0x1  MPI_COMM_WORLD: 3 ranks (ranks 0-2)\n"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("allreduce comm 0x1 seq 6: 2 of 3 ranks"), std::string::npos) << text.str();
  const std::string page = html.str();
  const size_t table = page.find("id=\"tbl-communicators\"");
  ASSERT_NE(table, std::string::npos);
  EXPECT_NE(page.find("<td class=\"n\" data-v=\"1\">0x1</td><td>MPI_COMM_WORLD</td>", table), std::string::npos);
  EXPECT_NE(page.find("<td>ranks 0-2</td>", table), std::string::npos);
  const size_t incomplete = page.find("id=\"tbl-incomplete\"");
  ASSERT_NE(incomplete, std::string::npos);
  EXPECT_NE(page.find("<td class=\"n\" data-v=\"1\">0x1</td>", incomplete), std::string::npos);
}

}  // namespace
}  // namespace commprof
