// The step table (docs/metrics.md §10) and `--window K` (ProfileReader::SelectWindow) on small
// files written with the real Hdf5Writer, with planted ground truth: a slow step caused by one late
// rank, a balanced run with jitter, capture windows, imported ranges, and Kineto traces.
#include "analysis/metrics/step_table.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/load/kineto_import.h"
#include "analysis/report/analysis_group.h"
#include "analysis/report/html_report.h"
#include "analysis/report/job_report.h"
#include "analysis/report/report_json.h"
#include "analysis/report/report_model.h"
#include "cli/import_writer.h"
#include "support/kineto_synth.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
using test_support::events::Collective;

commprof_event Marker(uint8_t kind, uint64_t seq, uint64_t start, uint64_t end) {
  commprof_event e{};
  e.kind = kind;
  e.seq = seq;
  e.start_ns = start;
  e.end_ns = end;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}
commprof_event Step(uint64_t n, uint64_t start, uint64_t end = 0) {
  return Marker(COMMPROF_KIND_STEP, n, start, end == 0 ? start : end);
}
// Window k: [start, end], first step, number of steps (docs/file-format.md kind 30).
commprof_event Window(uint64_t k, uint64_t start, uint64_t end, uint64_t first, uint32_t steps) {
  commprof_event e = Marker(COMMPROF_KIND_WINDOW, k, start, end);
  e.bytes = first;
  e.correlation = steps;
  e.subtype = 1;
  return e;
}

constexpr uint32_t kRanks = 4;
constexpr uint64_t kSteps = 10;
constexpr uint64_t kCompute = 10'000'000;  // 10 ms of compute per step
constexpr uint64_t kTransfer = 100'000;    // the allreduce's transfer after the last arrival

// A training loop of 4 ranks and 10 steps: each rank marks step s, computes 10 ms plus its
// lateness late(s, r), enters an allreduce, leaves it 100 us (+ r us) after the last arrival and
// marks the next step there. The last step ends with its allreduce, its last event before
// MPI_Finalize, which begins 3 ms later (the end rule of §10.1).
// Returns the ranks and, per step and rank, the planted duration.
struct Loop {
  std::vector<RankData> ranks;
  std::vector<std::vector<int64_t>> duration;  // [step][rank]
};
Loop MakeLoop(const std::function<uint64_t(uint64_t step, uint32_t rank)>& late) {
  Loop loop;
  loop.ranks.resize(kRanks);
  loop.duration.assign(kSteps, std::vector<int64_t>(kRanks, 0));
  std::vector<uint64_t> begin(kRanks, 1'000'000);
  for (uint64_t s = 0; s < kSteps; ++s) {
    uint64_t last = 0;
    for (uint32_t r = 0; r < kRanks; ++r) {
      last = std::max(last, begin[r] + kCompute + late(s, r));
    }
    for (uint32_t r = 0; r < kRanks; ++r) {
      const uint64_t arrive = begin[r] + kCompute + late(s, r);
      const uint64_t leave = last + kTransfer + 1000 * r;
      loop.ranks[r].events.push_back(Step(s, begin[r]));
      loop.ranks[r].events.push_back(Collective(COMMPROF_OP_ALLREDUCE, s, arrive, leave, {.bytes = 8}));
      loop.duration[s][r] = static_cast<int64_t>(leave - begin[r]);
      begin[r] = leave;
    }
  }
  for (uint32_t r = 0; r < kRanks; ++r) {
    loop.ranks[r].events.push_back(Marker(COMMPROF_KIND_MPI_FINALIZE, 0, begin[r] + 3'000'000, begin[r] + 5'000'000));
  }
  return loop;
}

