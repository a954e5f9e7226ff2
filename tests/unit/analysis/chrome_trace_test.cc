// Chrome trace export (analysis/export/chrome_trace.h) on a hand-written 3-rank file written with
// the real Hdf5Writer, read back with nlohmann::json (a second parser, not ours). Every expected
// value below is worked out by hand from the events and clock offsets in MakeJob().
#include "analysis/export/chrome_trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/export/perfetto_trace.h"
#include "analysis/load/profile_reader.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using nlohmann::json;
using test_support::RankData;
using test_support::TempDir;
using test_support::events::Collective;

commprof_event Ev(uint8_t kind, uint32_t name, uint64_t start, uint64_t end) {
  commprof_event e{};
  e.kind = kind;
  e.name_id = name;
  e.start_ns = start;
  e.end_ns = end;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

// Names with every escaping hazard: quote, backslash, newline, tab, U+0001, U+001F, a valid
// two-byte character (é = C3 A9), a stray FF, a truncated three-byte sequence (E2 82) followed by
// 'x', an encoded surrogate (ED A0 80: ED allows only 80..9F next, so ED, A0 and 80 are each
// ill-formed) and a valid euro sign (E2 82 AC).
const std::string kHostileName = "a\"b\\c\n\t\x01\x1f\xC3\xA9\xFF\xE2\x82x\xED\xA0\x80\xE2\x82\xAC";
// Its JSON text as the writer must print it (U+FFFD printed as its UTF-8 bytes EF BF BD)...
const std::string kHostileJsonText =
    "a\\\"b\\\\c\\n\\t\\u0001\\u001f\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBDx\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xE2\x82\xAC";
// ... and the string a JSON parser must get back: one U+FFFD for FF, one for E2 82 (the maximal
// subpart), three for ED A0 80.
const std::string kHostileDecoded =
    "a\"b\\c\n\t\x01\x1f\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBDx\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xE2\x82\xAC";
const std::string kHostileHost = "node\"2\\";

// A rank's clock: reference = local + offset everywhere, error bound 10 ns.
std::vector<ClockPoint> ConstantOffset(int64_t offset) { return {ClockPoint{0, offset, 10}}; }

// The job (times are local ns; reference = local + offset, one clock point per rank):
//   rank 0  offset     0  host h0, pid 100
//   rank 1  offset +2000  host h1, pid 101
//   rank 2  offset -1000  host node"2\, pid 102
// Reference times (what the trace shows, minus the origin 1000 = rank 0's MPI_Init start):
//   MPI_Init         r0 [1000,2000]   r1 [2000,2500]   r2 [2000,3000]
//   Allreduce seq 0  r0 [10000,30000] r1 [12500,30000] r2 [20000,30500]  (64 B; r2 last)
//   Iallreduce seq 1 r0 [40000,50000] r1 [42000,62000] r2 [44000,59000]  (non-blocking: unmatched)
//   Barrier seq 2    r0 [70000,80000] r1 [57000,72000] r2 [65001,80000]  (r0 last)
//   r0: mark "mark \"zero\"" at 5000; kernel on GPU 0 stream 7 [15000,16000] correlation 42;
//       MPI_Finalize [1234567891234,1234567891334]
//   r1: step 7 at 5000 (local 3000)
//   r2: mark with kHostileName at 6000 (local 7000)
// Rank 1's Barrier [57000,72000] starts inside its Iallreduce [42000,62000] and ends after it:
// a partial overlap, so it moves to a second lane.
std::vector<RankData> MakeJob() {
  std::vector<RankData> r(3);
  // string ids: 0 MPI_Init, 1 MPI_Allreduce, 2 MPI_Iallreduce, 3 MPI_Barrier, 4 rank-specific
  const std::vector<std::string> common = {"MPI_Init", "MPI_Allreduce", "MPI_Iallreduce", "MPI_Barrier"};
  for (auto& x : r) x.strings = common;
  r[0].points = ConstantOffset(0);
  r[0].host = "h0";
  r[0].strings.push_back("mark \"zero\"");
  r[0].strings.push_back("MPI_Finalize");
  r[0].strings.push_back("gemm_kernel");
  commprof_event kernel = Ev(COMMPROF_KIND_COMPUTE_KERNEL, 6, 15000, 16000);
  kernel.device = 0;
  kernel.thread_id = 7;
  kernel.correlation = 42;
  // Stored out of time order, as a collector that records at completion does.
  r[0].events = {
      Ev(COMMPROF_KIND_MPI_INIT, 0, 1000, 2000),
      Collective(COMMPROF_OP_ALLREDUCE, 0, 10000, 30000, {.bytes = 64, .name = 1}),
      Ev(COMMPROF_KIND_USER_MARK, 4, 5000, 5000),
      kernel,
      Collective(COMMPROF_OP_ALLREDUCE, 1, 40000, 50000, {.flags = COMMPROF_FLAG_NONBLOCKING, .bytes = 64, .name = 2}),
      Collective(COMMPROF_OP_BARRIER, 2, 70000, 80000, {.name = 3}),
      Ev(COMMPROF_KIND_MPI_FINALIZE, 5, 1234567891234, 1234567891334)};
  r[1].points = ConstantOffset(2000);
  r[1].host = "h1";
  r[1].strings.push_back("step");
  commprof_event step = Ev(COMMPROF_KIND_STEP, 4, 3000, 3000);
  step.seq = 7;
  r[1].events = {
      Ev(COMMPROF_KIND_MPI_INIT, 0, 0, 500), step,
      Collective(COMMPROF_OP_ALLREDUCE, 0, 10500, 28000, {.bytes = 64, .name = 1}),
      Collective(COMMPROF_OP_BARRIER, 2, 55000, 70000, {.name = 3}),
      Collective(COMMPROF_OP_ALLREDUCE, 1, 40000, 60000, {.flags = COMMPROF_FLAG_NONBLOCKING, .bytes = 64, .name = 2})};
  r[2].points = ConstantOffset(-1000);
  r[2].host = kHostileHost;
  r[2].strings.push_back(kHostileName);
  r[2].events = {
      Ev(COMMPROF_KIND_MPI_INIT, 0, 3000, 4000),
      Collective(COMMPROF_OP_ALLREDUCE, 0, 21000, 31500, {.bytes = 64, .name = 1}),
      Ev(COMMPROF_KIND_USER_MARK, 4, 7000, 7000),
      Collective(COMMPROF_OP_ALLREDUCE, 1, 45000, 60000, {.flags = COMMPROF_FLAG_NONBLOCKING, .bytes = 64, .name = 2}),
      Collective(COMMPROF_OP_BARRIER, 2, 66001, 81000, {.name = 3})};
  return r;
}

// The job's metadata: rank 0 started at reference 500 = UTC 1700000000000000000 (every rank's
// hello says steady 500 = that UTC; rank 0's offset is 0).
std::unique_ptr<ProfileReader> WriteJob(const std::string& path, const std::vector<RankData>& ranks) {
  return test_support::WriteProfile(path, ranks,
                                    {.job_id = "job-trace",
                                     .command_line = "mpirun -np 3 ./app",
                                     .start_epoch_ns = 1700000000000000000ull,
                                     .start_steady_ns = 500,
                                     .start_utc_ns = 1700000000000000000ull});
}

class ChromeTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reader_ = WriteJob(dir_ / "job.h5", MakeJob());
    ASSERT_NE(reader_, nullptr);
  }

  // Exports with `opts` and parses; `text_` keeps the raw output.
  json Export(TraceExportOptions opts = {}) {
    std::ostringstream os;
    Status st = WriteChromeTrace(*reader_, os, opts, &stats_);
    EXPECT_TRUE(st.ok()) << st.message();
    text_ = os.str();
    EXPECT_EQ(stats_.bytes, text_.size());
    return json::parse(text_);
  }

  // The events of `j` with this ph (and name, when given).
  static std::vector<json> Phase(const json& j, const std::string& ph, const std::string& name = "") {
    std::vector<json> out;
    for (const auto& e : j["traceEvents"]) {
      if (e["ph"] == ph && (name.empty() || e["name"] == name)) out.push_back(e);
    }
    return out;
  }

  // The raw text of the event line holding `needle` (one event per line).
  std::string LineWith(const std::string& needle) const {
    size_t at = text_.find(needle);
    if (at == std::string::npos) return "";
    size_t b = text_.rfind('\n', at), e = text_.find('\n', at);
    return text_.substr(b + 1, e - b - 1);
  }

  TempDir dir_{"commprof-trace"};
  std::unique_ptr<ProfileReader> reader_;
  TraceExportStats stats_;
  std::string text_;
};

