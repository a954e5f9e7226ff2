// `commprof stats` as a user runs it (docs/cli.md): the real binary on the golden file of the unit
// tests (op_stats_golden.h), its text, CSV and JSON checked against the same hand-computed
// figures, its options, and every error path with its exit code (0 ok, 1 failed, 2 usage).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "analysis/op_stats_golden.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::TempDir;

struct Ran {
  int rc = -1;
  std::string out;
  std::string err;
};

// Runs `commprof ARGS` (a shell word list; the test's paths have no spaces).
Ran Commprof(const TempDir& dir, const std::string& args) {
  const std::string out = dir / "stdout", err = dir / "stderr";
  const std::string cmd = std::string(COMMPROF_CLI_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());  // NOLINT(cert-env33-c): the test drives the CLI
  Ran r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream is(s);
  for (std::string line; std::getline(is, line);) {
    lines.push_back(line);
  }
  return lines;
}

// RFC 4180 fields of one line (quoted fields may hold commas and doubled quotes).
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    n += (c & 0xC0) != 0x80 ? 1 : 0;
  }
  return n;
}

class StatsCli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(test_support::WriteProfile(file_, op_stats_golden::GoldenRanks()), nullptr); }
  const nlohmann::json* Row(const nlohmann::json& doc, const std::string& name) {
    for (const auto& row : doc["rows"]) {
      if (row["name"] == name) {
        return &row;
      }
    }
    return nullptr;
  }
  TempDir dir_;
  const std::string file_ = dir_ / "golden.h5";
};

TEST_F(StatsCli, TextFitsIn100ColumnsAndListsTheRowsLargestTotalFirstWithImbalance) {
  Ran r = Commprof(dir_, "stats " + file_);
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = Lines(r.out);
  ASSERT_GE(lines.size(), 3u);
  for (const std::string& line : lines) {
    EXPECT_LE(CodePoints(line), 100u) << line;
  }
  EXPECT_NE(lines[0].find("4 ranks"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1].rfind("name ", 0), 0u) << lines[1];
  for (const char* header : {"kind", "calls", "total", "self", "mean", "p50", "p99", "max", "gbps", "imbal", "maxrk"}) {
    EXPECT_NE(lines[1].find(header), std::string::npos) << header;
  }
  EXPECT_EQ(lines[2].rfind("HtoD ", 0), 0u) << lines[2];  // 200 us, the largest total
  bool allreduce = false, long_kernel = false;
  for (const std::string& line : lines) {
    if (line.rfind("MPI_Allreduce ", 0) == 0) {
      allreduce = true;
      // 20 calls, 10.5 us in all, p50 300 ns, p99 5 us, rank 2 holds 6000 of 10500 ns: 2.29.
      for (const char* cell : {" mpi ", " 20 ", "10.5us", "300ns", "5.00us", "2.29", " 2"}) {
        EXPECT_NE(line.find(cell), std::string::npos) << cell << " in " << line;
      }
    }
    if (line.rfind("void cutlas", 0) == 0) {
      long_kernel = true;
      EXPECT_NE(line.find("..."), std::string::npos) << line;      // cut in the middle
      EXPECT_NE(line.find("Params)"), std::string::npos) << line;  // both ends kept
    }
  }
  EXPECT_TRUE(allreduce && long_kernel) << r.out;
}

TEST_F(StatsCli, TopSaysHowManyRowsWereLeftOutAndSortTakesTheShownColumns) {
  Ran r = Commprof(dir_, "stats " + file_ + " --top 3 --sort calls");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u + 3u + 2u) << r.out;
  EXPECT_EQ(lines[2].rfind("MPI_Allreduce ", 0), 0u) << lines[2];  // 20 calls
  EXPECT_EQ(lines[5], "13 more rows not shown (--top 0 shows every row)");
  r = Commprof(dir_, "stats " + file_ + " --sort name --top 0");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Lines(r.out).size(), 2u + 16u + 1u) << r.out;  // and the incomplete Isend's note
  EXPECT_EQ(Lines(r.out)[2].rfind("HtoD ", 0), 0u);        // A-Z, upper case first
}