// Jitter of up to 400 us, the same on every run: a balanced loop's lateness.
uint64_t Jitter(uint64_t s, uint32_t r) { return ((s * 7 + r * 13 + s * r * 5) % 9) * 50'000; }

const StepRow& RowOf(const JobReport& rep, uint64_t step) {
  for (const StepRow& row : rep.steps.steps) {
    if (row.step == step) {
      return row;
    }
  }
  ADD_FAILURE() << "no step " << step;
  static const StepRow kNone;
  return kNone;
}

TEST(StepTable, APlantedLateRankMakesItsStepTheSlowestAndIsItsStraggler) {
  TempDir dir;
  // Rank 2 is 40 ms late in step 6, on top of the jitter of every step.
  Loop loop = MakeLoop([](uint64_t s, uint32_t r) { return Jitter(s, r) + (s == 6 && r == 2 ? 40'000'000 : 0); });
  auto reader = test_support::WriteProfile(dir / "loop.h5", loop.ranks);
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->steps.steps.size(), kSteps);
  for (uint64_t s = 0; s < kSteps; ++s) {
    const StepRow& row = RowOf(rep.value(), s);
    ASSERT_EQ(row.ranks.size(), kRanks);
    int64_t lo = INT64_MAX, hi = 0;
    for (uint32_t r = 0; r < kRanks; ++r) {
      EXPECT_EQ(row.ranks[r].rank, r);
      EXPECT_EQ(row.ranks[r].duration_ns, loop.duration[s][r]) << "step " << s << " rank " << r;  // exact
      lo = std::min(lo, loop.duration[s][r]);
      hi = std::max(hi, loop.duration[s][r]);
    }
    EXPECT_EQ(row.min_ns, lo);
    EXPECT_EQ(row.max_ns, hi);
    EXPECT_EQ(row.window, -1);
    // Every rank's blocked time in the step's allreduce is counted in that step, once.
    EXPECT_GT(row.comm_ns, 0) << s;
    EXPECT_GE(row.comm_ns, row.wait_ns);
    if (s == 6) {
      EXPECT_EQ(row.straggler, 2) << "the planted late rank";
      // The 3 others wait for rank 2 from their own arrival: 40 ms plus their jitter difference
      // (at most 0.4 ms each), all charged to rank 2 directly.
      EXPECT_NEAR(row.straggler_cost_ns, 3 * 40'000'000.0, 3 * 400'000.0);
      EXPECT_NEAR(static_cast<double>(row.wait_ns), 3 * 40'000'000.0, 3 * 400'000.0);
      EXPECT_GT(row.max_ns, 50'000'000);
    } else {
      EXPECT_EQ(row.straggler, -1) << "step " << s << ": only jitter, top cause rank " << row.top_rank << " "
                                   << row.straggler_cost_ns << " ns";
      EXPECT_LT(row.max_ns, 11'000'000);
    }
  }
  EXPECT_EQ(rep->steps.summary.steps, kSteps);
  EXPECT_EQ(rep->steps.summary.slowest_step, 6u);
  EXPECT_EQ(rep->steps.summary.with_straggler, 1u);
  EXPECT_EQ(rep->steps.summary.p99_ns, RowOf(rep.value(), 6).max_ns);  // nearest rank of 10: the largest
  EXPECT_EQ(rep->steps.summary.max_ns, RowOf(rep.value(), 6).max_ns);

  // Every view: JSON keys and values, and the text table naming the step and the rank.
  const nlohmann::ordered_json j = ReportToJson(rep.value());
  ASSERT_EQ(j["steps"].size(), kSteps);
  const auto& s6 = j["steps"][6];
  EXPECT_EQ(s6["step"], 6);
  EXPECT_TRUE(s6["window"].is_null());
  EXPECT_EQ(s6["straggler"], 2);
  EXPECT_EQ(s6["duration_ns"].size(), kRanks);
  EXPECT_EQ(s6["duration_ns"][2]["rank"], 2);
  EXPECT_EQ(s6["duration_ns"][2]["ns"], loop.duration[6][2]);
  EXPECT_TRUE(j["steps"][5]["straggler"].is_null());
  EXPECT_EQ(j["step_time"]["slowest_step"], 6);
  std::ostringstream text;
  WriteTextReport(rep.value(), text);
  EXPECT_NE(text.str().find("steps: 10 "), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("1 with a straggler"), std::string::npos) << text.str();
  // The table lists the slowest first: step 6 with rank 2.
  const size_t table = text.str().find("straggler (delay cost)");
  ASSERT_NE(table, std::string::npos);
  const std::string first_row = text.str().substr(text.str().find('\n', table) + 1, 120);
  EXPECT_EQ(first_row.find("       6 "), 0u) << first_row;
  EXPECT_NE(first_row.find("rank 2 ("), std::string::npos) << first_row;
  std::istringstream lines(text.str());
  std::string line;
  std::getline(lines, line);  // the path
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 100u) << line;
  }

  // The HTML step-time chart: one column per step, step 6's marked with its straggler.
  std::ostringstream html;
  ASSERT_TRUE(WriteHtmlReport(BuildReportModel(rep.value()), html).ok());
  const std::string page = html.str();
  const size_t chart = page.find("id=\"chart-step-time\"");
  ASSERT_NE(chart, std::string::npos);
  const std::string svg = page.substr(chart, page.find("</svg>", chart) - chart);
  size_t columns = 0;
  for (size_t at = svg.find("data-step=\""); at != std::string::npos; at = svg.find("data-step=\"", at + 1)) {
    ++columns;
  }
  EXPECT_EQ(columns, kSteps);
  EXPECT_NE(svg.find("class=\"bar straggler\" data-step=\"6\" data-straggler=\"2\""), std::string::npos);
  EXPECT_EQ(svg.find("data-straggler=", svg.find("data-straggler=") + 1), std::string::npos) << "one marked step";
}