TEST_F(ChromeTraceTest, ProcessesAreRanksNamedWithHostAndPidAndSortedByRank) {
  json j = Export();
  ASSERT_TRUE(j.contains("traceEvents"));
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  std::map<int, std::string> names;
  for (const auto& e : Phase(j, "M", "process_name")) names[e["pid"].get<int>()] = e["args"]["name"];
  // pid = rank + 1
  EXPECT_EQ(names, (std::map<int, std::string>{
                       {1, "rank 0 (h0, pid 100)"}, {2, "rank 1 (h1, pid 101)"}, {3, "rank 2 (node\"2\\, pid 102)"}}));
  std::map<int, int> sort;
  for (const auto& e : Phase(j, "M", "process_sort_index")) sort[e["pid"].get<int>()] = e["args"]["sort_index"];
  EXPECT_EQ(sort, (std::map<int, int>{{1, 0}, {2, 1}, {3, 2}}));
  EXPECT_EQ(stats_.ranks, 3u);
}

TEST_F(ChromeTraceTest, TracksAreThreadsAndGpuStreamsWithGloballyUniqueTids) {
  json j = Export();
  // First lanes are numbered in order from above the highest pid (3): r0 thread 0 -> 4, r0 GPU 0
  // stream 7 -> 5, r1 thread 0 -> 6, r2 thread 0 -> 7. Extra lanes come above every first lane (8),
  // at the rows of the ranks before (rank 0's 7) plus the track's place among the rank's sorted
  // slices (0): r1's second lane -> 15.
  std::map<std::pair<int, int>, std::string> threads;
  for (const auto& e : Phase(j, "M", "thread_name")) threads[{e["pid"], e["tid"]}] = e["args"]["name"];
  EXPECT_EQ(threads, (std::map<std::pair<int, int>, std::string>{{{1, 4}, "thread 0"},
                                                                 {{1, 5}, "GPU 0 stream 7"},
                                                                 {{2, 6}, "thread 0"},
                                                                 {{2, 15}, "thread 0 (lane 2)"},
                                                                 {{3, 7}, "thread 0"}}));
  std::map<std::pair<int, int>, int> sort;
  for (const auto& e : Phase(j, "M", "thread_sort_index")) sort[{e["pid"], e["tid"]}] = e["args"]["sort_index"];
  EXPECT_EQ(sort[std::make_pair(1, 4)], 0);
  EXPECT_EQ(sort[std::make_pair(1, 5)], 1);
  EXPECT_EQ(sort[std::make_pair(2, 15)], 1);
  auto kernels = Phase(j, "X", "gemm_kernel");
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0]["tid"], 5);
  EXPECT_EQ(kernels[0]["cat"], "compute_kernel");
  EXPECT_EQ(kernels[0]["args"], json({{"correlation", 42}}));
  EXPECT_EQ(stats_.tracks, 4u);
  EXPECT_EQ(stats_.lanes_added, 1u);
}