TEST_F(StatsCli, CsvParsesWithAHeaderAndRawNanosecondsAndFullNames) {
  Ran r = Commprof(dir_, "stats " + file_ + " --format csv");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 1u + 16u);  // every row: csv has no default --top
  const auto header = CsvFields(lines[0]);
  ASSERT_EQ(header.size(), 20u);
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  bool allreduce = false, long_kernel = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = CsvFields(lines[i]);
    ASSERT_EQ(f.size(), header.size()) << lines[i];
    if (f[col("name")] == "MPI_Allreduce") {
      allreduce = true;
      EXPECT_EQ(f[col("total_ns")], "10500");
      EXPECT_EQ(f[col("p99_ns")], "5000");
      EXPECT_EQ(f[col("max_rank")], "2");
      EXPECT_EQ(f[col("bytes")], std::to_string(4 * (3 * op_stats_golden::kSmall + 2 * op_stats_golden::kBig)));
    }
    if (f[col("name")] == op_stats_golden::kStrings[op_stats_golden::kLongKernel]) {
      long_kernel = true;
      EXPECT_EQ(f[col("calls")], "2");
      EXPECT_EQ(f[col("total_ns")], "1400");
    }
  }
  EXPECT_TRUE(allreduce && long_kernel) << r.out;
}