TEST(StepTable, TheAnalysisGroupStoresOneRowPerRankOfEachStep) {
  TempDir dir;
  const std::string path = dir / "loop.h5";
  Loop loop = MakeLoop([](uint64_t s, uint32_t r) { return Jitter(s, r) + (s == 6 && r == 2 ? 40'000'000 : 0); });
  {
    auto reader = test_support::WriteProfile(path, loop.ranks);
    ASSERT_NE(reader, nullptr);
    auto rep = AnalyzeJob(*reader);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    reader.reset();
    Status st = WriteAnalysisGroup(path, rep.value());
    ASSERT_TRUE(st.ok()) << st.message();
  }
  auto rows = ReadAnalysisTable<schema::StepRankRow>(path);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), kSteps * kRanks);
  for (size_t i = 0; i < rows->size(); ++i) {
    const schema::StepRankRow& row = (*rows)[i];
    EXPECT_EQ(row.step, i / kRanks);
    EXPECT_EQ(row.rank, i % kRanks);
    EXPECT_EQ(row.duration_ns, loop.duration[row.step][row.rank]);
    EXPECT_EQ(row.window, -1);
    EXPECT_EQ(row.straggler_rank, row.step == 6 ? 2 : -1);
    if (row.step == 6 && row.rank == 2) {
      EXPECT_NEAR(static_cast<double>(row.delay_cost_ns), 3 * 40'000'000.0, 3 * 400'000.0);
    }
  }
}

TEST(StepTable, ABalancedLoopWithJitterHasNoStepStraggler) {
  TempDir dir;
  Loop loop = MakeLoop(Jitter);
  auto reader = test_support::WriteProfile(dir / "balanced.h5", loop.ranks);
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->steps.steps.size(), kSteps);
  for (const StepRow& row : rep->steps.steps) {
    EXPECT_EQ(row.straggler, -1) << "step " << row.step << ": top cause rank " << row.top_rank << " "
                                 << row.straggler_cost_ns << " ns";
    EXPECT_GT(row.attributed_ns, 0) << "the jitter is charged, only not named";
  }
  EXPECT_EQ(rep->steps.summary.with_straggler, 0u);
  EXPECT_TRUE(rep->stragglers.empty());
}