TEST_F(ChromeTraceTest, TimesAreAlignedRelativeToTheEarliestEventWithExactlyThreeDecimals) {
  Export();
  // origin = 1000 (rank 0's MPI_Init). rank 0 Init: ts 0, dur 1000 ns.
  EXPECT_NE(LineWith("\"name\":\"MPI_Init\",\"pid\":1,").find("\"ts\":0.000,\"dur\":1.000"), std::string::npos)
      << LineWith("\"name\":\"MPI_Init\",\"pid\":1,");
  // rank 1 Init: local [0,500] + 2000 = [2000,2500] -> ts 1000 ns, dur 500 ns.
  EXPECT_NE(LineWith("\"name\":\"MPI_Init\",\"pid\":2,").find("\"ts\":1.000,\"dur\":0.500"), std::string::npos);
  // rank 2 Barrier: local [66001,81000] - 1000 = [65001,80000] -> ts 64001 ns, dur 14999 ns.
  EXPECT_NE(LineWith("\"name\":\"MPI_Barrier\",\"pid\":3,").find("\"ts\":64.001,\"dur\":14.999"), std::string::npos)
      << LineWith("\"name\":\"MPI_Barrier\",\"pid\":3,");
  // rank 0 Finalize: 1234567891234 - 1000 = 1234567890234 ns; a double would print ...890.234 only
  // by luck, the integer path always does.
  EXPECT_NE(LineWith("MPI_Finalize").find("\"ts\":1234567890.234,\"dur\":0.100"), std::string::npos)
      << LineWith("MPI_Finalize");
  EXPECT_EQ(stats_.origin_reference_ns, 1000);
}