TEST_F(StatsCli, JsonIsTheVersionedDocumentWithTheUnitFigures) {
  Ran r = Commprof(dir_, "stats " + file_ + " --format json -o " + (dir_ / "s.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  std::ifstream f(dir_ / "s.json");
  const nlohmann::json doc = nlohmann::json::parse(f);
  EXPECT_EQ(doc["schema"], "commprof-stats");
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["ranks_read"], nlohmann::json({0, 1, 2, 3}));
  EXPECT_EQ(doc["rows_total"], 16);
  EXPECT_EQ(doc["rows_left_out"], 0);
  EXPECT_EQ(doc["incomplete_skipped"], 1);
  const nlohmann::json* ar = Row(doc, "MPI_Allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ((*ar)["calls"], 20);
  EXPECT_EQ((*ar)["total_ns"], 10500);
  EXPECT_EQ((*ar)["p50_ns"], 300);
  EXPECT_EQ((*ar)["p99_ns"], 5000);
  EXPECT_EQ((*ar)["max_rank"], 2);
  EXPECT_DOUBLE_EQ((*ar)["imbalance"].get<double>(), 6000.0 / 2625.0);
  ASSERT_EQ((*ar)["per_rank"].size(), 4u);
  EXPECT_EQ((*ar)["per_rank"][2]["total_ns"], 6000);
  const nlohmann::json* outer = Row(doc, "outer");
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ((*outer)["self_ns"], 6000);
  EXPECT_EQ((*outer)["total_ns"], 11000);
  const nlohmann::json* htod = Row(doc, "HtoD");
  ASSERT_NE(htod, nullptr);
  EXPECT_DOUBLE_EQ((*htod)["bandwidth_gbps"].get<double>(), 10.0);
  bool hist = false;
  for (const auto& h : doc["size_histograms"]) {
    if (h["name"] == "MPI_Allreduce") {
      hist = true;
      ASSERT_EQ(h["buckets"].size(), 2u);
      EXPECT_EQ(h["buckets"][0]["low"], 1024);
      EXPECT_EQ(h["buckets"][0]["calls"], 12);
      EXPECT_EQ(h["buckets"][1]["low"], 1 << 20);
      EXPECT_EQ(h["buckets"][1]["calls"], 8);
    }
  }
  EXPECT_TRUE(hist);
}

TEST_F(StatsCli, KindsRanksAndBySplitTheRowsAsAsked) {
  Ran r = Commprof(dir_, "stats " + file_ + " --kinds nvtx,user --format json");
  ASSERT_EQ(r.rc, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["rows"].size(), 7u);
  for (const auto& row : doc["rows"]) {
    EXPECT_TRUE(row["category"] == "nvtx" || row["category"] == "user") << row;
  }
  r = Commprof(dir_, "stats " + file_ + " --by rank --ranks 1-2 --kinds mpi --format json");
  ASSERT_EQ(r.rc, 0) << r.err;
  doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["ranks_read"], nlohmann::json({1, 2}));
  ASSERT_EQ(doc["rows"].size(), 2u);
  EXPECT_EQ(doc["rows"][0]["rank"], 2);  // 6000 ns before rank 1's 1500
  EXPECT_EQ(doc["rows"][0]["total_ns"], 6000);
  EXPECT_EQ(doc["rows"][1]["rank"], 1);
  EXPECT_TRUE(doc["rows"][0]["imbalance"].is_null());
  r = Commprof(dir_, "stats " + file_ + " --by size --by comm --kinds mpi");
  ASSERT_EQ(r.rc, 0) << r.err;
  bool small = false, big = false;
  for (const std::string& line : Lines(r.out)) {
    EXPECT_LE(CodePoints(line), 100u) << line;
    small = small || (line.rfind("MPI_Allreduce", 0) == 0 && line.find("world") != std::string::npos &&
                      line.find("1K-2K") != std::string::npos && line.find(" 12 ") != std::string::npos);
    big = big || (line.rfind("MPI_Allreduce", 0) == 0 && line.find("1M-2M") != std::string::npos &&
                  line.find(" 8 ") != std::string::npos);
  }
  EXPECT_TRUE(small && big) << r.out;
}

TEST_F(StatsCli, UsageErrorsExitWith2NamingTheOption) {
  struct Case {
    std::string args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"--sort speed", "--sort speed is not a column; valid: name, kind, calls, total"},
      {"--format xml", "--format xml is not supported"},
      {"--by thread", "--by thread is not one of name, comm, size, rank"},
      {"--kinds mpi,gpu", "--kinds gpu is not a kind; valid: mpi, nccl"},
      {"--ranks 1-x", "--ranks '1-x' is not a list"},
      {"--ranks 7", "has no events of rank 7"},
      {"--top -4", "--top must be a number of rows >= 0"},
      {"--top many", "--top"},
      {"-o " + file_, "-o " + file_ + " is the input file"},  // it would be truncated
      {"--frobnicate", "frobnicate"},
  };
  for (const Case& c : cases) {
    Ran r = Commprof(dir_, "stats " + file_ + " " + c.args);
    EXPECT_EQ(r.rc, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
  EXPECT_TRUE(ProfileReader::Open(file_).ok());  // not overwritten by -o
}

// --window is one shared option (cli/util.cc): a value that is not a window index gets one short
// line naming it in every command that takes it (CLI11's own check printed a 300-digit range).
TEST_F(StatsCli, EveryCommandRefusesAWindowThatIsNotAnIndexInOneShortLine) {
  for (const std::string cmd : {"info", "report", "check", "export", "hta", "stats", "diff"}) {
    const std::string files = cmd == "diff" ? file_ + " " + file_ : file_;
    const std::string extra = cmd == "check" ? " --max incomplete=0" : "";
    for (const std::string bad : {"-1", "x", "1.5", "99999999999999999999"}) {
      Ran r = Commprof(dir_, cmd + " " + files + extra + " --window " + bad);
      EXPECT_EQ(r.rc, 2) << cmd << " --window " << bad << ": " << r.err;
      EXPECT_NE(r.err.find("--window: '" + bad + "' is not a window index"), std::string::npos) << cmd << ": " << r.err;
      EXPECT_LT(r.err.size(), 200U) << cmd << ": " << r.err;
    }
  }
}

// An empty --ranks ("" from a script's unset variable) is refused like any list that is not one,
// by every command that takes it; it used to mean every rank.
TEST_F(StatsCli, AnEmptyRankListIsRefusedByEveryCommandThatTakesOne) {
  const std::string out = dir_ / "x.json";
  for (const std::string& cmd : {std::string("stats"), std::string("hta"), "export -q -o " + out}) {
    Ran r = Commprof(dir_, cmd + " " + file_ + " --ranks ''");
    EXPECT_EQ(r.rc, 2) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("--ranks '' is not a list like"), std::string::npos) << cmd << ": " << r.err;
    r = Commprof(dir_, cmd + " " + file_ + " --ranks 1");
    EXPECT_EQ(r.rc, 0) << cmd << ": " << r.err;
  }
  EXPECT_TRUE(std::filesystem::exists(out));  // written by the export of rank 1 only
}

TEST_F(StatsCli, WithoutAFileItIsAUsageErrorAndHelpExplainsEachOption) {
  Ran r = Commprof(dir_, "stats");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("file is required"), std::string::npos) << r.err;
  r = Commprof(dir_, "stats --help");
  EXPECT_EQ(r.rc, 0);
  for (const char* option : {"--by", "--sort", "--top", "--ranks", "--kinds", "--format", "--window", "--output"}) {
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
  }
}