TEST(StepTable, APersistentlyLateRankIsTheStragglerOfEveryStep) {
  TempDir dir;
  Loop loop = MakeLoop([](uint64_t s, uint32_t r) { return Jitter(s, r) / 4 + (r == 1 ? 3'000'000 : 0); });
  auto reader = test_support::WriteProfile(dir / "persistent.h5", loop.ranks);
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  for (const StepRow& row : rep->steps.steps) {
    EXPECT_EQ(row.straggler, 1) << "step " << row.step;
    EXPECT_NEAR(row.straggler_cost_ns, 3 * 3'000'000.0, 3 * 100'000.0) << "step " << row.step;
  }
}

TEST(StepTable, NoStepMarksGiveAnEmptyTableAndNoJsonSteps) {
  TempDir dir;
  std::vector<RankData> ranks(2);
  for (uint32_t r = 0; r < 2; ++r) {
    ranks[r].events.push_back(Collective(COMMPROF_OP_ALLREDUCE, 0, 1000, 2000));
  }
  auto reader = test_support::WriteProfile(dir / "nosteps.h5", ranks);
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_TRUE(rep->steps.steps.empty());
  const nlohmann::ordered_json j = ReportToJson(rep.value());
  EXPECT_TRUE(j["steps"].empty());
  EXPECT_EQ(j["step_time"]["steps"], 0);
  EXPECT_EQ(j["step_time"]["p99_ns"], 0);
}

// Two capture windows per rank: window 0 holds steps 2-3, window 1 steps 6-7 (the rest was not
// recorded). A step ends at its window's end when no mark follows inside it; an imported range
// (end_ns > start_ns) ends at its own end.
std::vector<RankData> WindowedJob() {
  std::vector<RankData> ranks(2);
  for (uint32_t r = 0; r < 2; ++r) {
    auto& ev = ranks[r].events;
    ev.push_back(Window(0, 1'000'000, 5'000'000, 2, 2));
    ev.push_back(Step(2, 1'000'000));
    ev.push_back(Collective(COMMPROF_OP_ALLREDUCE, 0, 1'500'000 + r * 100'000, 1'700'000, {.bytes = 8}));
    ev.push_back(Step(3, 3'000'000));
    ev.push_back(Collective(COMMPROF_OP_ALLREDUCE, 1, 3'500'000, 3'700'000, {.bytes = 8}));
    ev.push_back(Window(1, 20'000'000, 30'000'000, 6, 2));
    ev.push_back(Step(6, 20'000'000));
    ev.push_back(Collective(COMMPROF_OP_ALLREDUCE, 2, 21'000'000, 21'200'000, {.bytes = 8}));
    ev.push_back(Collective(COMMPROF_OP_BARRIER, 3, 22'000'000, 22'100'000));
    ev.push_back(Step(7, 25'000'000, 27'000'000));  // a range: ends at 27 ms, not at the window's end
    ev.push_back(Collective(COMMPROF_OP_ALLREDUCE, 4, 26'000'000, 26'100'000, {.bytes = 8}));
    ev.push_back(test_support::events::CommCreated(77, static_cast<int32_t>(r), 2));  // at 10 ms: a definition
  }
  return ranks;
}

TEST(StepTable, StepsEndAtTheirWindowsCloseAndKnowTheirWindow) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "windows.h5", WindowedJob());
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->steps.steps.size(), 4u);
  const std::map<uint64_t, std::pair<int64_t, int64_t>> want = {{2, {0, 2'000'000}},   // to the next mark
                                                                {3, {0, 2'000'000}},   // to window 0's end (5 ms)
                                                                {6, {1, 5'000'000}},   // to the next mark (25 ms)
                                                                {7, {1, 2'000'000}}};  // its own range
  for (const StepRow& row : rep->steps.steps) {
    ASSERT_TRUE(want.count(row.step)) << row.step;
    EXPECT_EQ(row.window, want.at(row.step).first) << "step " << row.step;
    EXPECT_EQ(row.max_ns, want.at(row.step).second) << "step " << row.step;
    EXPECT_EQ(row.min_ns, want.at(row.step).second) << "step " << row.step;
  }
  // Step 2's allreduce: rank 0 waits 100 us for rank 1.
  EXPECT_EQ(RowOf(rep.value(), 2).wait_ns, 100'000);
  // Step 6 has two collectives per rank: 2 x (200 + 100) us of blocked time on each of 2 ranks.
  EXPECT_EQ(RowOf(rep.value(), 6).comm_ns, 2 * 300'000);
  EXPECT_EQ(ReportToJson(rep.value())["steps"][3]["window"], 1);
}

TEST(ProfileReaderWindow, SelectsExactlyTheEventsOfWindowKOnEveryRank) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "windows.h5", WindowedJob());
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(reader->SelectWindow(1).ok());
  ASSERT_TRUE(reader->window().has_value());
  for (uint32_t r = 0; r < 2; ++r) {
    const std::vector<commprof_event> ev = test_support::ReadEvents(*reader, r);
    std::map<uint8_t, int> kinds;
    for (const auto& e : ev) {
      ++kinds[e.kind];
    }
    // window 1's own record, steps 6 and 7, its 3 collectives, and the communicator definition
    const std::map<uint8_t, int> want = {{COMMPROF_KIND_WINDOW, 1},
                                         {COMMPROF_KIND_STEP, 2},
                                         {COMMPROF_KIND_MPI_COLLECTIVE, 3},
                                         {COMMPROF_KIND_MPI_COMM, 1}};
    EXPECT_EQ(kinds, want) << "rank " << r;
  }
  // The analysis sees only window 1: its two steps and 3 matched instances.
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->wait.matched, 3u);
  ASSERT_EQ(rep->steps.steps.size(), 2u);
  EXPECT_EQ(rep->steps.steps[0].step, 6u);
  EXPECT_EQ(rep->steps.steps[1].step, 7u);

  ASSERT_TRUE(reader->SelectWindow(0).ok());
  EXPECT_EQ(test_support::ReadEvents(*reader, 0).size(), 1u + 2u + 2u + 1u);
}