TEST_F(ChromeTraceTest, PartiallyOverlappingSlicesMoveToAnExtraLane) {
  json j = Export();
  // Rank 1: Iallreduce [42000,62000] stays on lane 1 (tid 6); the Barrier [57000,72000] crosses its
  // end and goes to "thread 0 (lane 2)" (tid 15). Init, step and Allreduce stay on tid 6.
  for (const auto& e : j["traceEvents"]) {
    if (e["pid"] != 2 || e["ph"] == "M") continue;
    const std::string name = e["name"];
    if (e["ph"] == "X" && name == "MPI_Barrier") {
      EXPECT_EQ(e["tid"], 15) << e.dump();
    } else if (e["ph"] == "X" || e["ph"] == "i") {
      EXPECT_EQ(e["tid"], 6) << e.dump();
    }
  }
  // No two slices on one (pid, tid) partially overlap (checked on integer ns from the text).
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> by_track;
  for (const auto& e : Phase(j, "X")) {
    // nlohmann parses 64.001 to a double; the exact integer check is in the e2e test, here the
    // values are small enough for llround to be exact.
    int64_t ts = std::llround(e["ts"].get<double>() * 1000), dur = std::llround(e["dur"].get<double>() * 1000);
    by_track[{e["pid"], e["tid"]}].emplace_back(ts, ts + dur);
  }
  for (const auto& [track, v] : by_track) {
    for (size_t a = 0; a < v.size(); ++a) {
      for (size_t b = 0; b < v.size(); ++b) {
        bool partial = v[a].first < v[b].first && v[b].first < v[a].second && v[a].second < v[b].second;
        EXPECT_FALSE(partial) << "pid " << track.first << " tid " << track.second;
      }
    }
  }
}

TEST_F(ChromeTraceTest, InstantsAreThreadScopedInstantEvents) {
  json j = Export();
  auto marks = Phase(j, "i");
  ASSERT_EQ(marks.size(), 3u);  // r0 mark, r1 step, r2 hostile mark
  std::map<int, json> by_pid;
  for (const auto& m : marks) by_pid[m["pid"]] = m;
  EXPECT_EQ(by_pid[1]["name"], "mark \"zero\"");
  EXPECT_EQ(by_pid[1]["s"], "t");
  EXPECT_FALSE(by_pid[1].contains("dur"));
  EXPECT_NE(LineWith("mark \\\"zero\\\"").find("\"ts\":4.000"), std::string::npos);  // 5000 - 1000
  EXPECT_EQ(by_pid[2]["name"], "step");
  EXPECT_EQ(by_pid[2]["args"]["step"], 7);
  EXPECT_NE(LineWith("\"name\":\"step\"").find("\"ts\":4.000"), std::string::npos);  // 3000 + 2000 - 1000
  EXPECT_EQ(stats_.instants, 3u);
  EXPECT_EQ(stats_.slices, 6u + 4u + 4u);  // all events but the three instants
  EXPECT_EQ(stats_.events, 17u);
}

