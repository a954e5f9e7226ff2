// The /hang group (written, read back by our reader and by h5py) and the file path's diagnosis
// from INCOMPLETE events in files written by the real Hdf5Writer; `commprof check` and `report`
// on them through the real binary.
#include "analysis/hang/hang_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/hang/hang_from_file.h"
#include "analysis/hang/hang_json.h"
#include "analysis/report/job_report.h"
#include "analysis/report/report_json.h"
#include "analysis/report/report_model.h"
#include "analysis/report/text_report.h"
#include "support/test_support.h"

namespace commprof::hang {
namespace {

using test_support::RankData;
using test_support::TempDir;
namespace ev = test_support::events;

constexpr uint64_t kMs = 1'000'000;

std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    return {-1, ""};
  }
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) {
    out += buf.data();
  }
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

commprof_event Incomplete(commprof_event e, uint64_t flush) {
  e.flags = static_cast<uint16_t>(e.flags | COMMPROF_FLAG_INCOMPLETE);
  e.end_ns = flush;
  return e;
}

// Four ranks complete allreduces #0..#2; then ranks 0-2 enter allreduce #3 and rank 3 a barrier
// (#3): they were given up at the SIGTERM flush at 10 s (INCOMPLETE, end = flush).
std::vector<RankData> SkippedAllreduce() {
  std::vector<RankData> ranks(4);
  const uint64_t flush = 10'000 * kMs;
  for (uint32_t r = 0; r < 4; ++r) {
    for (uint64_t s = 0; s < 3; ++s) {
      ranks[r].events.push_back(
          ev::Collective(COMMPROF_OP_ALLREDUCE, s, (s + 1) * 100 * kMs, (s + 1) * 100 * kMs + kMs, {.bytes = 1024}));
    }
    const uint64_t entry = (1000 + 100 * r) * kMs;
    ranks[r].events.push_back(Incomplete(r == 3
                                             ? ev::Collective(COMMPROF_OP_BARRIER, 3, entry, entry)
                                             : ev::Collective(COMMPROF_OP_ALLREDUCE, 3, entry, entry, {.bytes = 1024}),
                                         flush));
  }
  return ranks;
}

std::vector<RankData> Clean() {
  std::vector<RankData> ranks(4);
  for (uint32_t r = 0; r < 4; ++r) {
    for (uint64_t s = 0; s < 3; ++s) {
      ranks[r].events.push_back(
          ev::Collective(COMMPROF_OP_ALLREDUCE, s, (s + 1) * 100 * kMs, (s + 1) * 100 * kMs + kMs, {.bytes = 1024}));
    }
  }
  // A leaked (never waited) Isend is no hang.
  ranks[0].events.push_back(Incomplete(
      ev::P2p(COMMPROF_OP_SEND, 500 * kMs, 500 * kMs, 1, 3, 8, COMMPROF_COMM_WORLD_ID, COMMPROF_FLAG_NONBLOCKING),
      600 * kMs));
  return ranks;
}

TEST(HangFromFile, SkippedAllreduceAtASignalIsDiagnosedFromTheEvents) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "skip.h5", SkippedAllreduce());
  ASSERT_NE(reader, nullptr);
  auto h = DiagnoseFile(*reader);
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_TRUE(h.value().has_value());
  const FileHang& fh = *h.value();
  EXPECT_FALSE(fh.stored);
  EXPECT_EQ(fh.input.source, "file");
  EXPECT_TRUE(fh.report.hang);
  EXPECT_EQ(fh.report.culprits, std::vector<uint32_t>{3});
  ASSERT_EQ(fh.report.comms.size(), 1u);
  EXPECT_EQ(fh.report.comms[0].seq, 3u);
  // Ages from the flush: rank 0 entered at 1.0 s, flushed at 10.0 s.
  EXPECT_DOUBLE_EQ(fh.report.comms[0].waiting[0].waiting_s, 9.0);
  EXPECT_EQ(fh.report.verdict,
            "rank 3 never entered MPI_Allreduce #3 on MPI_COMM_WORLD (it is in MPI_Barrier #3): collective type "
            "mismatch");
  // The recent history kept per rank: the three completed allreduces.
  EXPECT_EQ(fh.input.ranks[0].state.recent.size(), 3u);
}

TEST(HangFromFile, CleanJobHasNoHangSection) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "clean.h5", Clean());
  ASSERT_NE(reader, nullptr);
  auto h = DiagnoseFile(*reader);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_FALSE(h.value().has_value());
  auto job = AnalyzeJob(*reader);
  ASSERT_TRUE(job.ok());
  const auto json = ReportModelToJson(BuildReportModel(job.value()));
  ASSERT_TRUE(json.contains("hang"));
  EXPECT_TRUE(json["hang"].is_null());
}