TEST_F(StatsCli, FailuresExitWith1NamingTheFileAndAnUnreadableFileWith2) {
  Ran r = Commprof(dir_, "stats " + (dir_ / "absent.h5"));
  EXPECT_EQ(r.rc, 2);  // the input cannot be read at all: 2, as for every command
  EXPECT_NE(r.err.find(dir_ / "absent.h5"), std::string::npos) << r.err;
  { std::ofstream(dir_ / "notes.txt") << "not a profile\n"; }
  r = Commprof(dir_, "stats " + (dir_ / "notes.txt"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(dir_ / "notes.txt"), std::string::npos) << r.err;
  r = Commprof(dir_, "stats " + file_ + " --kinds nccl");  // an empty selection
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no operations of kinds nccl"), std::string::npos) << r.err;
  r = Commprof(dir_, "stats " + file_ + " --window 3");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(file_), std::string::npos) << r.err;
  r = Commprof(dir_, "stats " + file_ + " -o " + (dir_ / "no/such/dir/out.txt"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("cannot write " + (dir_ / "no/such/dir/out.txt")), std::string::npos) << r.err;
}

// An output that cannot be written is named with the reason, for `stats` and `report` alike (one
// check, cli/output_file.h), before the analysis; an existing output is left whole; a device is
// written directly.
TEST_F(StatsCli, AnOutputThatCannotBeWrittenIsNamedWithTheReasonAndLeavesTheOldOneWhole) {
  for (const char* command : {"stats", "report"}) {
    SCOPED_TRACE(command);
    const std::string missing = dir_ / "no/such/dir/out.txt";
    Ran r = Commprof(dir_, std::string(command) + " " + file_ + " -o " + missing);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("cannot write " + missing + ": directory " + (dir_ / "no/such/dir") + " does not exist"),
              std::string::npos)
        << r.err;
    r = Commprof(dir_, std::string(command) + " " + file_ + " -o " + dir_.path());
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("cannot write " + dir_.path() + ": it is a directory"), std::string::npos) << r.err;
    r = Commprof(dir_, std::string(command) + " " + file_ + " -o /dev/null");
    EXPECT_EQ(r.rc, 0) << r.err;
    r = Commprof(dir_, std::string(command) + " " + file_ + " -o /dev/stdout");  // a link to our pipe
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find(command == std::string("stats") ? "MPI_Allreduce" : "verdict"), std::string::npos) << r.out;
    const std::string kept = dir_ / (std::string(command) + ".kept");
    { std::ofstream(kept) << "an earlier output\n"; }
    r = Commprof(dir_, std::string(command) + " " + file_ + " -o " + kept);
    EXPECT_EQ(r.rc, 0) << r.err;
    std::ifstream in(kept);
    std::string first;
    std::getline(in, first);
    EXPECT_NE(first, "an earlier output") << "the output was not replaced";
  }
}