TEST_F(ChromeTraceTest, HostileNamesAreEscapedAndInvalidUtf8BecomesReplacementCharacters) {
  json j = Export();
  EXPECT_NE(text_.find("\"name\":\"" + kHostileJsonText + "\""), std::string::npos);
  auto marks = Phase(j, "i");
  bool found = false;
  for (const auto& m : marks) found = found || m["name"] == kHostileDecoded;
  EXPECT_TRUE(found);
  // Direct cases of the escaper: every control character has a valid escape, DEL passes as is.
  std::string out;
  AppendJsonEscaped(out, std::string("\x00\x08\x0c\x0d\x7f", 5));
  EXPECT_EQ(out, "\\u0000\\b\\f\\r\x7f");
  out.clear();
  AppendJsonEscaped(out,
                    "\xF0\x9F\x98\x80 \xF0\x9F\x98 \xF4\x90\x80\x80 \xC0\xAF");  // 😀, cut 😀, >U+10FFFF, overlong '/'
  EXPECT_EQ(out,
            "\xF0\x9F\x98\x80 \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD "
            "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_F(ChromeTraceTest, MicrosecondsArePrintedFromIntegersWithoutRounding) {
  auto micros = [](int64_t ns) {
    std::string s;
    AppendMicros(s, ns);
    return s;
  };
  EXPECT_EQ(micros(0), "0.000");
  EXPECT_EQ(micros(1), "0.001");
  EXPECT_EQ(micros(999), "0.999");
  EXPECT_EQ(micros(1000), "1.000");
  EXPECT_EQ(micros(-1005), "-1.005");
  EXPECT_EQ(micros(9007199254740993), "9007199254740.993");  // 2^53 + 1: not a double
  EXPECT_EQ(micros(INT64_MIN), "-9223372036854775.808");
}

TEST_F(ChromeTraceTest, CollectiveArgsCarryCommunicatorSequenceBytesWaitAndOp) {
  json j = Export();
  std::map<int, json> allreduce, barrier;
  for (const auto& e : Phase(j, "X", "MPI_Allreduce")) allreduce[e["pid"]] = e["args"];
  for (const auto& e : Phase(j, "X", "MPI_Barrier")) barrier[e["pid"]] = e["args"];
  // Allreduce seq 0: arrivals 10000, 12500, 20000; L = 20000; waits 10000, 7500, 0; skew 10000.
  EXPECT_EQ(allreduce[1], json({{"op", "allreduce"},
                                {"comm_id", 1},
                                {"seq", 0},
                                {"bytes", 64},
                                {"wait_ns", 10000},
                                {"skew_ns", 10000},
                                {"last_rank", 2}}));
  EXPECT_EQ(allreduce[2]["wait_ns"], 7500);
  EXPECT_EQ(allreduce[3]["wait_ns"], 0);
  // Barrier seq 2: arrivals 70000, 57000, 65001; L = 70000 (rank 0); waits 0, 13000, 4999.
  EXPECT_EQ(barrier[1]["wait_ns"], 0);
  EXPECT_EQ(barrier[2]["wait_ns"], 13000);
  EXPECT_EQ(barrier[3]["wait_ns"], 4999);
  EXPECT_EQ(barrier[3]["skew_ns"], 13000);
  EXPECT_EQ(barrier[3]["last_rank"], 0);
  // The non-blocking Iallreduce is not a matched instance: no wait, flagged.
  for (const auto& e : Phase(j, "X", "MPI_Iallreduce")) {
    EXPECT_EQ(e["args"], json({{"op", "allreduce"}, {"comm_id", 1}, {"seq", 1}, {"bytes", 64}, {"nonblocking", true}}));
  }
}

TEST_F(ChromeTraceTest, FlowsRunFromTheLastArriverToEveryOtherParticipant) {
  json j = Export();
  auto starts = Phase(j, "s"), finishes = Phase(j, "f");
  ASSERT_EQ(starts.size(), 4u);  // 2 instances x (3 participants - 1)
  ASSERT_EQ(finishes.size(), 4u);
  EXPECT_EQ(stats_.flows, 4u);
  std::map<int, json> s_by_id, f_by_id;
  for (const auto& e : starts) s_by_id[e["id"]] = e;
  for (const auto& e : finishes) f_by_id[e["id"]] = e;
  // Flow ids: instances in order of first arrival; id = base + arrival index, base 1 for the
  // Allreduce (3 arrivals), 4 for the Barrier. The last arriver's own id is unused.
  EXPECT_EQ(s_by_id.size(), 4u);
  for (int id : {1, 2}) {  // Allreduce: rank 2 (pid 3, tid 7) at its entry 20000 -> 19.000
    EXPECT_EQ(s_by_id[id]["pid"], 3);
    EXPECT_EQ(s_by_id[id]["tid"], 7);
    EXPECT_EQ(s_by_id[id]["name"], "allreduce");
    EXPECT_EQ(s_by_id[id]["cat"], f_by_id[id]["cat"]);
  }
  EXPECT_EQ(f_by_id[1]["pid"], 1);
  EXPECT_EQ(f_by_id[1]["tid"], 4);
  EXPECT_EQ(f_by_id[2]["pid"], 2);
  EXPECT_EQ(f_by_id[2]["tid"], 6);
  EXPECT_EQ(f_by_id[1]["bp"], "e");
  for (int id : {5, 6}) {  // Barrier: rank 0 (pid 1, tid 4) at 70000 -> 69.000
    EXPECT_EQ(s_by_id[id]["pid"], 1);
    EXPECT_EQ(s_by_id[id]["tid"], 4);
    EXPECT_EQ(s_by_id[id]["name"], "barrier");
  }
  EXPECT_EQ(f_by_id[5]["pid"], 2);
  EXPECT_EQ(f_by_id[5]["tid"], 15);  // rank 1's Barrier sits on its second lane
  EXPECT_EQ(f_by_id[6]["pid"], 3);
  // Timestamps: "s" at the last arrival; "f" at the same moment inside the waiter's slice.
  EXPECT_NE(text_.find("{\"ph\":\"s\",\"cat\":\"commprof.flow\",\"name\":\"allreduce\",\"id\":1,\"pid\":3,\"tid\":7,"
                       "\"ts\":19.000}"),
            std::string::npos);
  EXPECT_NE(text_.find("{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"commprof.flow\",\"name\":\"barrier\",\"id\":5,\"pid\":2,"
                       "\"tid\":15,\"ts\":69.000}"),
            std::string::npos);
  // Each flow event directly follows the slice it binds to.
  EXPECT_NE(LineWith("\"id\":6,").find("\"ts\":69.000"), std::string::npos);
}

TEST_F(ChromeTraceTest, MetadataNamesTheSourceAndTheUtcOfTheOrigin) {
  json j = Export();
  const json& m = j["metadata"];
  EXPECT_EQ(m["job_id"], "job-trace");
  EXPECT_EQ(m["world_size"], 3);
  EXPECT_EQ(m["ranks_exported"], json({0, 1, 2}));
  EXPECT_EQ(m["origin_reference_ns"], 1000);
  // rank 0 started at reference 500 = UTC 1700000000000000000; the origin is 500 ns later.
  EXPECT_EQ(m["origin_utc_ns"], 1700000000000000500LL);
  EXPECT_EQ(m["origin_utc"], "2023-11-14T22:13:20.000000500Z");
  EXPECT_EQ(m["flows"], 4);
  EXPECT_EQ(m["lanes_added"], 1);
  EXPECT_EQ(m["events"], 17);
}

// A trace written in two parts, the later one numbered on its own (as `mpirun -np K commprof
// export` writes it: no process waits for another's layout, docs/scale.md), joins to the
// one-process trace byte for byte, in both formats, whole and cut. The cut leaves out rank 0's GPU
// track (its kernel ends at 16 us): its lane id stays taken, so the later ranks' ids do not depend
// on what the cut keeps of the ranks before them.
TEST_F(ChromeTraceTest, TwoPartsNumberedAloneJoinToTheOneProcessTraceWholeAndCut) {
  // The job, and the job with memory series (counter tracks and their sequences are numbered too):
  // two on rank 0 (device and host memory), one on rank 1.
  std::vector<RankData> with_memory = MakeJob();
  auto memory = [](uint8_t kind, uint16_t device, uint64_t t, uint64_t address, bool alloc) {
    commprof_event m = Ev(alloc ? COMMPROF_KIND_MEM_ALLOC : COMMPROF_KIND_MEM_FREE, 0, t, t);
    m.device = device;
    m.subtype = kind;
    m.seq = address;
    m.bytes = 4096;
    return m;
  };
  with_memory[0].events.push_back(memory(3, 0, 3000, 0x1000, true));
  with_memory[0].events.push_back(memory(3, 0, 60000, 0x1000, false));
  with_memory[0].events.push_back(memory(2, COMMPROF_HOST_DEVICE, 4000, 0x2000, true));
  with_memory[1].events.push_back(memory(3, 0, 3500, 0x3000, true));
  auto memory_reader = WriteJob(dir_ / "memory.h5", with_memory);
  ASSERT_NE(memory_reader, nullptr);
  const std::optional<TraceTimeRange> cuts[] = {std::nullopt, TraceTimeRange{30000, 100000}};
  for (const ProfileReader* reader : {reader_.get(), memory_reader.get()}) {
    for (bool perfetto : {false, true}) {
      for (const std::optional<TraceTimeRange>& cut : cuts) {
        auto write = [&](const TraceExportOptions& o, std::ostream& out, TraceExportStats* st) {
          return perfetto ? WritePerfettoTrace(*reader, out, o, st) : WriteChromeTrace(*reader, out, o, st);
        };
        TraceExportOptions whole_opts;
        whole_opts.time_range = cut;
        std::ostringstream whole;
        TraceExportStats whole_stats;
        ASSERT_TRUE(write(whole_opts, whole, &whole_stats).ok());
        if (cut && reader == reader_.get()) {
          ASSERT_EQ(whole_stats.tracks, 3u) << "the cut should leave rank 0's GPU track out";
        }
        if (reader != reader_.get()) {
          ASSERT_EQ(whole_stats.counter_series, 3u);
        }
        for (size_t split : {1u, 2u}) {
          const std::string what = std::string(reader == reader_.get() ? "" : "memory, ") +
                                   (perfetto ? "perfetto" : "chrome") + (cut ? ", cut" : ", whole") + ", ranks from " +
                                   std::to_string(split) + " in the later part";
          TraceExportOptions later = whole_opts;
          later.part = TracePart{split, SIZE_MAX, false, false, {}};
          std::ostringstream later_bytes;
          TraceExportStats l;
          ASSERT_TRUE(write(later, later_bytes, &l).ok()) << what;
          TraceExportOptions first = whole_opts;
          first.part = TracePart{0, split, true, true, {}};
          first.append_later_parts = [&](TraceSink& sink, TraceExportStats& s) {
            s.ranks += l.ranks;
            s.events += l.events;
            s.slices += l.slices;
            s.instants += l.instants;
            s.tracks += l.tracks;
            s.lanes_added += l.lanes_added;
            s.flows += l.flows;
            s.counters += l.counters;
            s.counter_series += l.counter_series;
            s.events_cut += l.events_cut;
            return sink.WriteThrough(later_bytes.str()) ? Status::Ok() : sink.Error();
          };
          std::ostringstream joined;
          ASSERT_TRUE(write(first, joined, nullptr).ok()) << what;
          EXPECT_EQ(joined.str().size(), whole.str().size()) << what;
          EXPECT_TRUE(joined.str() == whole.str()) << what;
        }
      }
    }
  }
}

// A format whose lane ids cannot reach what the numbering may hand out (Chrome's 32-bit tids, past
// about 4.29 billion events) is refused before anything is written: here a format of ten ids,
// against first lanes from 4 and extra lanes up to 8 + 17 rows.
TEST_F(ChromeTraceTest, AFormatWhoseLaneIdsTheNumberingCouldPassIsRefusedBeforeAnythingIsWritten) {
  struct SmallIds final : TraceEncoder {
    bool begun = false;
    void Begin(const Header& /*h*/) override { begun = true; }
    uint64_t MaxLaneId() const override { return 10; }
    void Continue(size_t /*ranks_before*/) override { begun = true; }
    void Rank(const RankInfo& /*r*/, const std::vector<std::string>& /*s*/, const TraceRankNumbering& /*n*/) override {}
    void BeginTrack(const RankInfo& /*r*/, std::string_view /*n*/, const TrackLanes& /*l*/, uint32_t /*i*/) override {}
    void Slice(const TraceSlice& /*s*/) override {}
    void EndTrack() override {}
    void BeginCounter(const RankInfo& /*r*/, std::string_view /*n*/) override {}
    void CounterPoint(int64_t /*ts*/, int64_t /*v*/) override {}
    void Finish(const Header& /*h*/) override {}
  } encoder;
  std::ostringstream os;
  TraceSink sink(os, "out");
  TraceExportStats stats;
  const Status st = WalkTimeline(*reader_, encoder, sink, TraceExportOptions{}, stats);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the exported ranks hold 17 events, more than this format's lane ids reach (10 at most"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(encoder.begun);
  EXPECT_EQ(os.str(), "");
  TraceExportOptions one;
  one.ranks = {1};  // 5 rows, 1 track: extra lanes from 4 + 1 = 5, up to 9
  EXPECT_TRUE(WalkTimeline(*reader_, encoder, sink, one, stats).ok());
}

TEST_F(ChromeTraceTest, RankSubsetKeepsOnlyFlowsBetweenExportedRanks) {
  TraceExportOptions opts;
  opts.ranks = {1, 0};
  json j = Export(opts);
  EXPECT_EQ(Phase(j, "M", "process_name").size(), 2u);
  // The Allreduce's last arriver (rank 2) is not exported: no flow. The Barrier's (rank 0) is:
  // one flow, to rank 1 (id 4 + 1).
  auto starts = Phase(j, "s");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0]["id"], 5);
  ASSERT_EQ(Phase(j, "f").size(), 1u);
  EXPECT_EQ(Phase(j, "f")[0]["pid"], 2);
  // wait_ns still comes from the whole instance.
  for (const auto& e : Phase(j, "X", "MPI_Allreduce")) {
    if (e["pid"] == 2) {
      EXPECT_EQ(e["args"]["wait_ns"], 7500);
    }
  }
  EXPECT_EQ(j["metadata"]["ranks_exported"], json({0, 1}));
}