TEST(HangFromFile, RankBlockedInRecvFromAFinishedPeer) {
  // Rank 2 waits in MPI_Recv from rank 3, which finished; ranks 0, 1 and 3 finished cleanly.
  std::vector<RankData> ranks(4);
  for (uint32_t r = 0; r < 4; ++r) {
    ranks[r].events.push_back(ev::Collective(COMMPROF_OP_BARRIER, 0, 100 * kMs, 101 * kMs));
  }
  ranks[2].events.push_back(Incomplete(ev::Recv(200 * kMs, 200 * kMs, 3, 7), 5200 * kMs));
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "recv.h5", ranks);
  ASSERT_NE(reader, nullptr);
  auto h = DiagnoseFile(*reader);
  ASSERT_TRUE(h.ok() && h.value().has_value());
  const HangReport& r = h.value()->report;
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{3});
  ASSERT_EQ(r.p2p.size(), 1u);
  EXPECT_EQ(r.p2p[0].rank, 2u);
  EXPECT_DOUBLE_EQ(r.p2p[0].waiting_s, 5.0);
  EXPECT_EQ(r.verdict, "rank 3: finished (bye); rank 2 waits for it in MPI_Recv");
}

TEST(HangFromFile, NcclCollectiveUnfinishedAtTheEndTakesPart) {
  const uint64_t kComm = 0xabcdef12ull;
  std::vector<RankData> ranks(2);
  for (uint32_t r = 0; r < 2; ++r) {
    ranks[r].events.push_back(ev::CommCreated(kComm, static_cast<int32_t>(r), 2));
    ranks[r].events.push_back(ev::NcclCollective(COMMPROF_OP_ALLREDUCE, 0, 100 * kMs, 110 * kMs, kComm, 4096));
  }
  ranks[0].events.push_back(
      Incomplete(ev::NcclCollective(COMMPROF_OP_ALLREDUCE, 1, 200 * kMs, 200 * kMs, kComm, 4096), 1200 * kMs));
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "nccl.h5", ranks);
  ASSERT_NE(reader, nullptr);
  auto h = DiagnoseFile(*reader);
  ASSERT_TRUE(h.ok() && h.value().has_value());
  const HangReport& r = h.value()->report;
  EXPECT_EQ(r.culprits, std::vector<uint32_t>{1});
  ASSERT_EQ(r.comms.size(), 1u);
  EXPECT_EQ(r.comms[0].comm_name, "nccl comm 0xabcdef12");
  EXPECT_EQ(r.comms[0].op, "ncclAllReduce");
  EXPECT_EQ(r.comms[0].size, 2u);
}