TEST_F(StatsCli, ARankWithABadRowIsNamedAndTheOthersAreCountedWithExit1) {
  auto ranks = op_stats_golden::GoldenRanks();
  commprof_event bad = op_stats_golden::Range(COMMPROF_KIND_USER_RANGE, op_stats_golden::kFwdUser, 900, 100);
  ranks[3].events.push_back(bad);  // ends before it starts
  ASSERT_NE(test_support::WriteProfile(dir_ / "bad.h5", ranks), nullptr);
  Ran r = Commprof(dir_, "stats " + (dir_ / "bad.h5") + " --format json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("/ranks/3/events row 5"), std::string::npos) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["ranks_read"], nlohmann::json({0, 1, 2}));
  EXPECT_EQ(doc["faults"].size(), 1u);
  const nlohmann::json* ar = Row(doc, "MPI_Allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ((*ar)["total_ns"], 1500 + 1500 + 6000);
  // --ranks without the bad rank: what was asked is whole, so no fault and exit 0.
  r = Commprof(dir_, "stats " + (dir_ / "bad.h5") + " --format json --ranks 0-2");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["faults"].size(), 0u);
  // --ranks with it: named, exit 1.
  r = Commprof(dir_, "stats " + (dir_ / "bad.h5") + " --format json --ranks 2,3");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("/ranks/3/events row 5"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ranks_read"], nlohmann::json({2}));
}

// `-o -` is standard output, as for `commprof export` (docs/cli.md), not a file named "-".
TEST_F(StatsCli, OutputDashIsStandardOutput) {
  Ran r = Commprof(dir_, "stats " + file_ + " --format json -o -");
  EXPECT_EQ(r.rc, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema"], "commprof-stats");
  EXPECT_FALSE(std::ifstream(dir_ / "-").good());
}

// A rank whose string table is gone (a damaged file) still has its events, but their names are
// lost: they cannot join the other ranks' rows of the same call. Said on stderr and in "faults",
// exit 1, as for any part of the file that could not be read; the other ranks' figures are intact.
TEST_F(StatsCli, ARankWithoutItsStringTableIsNamedWithExit1) {
  auto ranks = op_stats_golden::GoldenRanks();
  ranks[3].strings.clear();
  ASSERT_NE(test_support::WriteProfile(dir_ / "nostrings.h5", ranks), nullptr);
  const size_t named = static_cast<size_t>(std::count_if(ranks[3].events.begin(), ranks[3].events.end(),
                                                         [](const commprof_event& e) { return e.name_id != 0; }));
  ASSERT_GT(named, 0u);
  Ran r = Commprof(dir_, "stats " + (dir_ / "nostrings.h5") + " --format json --kinds mpi");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find((dir_ / "nostrings.h5") + ": rank 3: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/ranks/3/strings (0 strings) does not hold"), std::string::npos) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["faults"].size(), 1u) << doc["faults"];
  const nlohmann::json* ar = Row(doc, "MPI_Allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ((*ar)["calls"], 15);  // ranks 0-2 only: rank 3's are under their operation's name
  r = Commprof(dir_, "stats " + (dir_ / "nostrings.h5") + " --kinds mpi --ranks 0-2");
  EXPECT_EQ(r.rc, 0) << r.err;  // the damaged rank not read: nothing to say
}

// A lossy file (the collector dropped events: `commprof info` counts them missing) still has
// stats, but the user is told they are short: a footnote under the table and "missing_events" in
// the JSON, the sum over the ranks read. Exit 0: the file itself is whole.
TEST_F(StatsCli, EventsTheFileLacksAreCountedUnderTheTable) {
  test_support::ProfileOptions options;
  options.counters = {{"dropped_events", 7}};  // every rank's bye
  ASSERT_NE(test_support::WriteProfile(dir_ / "lossy.h5", op_stats_golden::GoldenRanks(), options), nullptr);
  Ran r = Commprof(dir_, "stats " + (dir_ / "lossy.h5") + " --format json");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["missing_events"], 4 * 7);
  r = Commprof(dir_, "stats " + (dir_ / "lossy.h5") + " --ranks 1,3");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("\n14 events the ranks recorded are not in the file (dropped or lost)"), std::string::npos)
      << r.out;
  r = Commprof(dir_, "stats " + file_ + " --format json");  // nothing lost: 0, and no footnote
  EXPECT_EQ(nlohmann::json::parse(r.out)["missing_events"], 0);
  r = Commprof(dir_, "stats " + file_);
  EXPECT_EQ(r.out.find("not in the file"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace commprof