// Allocation/free records keep the address in `seq` and, imported from torch, its "Total
// Allocated" in `comm_id` (docs/file-format.md): the slices name them so, never as a
// communicator and sequence number.
TEST(ChromeTraceMemory, AllocationSlicesNameAddressAndTotalAllocatedNotACommunicator) {
  TempDir dir("commprof-trace-mem");
  RankData r;
  r.points = ConstantOffset(0);
  r.strings = {"[memory]"};
  commprof_event alloc = Ev(COMMPROF_KIND_MEM_ALLOC, 0, 1000, 1000);  // imported torch record
  alloc.device = 0;
  alloc.subtype = 3;  // DEVICE
  alloc.seq = 0x7f0000001000;
  alloc.bytes = 4096;
  alloc.comm_id = 1 << 20;
  commprof_event free = Ev(COMMPROF_KIND_MEM_FREE, 0, 2000, 2000);  // a CUPTI-style record
  free.device = 0;
  free.subtype = 3;
  free.seq = 0x7f0000001000;
  free.bytes = 4096;
  free.correlation = 9;
  r.events = {alloc, free};
  auto reader = WriteJob(dir / "mem.h5", {r});
  ASSERT_NE(reader, nullptr);
  std::ostringstream os;
  ASSERT_TRUE(WriteChromeTrace(*reader, os, {}, nullptr).ok());
  const json j = json::parse(os.str());
  std::map<std::string, json> args;  // by category
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e.contains("args")) args[e["cat"]] = e["args"];
  }
  EXPECT_EQ(
      args["mem_alloc"],
      json({{"bytes", 4096}, {"address", 0x7f0000001000}, {"memory_kind", "device"}, {"total_allocated", 1 << 20}}));
  EXPECT_EQ(args["mem_free"],
            json({{"bytes", 4096}, {"address", 0x7f0000001000}, {"memory_kind", "device"}, {"correlation", 9}}));
}