TEST(ProfileReaderWindow, AMissingWindowIsAnErrorNamingTheFileAndListingItsWindows) {
  TempDir dir;
  const std::string path = dir / "windows.h5";
  auto reader = test_support::WriteProfile(path, WindowedJob());
  ASSERT_NE(reader, nullptr);
  Status st = reader->SelectWindow(5);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("no rank has window 5 (the file's windows: 0, 1)"), std::string::npos) << st.message();

  std::vector<RankData> plain(1);
  plain[0].events.push_back(Step(0, 1000));
  auto no_windows = test_support::WriteProfile(dir / "plain.h5", plain);
  ASSERT_NE(no_windows, nullptr);
  st = no_windows->SelectWindow(0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir / "plain.h5"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("has no capture windows"), std::string::npos) << st.message();
}

TEST(ProfileReaderWindow, ARankWithoutTheWindowIsLeftOutAndNamed) {
  TempDir dir;
  std::vector<RankData> ranks = WindowedJob();
  // Rank 1 ended before window 1 opened: only window 0.
  std::erase_if(ranks[1].events,
                [](const commprof_event& e) { return e.start_ns >= 20'000'000 && e.kind != COMMPROF_KIND_MPI_COMM; });
  auto reader = test_support::WriteProfile(dir / "short.h5", ranks);
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(reader->SelectWindow(1).ok());
  ASSERT_EQ(reader->info().ranks.size(), 1u);
  ASSERT_EQ(reader->info().faults.size(), 1u);
  EXPECT_EQ(reader->info().faults[0].rank, 1u);
  EXPECT_NE(reader->info().faults[0].message.find("the rank has no window 1 (its windows: 0)"), std::string::npos)
      << reader->info().faults[0].message;
}