TEST(HangStore, RoundTripThroughOurReaderAndH5py) {
  TempDir dir;
  const std::string path = dir / "live.h5";
  ASSERT_NE(test_support::WriteProfile(path, Clean()), nullptr);
  // A live input: rank 1 answered with a Recv, rank 0 with an allreduce and a call site, rank 2 no
  // answer, rank 3 finished.
  HangInput in;
  in.world_size = 4;
  in.source = "live";
  in.timeout_s = 30;
  in.detected_utc_ns = 1'700'000'000'000'000'000ull;
  for (uint32_t r = 0; r < 4; ++r) {
    RankSnapshot s;
    s.rank = r;
    s.has_state = r < 2;
    s.condition = r == 2 ? RankCondition::kNoAnswer : r == 3 ? RankCondition::kFinished : RankCondition::kRunning;
    s.end_reason = r == 3 ? "bye" : "";
    s.state.local_now_ns = 100 * kMs * 1000;
    s.state.last_completion_ns = s.state.local_now_ns - 40'000 * kMs;
    s.state.comms.push_back({COMMPROF_COMM_WORLD_ID, 4, r});
    in.ranks.push_back(s);
  }
  commprof_event e = ev::Collective(COMMPROF_OP_ALLREDUCE, 5, 60'000 * kMs, 60'000 * kMs, {.bytes = 4096});
  e.datatype = COMMPROF_DT_FLOAT64;
  e.reduce_op = COMMPROF_RED_SUM;
  in.ranks[0].state.inflight.push_back({e, 9});
  in.ranks[0].state.call_sites.emplace_back(9, "step (train.c:12) <- main (train.c:40)");
  in.ranks[0].state.recent.push_back(ev::Collective(COMMPROF_OP_ALLREDUCE, 4, 50'000 * kMs, 50'001 * kMs));
  in.ranks[1].state.inflight.push_back({ev::Recv(70'000 * kMs, 70'000 * kMs, 0, 7), 0});
  in.ranks[1].state.recent.push_back(ev::Collective(COMMPROF_OP_ALLREDUCE, 4, 50'000 * kMs, 50'001 * kMs));
  const HangReport report = Diagnose(in);
  ASSERT_TRUE(report.hang);

  // A first diagnosis (a different verdict) is replaced by the later one: the file keeps the latest.
  HangInput earlier = in;
  earlier.timeout_s = 99;
  Status st = WriteHangGroup(path, earlier, Diagnose(earlier));
  ASSERT_TRUE(st.ok()) << st.message();
  st = WriteHangGroup(path, in, report);
  ASSERT_TRUE(st.ok()) << st.message();

  auto back = ReadHangGroup(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back.value().has_value());
  const StoredHang& sh = *back.value();
  EXPECT_EQ(sh.input.timeout_s, in.timeout_s) << "the later diagnosis replaces the earlier one";
  EXPECT_EQ(HangReportToJson(sh.report).dump(), HangReportToJson(report).dump());
  // The tables hold what the diagnosis needs: diagnosing them again gives the same report.
  EXPECT_EQ(HangReportToJson(Diagnose(sh.input)).dump(), HangReportToJson(report).dump());
  EXPECT_EQ(sh.input.ranks[0].state.call_sites.at(0).second, "step (train.c:12) <- main (train.c:40)");

  // The file path prefers the stored group.
  auto reader = ProfileReader::Open(path);
  ASSERT_TRUE(reader.ok());
  auto fh = DiagnoseFile(*reader.value());
  ASSERT_TRUE(fh.ok() && fh.value().has_value());
  EXPECT_TRUE(fh.value()->stored);
  EXPECT_EQ(fh.value()->report.verdict, report.verdict);

  // A second reader: h5py sees the documented layout.
  const std::string py = dir / "read.py";
  std::ofstream(py) << "import h5py, json, sys\n"
                       "f = h5py.File(sys.argv[1], 'r')\n"
                       "g = f['hang']\n"
                       "a = g.attrs\n"
                       "assert a['source'] in (b'live', 'live'), a['source']\n"
                       "assert float(a['timeout_s']) == 30.0\n"
                       "assert int(a['detected_utc_ns']) == 1700000000000000000\n"
                       "assert list(a['culprits']) == json.loads(g['report_json'][()])['culprits']\n"
                       "inf = g['inflight'][:]\n"
                       "assert len(inf) == 2, len(inf)\n"
                       "r0 = [x for x in inf if x['rank'] == 0][0]\n"
                       "assert r0['kind'] == 3 and r0['op'] == 4 and r0['seq'] == 5 and r0['bytes'] == 4096\n"
                       "assert r0['datatype'] == 14 and r0['reduce_op'] == 1 and r0['stack'] == 9\n"
                       "assert r0['age_ns'] == 40000 * 1000000, r0['age_ns']\n"
                       "assert r0['call_site'].decode().startswith('step (train.c:12)')\n"
                       "r1 = [x for x in inf if x['rank'] == 1][0]\n"
                       "assert r1['kind'] == 4 and r1['peer'] == 0 and r1['tag'] == 7\n"
                       "assert len(g['recent']) == 2 and list(g['recent']['seq']) == [4, 4]\n"
                       "rk = g['ranks'][:]\n"
                       "assert [x['condition'].decode() for x in rk] == ['running', 'running', 'no_answer', "
                       "'finished']\n"
                       "assert [int(x['answered']) for x in rk] == [1, 1, 0, 0]\n"
                       "assert rk[0]['last_completion_age_ns'] == 40000 * 1000000\n"
                       "assert rk[2]['last_completion_age_ns'] == -1\n"
                       "assert len(g['comms']) == 2\n"
                       "rep = json.loads(g['report_json'][()])\n"
                       "v = a['verdict']\n"
                       "v = v.decode() if isinstance(v, bytes) else v\n"
                       "assert rep['hang'] is True and rep['verdict'] == v\n"
                       "print('ok')\n";
  auto [code, out] = Shell("/usr/bin/python3 " + py + " " + path);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("ok"), std::string::npos) << out;
}