TEST(ChromeTraceReaders, TruncatingReadersSeeSomeValuesOneNanosecondEarly) {
  // 1.001 us is the double 1.00099999999999988987..., times 1000 rounds to 1000.9999999999999,
  // truncated: 1000 ns. 1.002 us reads back as 1002 ns. Values with a binary-exact fraction
  // (.500) and whole microseconds always read back exactly.
  EXPECT_EQ(ReadBackNs(1001, MicrosReader::kStrtodTruncate), 1000);
  EXPECT_EQ(ReadBackNs(1001, MicrosReader::kDigitsTruncate), 1000);
  EXPECT_EQ(ReadBackNs(1001, MicrosReader::kExact), 1001);
  EXPECT_EQ(ReadBackNs(1002, MicrosReader::kStrtodTruncate), 1002);
  EXPECT_EQ(ReadBackNs(1500, MicrosReader::kDigitsTruncate), 1500);
  EXPECT_EQ(ReadBackNs(5000, MicrosReader::kStrtodTruncate), 5000);
  EXPECT_EQ(ReadBackNs(-1001, MicrosReader::kStrtodTruncate), -1000);
  // Never more than 1 ns off, never late.
  for (int64_t ns = 0; ns < 200000; ns += 7) {
    for (MicrosReader r : {MicrosReader::kStrtodTruncate, MicrosReader::kDigitsTruncate}) {
      const int64_t back = ReadBackNs(ns, r);
      ASSERT_TRUE(back == ns || back == ns - 1) << ns;
    }
  }
}