// torch.profiler's ProfilerStep#N ranges, imported: each step lasts its range on every rank, and
// a rank late by 2 ms in every iteration (of 10 ms steps) is the straggler of every step.
TEST(StepTable, ImportedKinetoStepsAreTheProfilerStepRanges) {
  TempDir tmp;
  test_support::KinetoSynth s;
  s.ranks = 4;
  s.iterations = 12;
  s.straggler = 2;
  s.straggler_delay_ns = 2'000'000;
  s.clock_skew_ns = {0, 300'000, -150'000, 50'000};
  ASSERT_EQ(test_support::WriteKinetoSynth(s, tmp.path()).size(), 4u);
  kineto::ImportOptions opts;
  opts.inputs = {tmp.path()};
  opts.align = kineto::Align::kCollectiveEnds;
  auto job = kineto::ImportKineto(opts);
  ASSERT_TRUE(job.ok()) << job.status().message();
  TempDir out;
  ASSERT_TRUE(cli::WriteImportedJob(job.value(), out / "job.h5", "test").ok());
  auto reader = ProfileReader::Open(out / "job.h5");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto rep = AnalyzeJob(*reader.value());
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->steps.steps.size(), s.iterations);
  for (uint64_t i = 0; i < s.iterations; ++i) {
    const StepRow& row = rep->steps.steps[i];
    EXPECT_EQ(row.step, i);
    ASSERT_EQ(row.ranks.size(), s.ranks);
    EXPECT_EQ(row.min_ns, s.period_ns - 1000) << "the range's dur";
    EXPECT_EQ(row.max_ns, s.period_ns - 1000);
    EXPECT_EQ(row.straggler, 2) << "step " << i;
    // 3 waiters x 2 ms, aligned within the synthetic traces' 2 us end jitter
    EXPECT_NEAR(row.straggler_cost_ns, 3 * 2'000'000.0, 3 * 3000.0) << "step " << i;
  }
}

// A real torch.profiler trace (read in place when present): its ProfilerStep#N annotations become
// the step table's steps, one per range, each as long as its range.
TEST(StepTable, RealKinetoTraceStepsComeFromItsProfilerStepRanges) {
  const std::string dir = (std::filesystem::path(COMMPROF_SOURCE_DIR).parent_path() / "shared" / "data" / "kineto" /
                           "hta-trace-filter-2rank")
                              .string();
  if (!std::filesystem::exists(dir)) {
    GTEST_SKIP() << "Kineto test data not found: " << dir;
  }
  kineto::ImportOptions opts;
  opts.inputs = {dir};
  auto job = kineto::ImportKineto(opts);
  ASSERT_TRUE(job.ok()) << job.status().message();
  TempDir out;
  ASSERT_TRUE(cli::WriteImportedJob(job.value(), out / "job.h5", "test").ok());
  auto reader = ProfileReader::Open(out / "job.h5");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  // The ranges as the file holds them: the ground truth of each rank's durations.
  std::map<uint64_t, std::map<uint32_t, int64_t>> ranges;
  for (const RankInfo& r : reader.value()->info().ranks) {
    for (const commprof_event& e : test_support::ReadEvents(*reader.value(), r.rank)) {
      if (e.kind == COMMPROF_KIND_STEP) {
        EXPECT_GT(e.end_ns, e.start_ns);
        ranges[e.seq][r.rank] += static_cast<int64_t>(e.end_ns - e.start_ns);
      }
    }
  }
  ASSERT_FALSE(ranges.empty());
  auto rep = AnalyzeJob(*reader.value());
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->steps.steps.size(), ranges.size());
  for (const StepRow& row : rep->steps.steps) {
    ASSERT_TRUE(ranges.count(row.step)) << row.step;
    ASSERT_EQ(row.ranks.size(), ranges[row.step].size()) << row.step;
    for (const StepRankFigures& f : row.ranks) {
      EXPECT_EQ(f.duration_ns, ranges[row.step][f.rank]) << "step " << row.step << " rank " << f.rank;
    }
  }
}

}  // namespace
}  // namespace commprof