TEST(HangStore, DamagedGroupIsAnErrorNamingTheObject) {
  TempDir dir;
  const std::string path = dir / "bad.h5";
  ASSERT_NE(test_support::WriteProfile(path, Clean()), nullptr);
  HangInput in;
  in.world_size = 4;
  in.source = "live";
  const HangReport report = Diagnose(in);
  ASSERT_TRUE(WriteHangGroup(path, in, report).ok());
  auto [code, out] = Shell("/usr/bin/python3 -c \"import h5py; f = h5py.File('" + path +
                           "', 'a'); del f['hang/report_json']; f['hang/report_json'] = '{\\\"hang\\\": 1}'\"");
  ASSERT_EQ(code, 0) << out;
  auto back = ReadHangGroup(path);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find(path + ":/hang/report_json.hang: expected a boolean"), std::string::npos)
      << back.status().message();

  auto [code2, out2] = Shell("/usr/bin/python3 -c \"import h5py; f = h5py.File('" + path +
                             "', 'a'); del f['hang/report_json']; del f['hang/ranks']\"");
  ASSERT_EQ(code2, 0) << out2;
  auto back2 = ReadHangGroup(path);
  ASSERT_FALSE(back2.ok());
  EXPECT_NE(back2.status().message().find(":/hang/report_json: missing"), std::string::npos)
      << back2.status().message();
}

TEST(HangJson, ReportModelCarriesTheHangAndRejectsABadOne) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "skip.h5", SkippedAllreduce());
  ASSERT_NE(reader, nullptr);
  auto job = AnalyzeJob(*reader);
  ASSERT_TRUE(job.ok()) << job.status().message();
  auto json = ReportModelToJson(BuildReportModel(job.value()));
  ASSERT_TRUE(json["hang"].is_object());
  EXPECT_EQ(json["hang"]["culprits"], nlohmann::ordered_json::array({3}));
  auto model = ReportModelFromJson(json);
  ASSERT_TRUE(model.ok()) << model.status().message();
  std::ostringstream text;
  WriteTextReport(model.value(), text);
  EXPECT_EQ(text.str().rfind("HANG (file", 0), 0u) << text.str();  // first in the report
  json["hang"]["culprits"] = "three";
  auto bad = ReportModelFromJson(json);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("report key hang.culprits: expected an array"), std::string::npos)
      << bad.status().message();
}

// `commprof check` and `report` as a user runs them.
TEST(HangCli, CheckExitsThreeOnAHangZeroOnACleanFileAndAllowHangPasses) {
  TempDir dir;
  ASSERT_NE(test_support::WriteProfile(dir / "skip.h5", SkippedAllreduce()), nullptr);
  ASSERT_NE(test_support::WriteProfile(dir / "clean.h5", Clean()), nullptr);
  const std::string bin = COMMPROF_CLI_BINARY;
  auto [c1, o1] = Shell(bin + " check " + (dir / "skip.h5"));
  EXPECT_EQ(c1, 3) << o1;
  EXPECT_NE(o1.find("FAIL hang: rank 3 never entered MPI_Allreduce #3 on MPI_COMM_WORLD"), std::string::npos) << o1;
  auto [c2, o2] = Shell(bin + " check " + (dir / "clean.h5"));
  EXPECT_EQ(c2, 0) << o2;
  EXPECT_EQ(o2.find("hang"), std::string::npos) << o2;
  auto [c3, o3] = Shell(bin + " check --allow-hang " + (dir / "skip.h5"));
  EXPECT_EQ(c3, 0) << o3;
  EXPECT_NE(o3.find("ok   hang: rank 3"), std::string::npos) << o3;
  // A failed metric with a hang: the hang's 3 wins.
  auto [c4, o4] = Shell(bin + " check --max stragglers=-1 " + (dir / "skip.h5"));
  EXPECT_EQ(c4, 3) << o4;
  // With --allow-hang the metric's 1 stands.
  auto [c5, o5] = Shell(bin + " check --allow-hang --max stragglers=-1 " + (dir / "skip.h5"));
  EXPECT_EQ(c5, 1) << o5;

  auto [r1, t1] = Shell(bin + " report " + (dir / "skip.h5"));
  EXPECT_EQ(r1, 0) << t1;
  EXPECT_EQ(t1.rfind("HANG (file", 0), 0u) << t1;
  auto [r2, t2] = Shell(bin + " report --format json " + (dir / "clean.h5"));
  EXPECT_EQ(r2, 0);
  EXPECT_NE(t2.find("\"hang\": null"), std::string::npos) << t2;
  auto [r3, t3] = Shell(bin + " report --format html " + (dir / "skip.h5"));
  EXPECT_EQ(r3, 0);
  EXPECT_NE(t3.find("<section id=\"hang\""), std::string::npos);
  EXPECT_NE(t3.find("<h2>Hang: rank 3</h2>"), std::string::npos);
}

}  // namespace
}  // namespace commprof::hang