TEST(ChromeTraceReaders, SlicesThatWouldCrossInATruncatingReaderGetALane) {
  // One rank, origin 0 (MPI_Init at 0): an Iallreduce [1001,6001] ("1.001", "5.000") and the
  // MPI_Test that completed it [1002,6001] ("1.002", "4.999") nest exactly, but Perfetto reads
  // [1000,6000] and [1002,6001] and would drop the Test. The Test goes to a second lane; a Wait
  // [7000,7001] after both stays on the first.
  TempDir dir("commprof-trace-views");
  std::vector<RankData> job(1);
  job[0].points = ConstantOffset(0);
  job[0].host = "h0";
  job[0].strings = {"MPI_Init", "MPI_Iallreduce", "MPI_Test", "MPI_Wait"};
  commprof_event test = Ev(COMMPROF_KIND_MPI_WAIT, 2, 1002, 6001);
  test.subtype = COMMPROF_OP_TEST;
  commprof_event wait = Ev(COMMPROF_KIND_MPI_WAIT, 3, 7000, 7001);
  wait.subtype = COMMPROF_OP_WAIT;
  job[0].events = {
      Ev(COMMPROF_KIND_MPI_INIT, 0, 0, 100), test,
      Collective(COMMPROF_OP_ALLREDUCE, 0, 1001, 6001, {.flags = COMMPROF_FLAG_NONBLOCKING, .bytes = 8, .name = 1}),
      wait};
  auto reader = WriteJob(dir / "views.h5", job);
  ASSERT_NE(reader, nullptr);
  std::ostringstream os;
  TraceExportStats stats;
  ASSERT_TRUE(WriteChromeTrace(*reader, os, {}, &stats).ok());
  json j = json::parse(os.str());
  std::map<std::string, int> tid;
  std::map<int, std::string> thread_names;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") tid[e["name"]] = e["tid"];
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
  }
  EXPECT_EQ(stats.lanes_added, 1u);
  EXPECT_EQ(tid["MPI_Iallreduce"], tid["MPI_Init"]);
  EXPECT_EQ(tid["MPI_Wait"], tid["MPI_Init"]);
  EXPECT_NE(tid["MPI_Test"], tid["MPI_Init"]);
  EXPECT_EQ(thread_names[tid["MPI_Test"]], "thread 0 (lane 2)");
  EXPECT_NE(os.str().find("\"name\":\"MPI_Test\",\"pid\":1,\"tid\":" + std::to_string(tid["MPI_Test"]) +
                          ",\"ts\":1.002,\"dur\":4.999"),
            std::string::npos);
}

TEST_F(ChromeTraceTest, ErrorsNameTheInputOrTheOutput) {
  TraceExportOptions opts;
  opts.ranks = {7};
  std::ostringstream os;
  Status st = WriteChromeTrace(*reader_, os, opts, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job.h5"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 7"), std::string::npos) << st.message();

  std::ostringstream broken;
  broken.setstate(std::ios::badbit);
  TraceExportOptions named;
  named.output_name = "out.json";
  st = WriteChromeTrace(*reader_, broken, named, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find("out.json"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace commprof
