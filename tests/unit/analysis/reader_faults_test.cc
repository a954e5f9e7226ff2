// The reader facing damaged and foreign files (docs/file-format.md#reading-rules): strict rank
// names, per-rank faults that leave the other ranks readable and analysable, messages that say
// what is wrong with a file that cannot be opened, and the loss a file can prove.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "analysis/export/timeline_walk.h"
#include "analysis/load/event_screen.h"
#include "analysis/load/profile_reader.h"
#include "analysis/report/job_report.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
using test_support::WriteProfile;
namespace ev = test_support::events;

// Four ranks, each with five allreduces on MPI_COMM_WORLD.
std::vector<RankData> FourRanks() {
  std::vector<RankData> ranks(4);
  for (uint32_t r = 0; r < 4; ++r) {
    for (uint64_t s = 0; s < 5; ++s) {
      const uint64_t t = 1000 + s * 1000;
      ranks[r].events.push_back(ev::Collective(COMMPROF_OP_ALLREDUCE, s, t + r * 10, t + 500));
    }
  }
  return ranks;
}

// Opens `path` read-write with the HDF5 C API for a test to damage it.
h5::Handle OpenForEdit(const std::string& path) {
  h5::QuietErrors();
  return h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
}

std::vector<uint32_t> RanksOf(const ProfileInfo& info) {
  std::vector<uint32_t> out;
  for (const RankInfo& r : info.ranks) out.push_back(r.rank);
  return out;
}

bool HasFault(const ProfileInfo& info, const std::string& text) {
  return std::any_of(info.faults.begin(), info.faults.end(),
                     [&](const RankFault& f) { return f.message.find(text) != std::string::npos; });
}

TEST(ReaderFaults, GroupNamesThatAreNotRanksAreNamedAndTheOtherRanksRead) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "names.h5";
  ASSERT_NE(WriteProfile(path, FourRanks()), nullptr);
  const std::string long_name(70, '7');  // longer than the 64-byte buffer names were cut to
  {
    h5::Handle f = OpenForEdit(path);
    ASSERT_TRUE(f.valid());
    for (const std::string& n : {std::string("-1"), std::string("2junk"), long_name, std::string("01"),
                                 std::string("4294967296"), std::string("")}) {
      if (n.empty()) continue;
      h5::Handle g(H5Gcreate2(f.get(), ("/ranks/" + n).c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      ASSERT_TRUE(g.valid()) << n;
    }
  }
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  EXPECT_EQ(RanksOf(info), (std::vector<uint32_t>{0, 1, 2, 3})) << "-1 must not read as 4294967295, 2junk as 2";
  ASSERT_EQ(info.faults.size(), 5u);
  for (const RankFault& f : info.faults) {
    EXPECT_FALSE(f.rank.has_value()) << f.message;
    EXPECT_EQ(f.message.rfind(path + ": /ranks/'", 0), 0u) << f.message;
    EXPECT_NE(f.message.find("the name is not a rank"), std::string::npos) << f.message;
  }
  for (const std::string& n : {std::string("-1"), std::string("2junk"), std::string("01"), std::string("4294967296")}) {
    EXPECT_TRUE(HasFault(info, "/ranks/'" + n + "': the name is not a rank")) << n;
  }
  EXPECT_TRUE(HasFault(info, "/ranks/'" + long_name + "': the name is not a rank")) << "long names are not dropped";
  // The analyses run on the four readable ranks.
  auto rep = AnalyzeJob(*r.value());
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->wait.matched, 5u);
}

TEST(ReaderFaults, ABadGroupMarksOnlyItsRank) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "groups.h5";
  auto ranks = FourRanks();
  ranks[1].points = {{0, 100, 10}};
  ASSERT_NE(WriteProfile(path, ranks), nullptr);
  {
    h5::Handle f = OpenForEdit(path);
    ASSERT_TRUE(f.valid());
    // rank 1: a clock point no clock produces (a negative round trip), in row 0
    h5::Handle d(H5Dopen2(f.get(), "/ranks/1/clock_points", H5P_DEFAULT));
    ASSERT_TRUE(d.valid());
    int64_t row[3] = {0, 100, -5};
    ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, row), 0);
    // rank 2: its rank attribute says another rank
    h5::Handle g(H5Gopen2(f.get(), "/ranks/2", H5P_DEFAULT));
    ASSERT_TRUE(h5::WriteAttr(g.get(), "rank", uint64_t{7}));
  }
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  EXPECT_EQ(RanksOf(info), (std::vector<uint32_t>{0, 3}));
  ASSERT_EQ(info.faults.size(), 2u);
  EXPECT_EQ(info.faults[0].rank, 1u);
  EXPECT_EQ(info.faults[0].message, path + ": /ranks/1/clock_points row 0 holds impossible values");
  EXPECT_EQ(info.faults[1].rank, 2u);
  EXPECT_EQ(info.faults[1].message, path + ": /ranks/2: attribute 'rank' is 7, not the group's name");
  EXPECT_TRUE(info.NeverConnected().empty()) << "an unreadable rank did connect";
}

// A rank's events or strings table replaced by something else (a 2-D table, numbers instead of
// strings): that rank is named with the table at fault, the others are read.
TEST(ReaderFaults, ATableOfTheWrongShapeOrTypeMarksOnlyItsRank) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "tables.h5";
  ASSERT_NE(WriteProfile(path, FourRanks()), nullptr);
  {
    h5::Handle f = OpenForEdit(path);
    ASSERT_TRUE(f.valid());
    ASSERT_GE(H5Ldelete(f.get(), "/ranks/1/events", H5P_DEFAULT), 0);
    hsize_t two_d[2] = {3, 4};
    h5::Handle grid(H5Screate_simple(2, two_d, nullptr));
    h5::Handle events(
        H5Dcreate2(f.get(), "/ranks/1/events", H5T_STD_U8LE, grid.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(events.valid());
    ASSERT_GE(H5Ldelete(f.get(), "/ranks/3/strings", H5P_DEFAULT), 0);
    hsize_t rows = 5;
    h5::Handle column(H5Screate_simple(1, &rows, nullptr));
    h5::Handle strings(
        H5Dcreate2(f.get(), "/ranks/3/strings", H5T_STD_I32LE, column.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(strings.valid());
  }
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  EXPECT_EQ(RanksOf(info), (std::vector<uint32_t>{0, 2}));
  ASSERT_EQ(info.faults.size(), 2u);
  EXPECT_EQ(info.faults[0].rank, 1u);
  EXPECT_EQ(info.faults[0].message, path + ": /ranks/1/events is not a 1-D table of event records");
  EXPECT_EQ(info.faults[1].rank, 3u);
  EXPECT_EQ(info.faults[1].message, path + ": /ranks/3/strings is not a 1-D table of strings");
}

TEST(ReaderFaults, ARowThatEndsBeforeItStartsMarksItsRankAndTheOthersAreAnalysed) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "row.h5";
  auto ranks = FourRanks();
  std::swap(ranks[2].events[3].start_ns, ranks[2].events[3].end_ns);
  ASSERT_NE(WriteProfile(path, ranks), nullptr);
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  {
    auto whole_file = AnalyzeJob(*r.value());
    ASSERT_FALSE(whole_file.ok()) << "without the screen, the analysis refuses the file";
  }
  EXPECT_EQ(ScreenEventRows(*r.value()), 1u);
  const ProfileInfo& info = r.value()->info();
  EXPECT_EQ(RanksOf(info), (std::vector<uint32_t>{0, 1, 3}));
  ASSERT_EQ(info.faults.size(), 1u);
  EXPECT_EQ(info.faults[0].rank, 2u);
  EXPECT_EQ(info.faults[0].message,
            path + ": /ranks/2/events row 3: mpi_collective ends before it starts (end_ns 4020 < start_ns 4500)");
  auto rep = AnalyzeJob(*r.value());
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->wait.matched, 0u) << "every world allreduce lacks rank 2";
  EXPECT_EQ(rep->wait.incomplete, 5u);
  ASSERT_EQ(rep->wait.ranks.size(), 3u);
  EXPECT_EQ(rep->info.faults.size(), 1u) << "the report carries the fault";
}

TEST(ReaderFaults, ARepeatedSequenceOrADisagreeingOperationMarksThatRank) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "seq.h5";
  auto ranks = FourRanks();
  ranks[1].events[4].seq = 1;                      // rank 1 numbers two allreduces 1
  ranks[3].events[2].subtype = COMMPROF_OP_BCAST;  // rank 3 says call 2 was a broadcast
  ASSERT_NE(WriteProfile(path, ranks), nullptr);
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(ScreenEventRows(*r.value()), 2u);
  const ProfileInfo& info = r.value()->info();
  EXPECT_EQ(RanksOf(info), (std::vector<uint32_t>{0, 2}));
  ASSERT_EQ(info.faults.size(), 2u);
  EXPECT_EQ(info.faults[0].message,
            path +
                ": /ranks/1/events row 4: a second allreduce with communicator 1 sequence 1 "
                "on the same rank (row 1 has it; sequence numbers are unique per communicator)");
  EXPECT_EQ(info.faults[1].message, path +
                                        ": /ranks/3/events row 2: bcast with communicator 1 sequence 2, but rank 0 "
                                        "recorded allreduce for the same call");
  auto rep = AnalyzeJob(*r.value());
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->wait.incomplete, 5u);
}

// AnalyzeReadable screens the rows only when the analysis of every rank fails (or a string table
// is unreadable): for a clean file and for each kind of refused row, its faults and its report are
// those of screening first.
TEST(ReaderFaults, AnalyzeReadableGivesWhatScreeningFirstGives) {
  TempDir dir("commprof-rf");
  std::vector<std::pair<std::string, std::vector<RankData>>> files;
  files.emplace_back("clean.h5", FourRanks());
  files.emplace_back("row.h5", FourRanks());
  std::swap(files.back().second[2].events[3].start_ns, files.back().second[2].events[3].end_ns);
  files.emplace_back("seq.h5", FourRanks());
  files.back().second[1].events[4].seq = 1;
  files.emplace_back("op.h5", FourRanks());
  files.back().second[3].events[2].subtype = COMMPROF_OP_BCAST;
  for (const auto& [name, ranks] : files) {
    const std::string path = dir / name;
    ASSERT_NE(WriteProfile(path, ranks), nullptr);
    auto first = ProfileReader::Open(path);
    auto lazy = ProfileReader::Open(path);
    ASSERT_TRUE(first.ok() && lazy.ok()) << name;
    ScreenEventRows(*first.value());
    auto expected = AnalyzeJob(*first.value());
    auto got = AnalyzeReadable(*lazy.value());
    ASSERT_TRUE(expected.ok()) << name << ": " << expected.status().message();
    ASSERT_TRUE(got.ok()) << name << ": " << got.status().message();
    ASSERT_EQ(got->info.faults.size(), expected->info.faults.size()) << name;
    for (size_t i = 0; i < expected->info.faults.size(); ++i) {
      EXPECT_EQ(got->info.faults[i].rank, expected->info.faults[i].rank) << name;
      EXPECT_EQ(got->info.faults[i].message, expected->info.faults[i].message) << name;
    }
    EXPECT_EQ(RanksOf(lazy.value()->info()), RanksOf(first.value()->info())) << name;
    EXPECT_EQ(ReportToJson(got.value()).dump(), ReportToJson(expected.value()).dump()) << name;
    EXPECT_EQ(got->info.faults.empty(), name == "clean.h5") << name;
  }
}

// `commprof export` screens the rows only when the timeline's own read (ReadTimeline) refuses one,
// so that read must refuse a file exactly when the screening would leave a rank out, non-blocking
// collectives included (the read does not match them, but checks them as if it did): recorded
// twice on one rank, under one identity with a blocking call of the same rank, with an operation
// other ranks' non-blocking or blocking calls disagree with.
TEST(ReaderFaults, TheTimelinesReadRefusesAFileExactlyWhenTheScreeningLeavesARankOut) {
  auto with_nonblocking = [] {
    auto ranks = FourRanks();  // blocking allreduces 0-4, then non-blocking ones 5 and 6
    for (uint32_t r = 0; r < 4; ++r) {
      for (uint64_t s = 5; s < 7; ++s) {
        const uint64_t t = 1000 + s * 1000;
        ranks[r].events.push_back(
            ev::Collective(COMMPROF_OP_ALLREDUCE, s, t + r * 10, t + 500, {.flags = COMMPROF_FLAG_NONBLOCKING}));
      }
    }
    return ranks;
  };
  TempDir dir("commprof-rf");
  std::vector<std::pair<std::string, std::vector<RankData>>> files;
  files.emplace_back("clean.h5", with_nonblocking());
  files.emplace_back("nonblocking_twice.h5", with_nonblocking());
  files.back().second[1].events[6].seq = 5;
  files.emplace_back("nonblocking_other_op.h5", with_nonblocking());
  files.back().second[2].events[6].subtype = COMMPROF_OP_BCAST;
  files.emplace_back("nonblocking_and_blocking_on_one_rank.h5", with_nonblocking());
  files.back().second[1].events[6].seq = 4;
  files.emplace_back("blocking_other_op_than_nonblocking.h5", with_nonblocking());
  files.back().second[3].events.erase(files.back().second[3].events.begin() + 5);  // its non-blocking 5
  files.back().second[3].events[4].seq = 5;
  files.back().second[3].events[4].subtype = COMMPROF_OP_BCAST;
  files.emplace_back("nonblocking_other_op_than_blocking.h5", with_nonblocking());
  files.back().second[0].events.erase(files.back().second[0].events.begin() + 4);  // its blocking 4
  files.back().second[0].events[4].seq = 4;                                        // now non-blocking 4
  files.back().second[0].events[4].subtype = COMMPROF_OP_BCAST;
  files.emplace_back("later_nonblocking_other_op_than_blocking.h5", with_nonblocking());
  files.back().second[3].events.erase(files.back().second[3].events.begin() + 4);  // rank 3's blocking 4
  files.back().second[3].events[4].seq = 4;  // its non-blocking 5 becomes 4, against ranks 0-2's allreduce
  files.back().second[3].events[4].subtype = COMMPROF_OP_BCAST;
  for (const auto& [name, ranks] : files) {
    const std::string path = dir / name;
    ASSERT_NE(WriteProfile(path, ranks), nullptr) << name;
    auto screened = ProfileReader::Open(path);
    auto read = ProfileReader::Open(path);
    ASSERT_TRUE(screened.ok() && read.ok()) << name;
    const size_t left_out = ScreenEventRows(*screened.value());
    EXPECT_EQ(left_out == 0, name == "clean.h5") << name;
    auto timeline = ReadTimeline(*read.value(), false);
    EXPECT_EQ(timeline.ok(), left_out == 0) << name << ": " << timeline.status().message();
  }
}

TEST(ReaderFaults, LostBatchesAndTheirEventsAreCountedAndTheRankIsNotWhole) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "lost.h5";
  JobMeta meta;
  meta.job_id = "lost";
  meta.world_size = 5;
  auto w = Hdf5Writer::Create(path, meta, WriterOptions{});
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<commprof_event> events(10, ev::Collective(COMMPROF_OP_BARRIER, 0, 10, 20));
  for (uint32_t rank : {0u, 1u, 2u}) {
    RankDescription d;
    d.rank = rank;
    d.world_size = 5;
    d.host = "h";
    ASSERT_TRUE(w.value()->OpenRank(d).ok());
    ASSERT_TRUE(w.value()->AppendEvents(rank, events).ok());
  }
  // rank 0: whole. rank 1: said bye, 3 batches (of 4096 + 4096 + 1000 events) never arrived and its
  // ring dropped 7. rank 2: no bye, 2 batches lost, events unknown. rank 3: never connected.
  ASSERT_TRUE(w.value()->CloseRank(0, RankEnd::kComplete, {{"events_shipped", 10}}, 0, "bye").ok());
  ASSERT_TRUE(
      w.value()
          ->CloseRank(1, RankEnd::kComplete, {{"events_shipped", 10 + 9192}, {"dropped_ring_full", 7}}, 3, "bye")
          .ok());
  ASSERT_TRUE(w.value()->CloseRank(2, RankEnd::kDisconnected, {}, 2, "connection closed").ok());
  ASSERT_TRUE(w.value()->Finalize().ok());
  {
    // rank 4's group was never written at all (a writer that died before finalizing, or a copy)
    h5::Handle f = OpenForEdit(path);
    ASSERT_TRUE(f.valid());
    ASSERT_GE(H5Ldelete(f.get(), "/ranks/4", H5P_DEFAULT), 0);
  }
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  ASSERT_EQ(info.ranks.size(), 4u);
  const RankInfo& r0 = info.ranks[0];
  EXPECT_TRUE(r0.whole());
  EXPECT_EQ(r0.events_lost, 0u);
  const RankInfo& r1 = info.ranks[1];
  EXPECT_EQ(r1.status, "complete");
  EXPECT_EQ(r1.batches_lost, 3u);
  EXPECT_EQ(r1.events_lost, 9192u);
  EXPECT_EQ(r1.dropped_events, 7u);
  EXPECT_EQ(r1.missing_events(), 9199u);
  EXPECT_FALSE(r1.whole()) << "complete, but with lost batches";
  const RankInfo& r2 = info.ranks[2];
  EXPECT_EQ(r2.batches_lost, 2u);
  EXPECT_FALSE(r2.events_lost.has_value()) << "no bye: its shipped count is unknown";
  EXPECT_FALSE(r2.whole());
  EXPECT_EQ(info.ranks[3].status, "missing");
  EXPECT_EQ(info.lost_batches(), 5u);
  EXPECT_EQ(info.missing_events(), 9199u);
  EXPECT_EQ(info.NeverConnected(), (RankRanges{{3, 4}}));
  EXPECT_EQ(FormatRankRanges({{3, 4}, {7, 7}}), "3-4,7");
}

TEST(ReaderFaults, NeverConnectedCostsTheGroupsNotTheWorldSize) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "world.h5";
  ASSERT_NE(WriteProfile(path, FourRanks()), nullptr);
  {
    h5::Handle f = OpenForEdit(path);
    ASSERT_TRUE(h5::WriteAttr(f.get(), "world_size", kMaxFileWorldSize));
  }
  {
    auto r = ProfileReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r.value()->info().NeverConnected(), (RankRanges{{4u, static_cast<uint32_t>(kMaxFileWorldSize - 1)}}));
  }
  {
    h5::Handle f = OpenForEdit(path);
    ASSERT_TRUE(h5::WriteAttr(f.get(), "world_size", kMaxFileWorldSize + 1));
  }
  auto bad = ProfileReader::Open(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), path +
                                        ": root attribute 'world_size' is 16777217, above the largest world size "
                                        "this build reads (16777216)");
}

// A writer that ran out of disk records "failed: ..." in /write_status (a scalar fixed-size string,
// rewritten in place); the reader hands it on, so info does not call such data intact.
TEST(ReaderFaults, TheWritersFailureRecordIsRead) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "failed.h5";
  ASSERT_NE(WriteProfile(path, FourRanks()), nullptr);
  {
    auto r = ProfileReader::Open(path);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value()->info().write_status, "complete") << "a clean finish records itself";
    EXPECT_FALSE(r.value()->info().write_failed());
  }
  const std::string text = "failed: No space left on device; 120 events not stored";
  {
    h5::Handle f = OpenForEdit(path);
    h5::Handle type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), 256);
    H5Tset_strpad(type.get(), H5T_STR_NULLTERM);
    h5::Handle space(H5Screate(H5S_SCALAR));
    // The writer made the dataset ("complete"); a failed writer rewrites it in place.
    h5::Handle d(
        H5Lexists(f.get(), "write_status", H5P_DEFAULT) > 0
            ? H5Dopen2(f.get(), "write_status", H5P_DEFAULT)
            : H5Dcreate2(f.get(), "write_status", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(d.valid());
    std::vector<char> buf(256, '\0');
    std::copy(text.begin(), text.end(), buf.begin());
    ASSERT_GE(H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), 0);
  }
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()->info().write_status, text);
  EXPECT_TRUE(r.value()->info().write_failed());
}

TEST(ReaderOpenErrors, TruncatedEmptyDirectoryForeignAndNewerFilesSayWhatIsWrong) {
  TempDir dir("commprof-rf");
  const std::string good = dir / "good.h5";
  ASSERT_NE(WriteProfile(good, FourRanks()), nullptr);
  const auto size = std::filesystem::file_size(good);
  const std::string cut = dir / "cut.h5";
  std::filesystem::copy_file(good, cut);
  std::filesystem::resize_file(cut, size / 2);
  auto r = ProfileReader::Open(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), cut + ": truncated: the file is shorter than it was written (" +
                                      std::to_string(size / 2) + " bytes of the " + std::to_string(size) +
                                      " its HDF5 superblock records); an incomplete copy or a full disk? A file "
                                      "whose writer was killed is not cut short and opens");

  const std::string empty = dir / "empty.h5";
  std::ofstream(empty).close();
  auto e = ProfileReader::Open(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), empty + ": empty file (0 bytes), not an HDF5 file");
  auto d = ProfileReader::Open(dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), dir.path() + ": is a directory, not a commprof file");
  auto m = ProfileReader::Open(dir / "none.h5");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), dir / "none.h5" + ": cannot open: No such file or directory");

  const std::string foreign = dir / "foreign.h5";
  {
    h5::Handle f(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
  }
  auto fo = ProfileReader::Open(foreign);
  ASSERT_FALSE(fo.ok());
  EXPECT_EQ(fo.status().message(), foreign + ": an HDF5 file, but not a commprof file (no root attribute 'format')");

  const std::string newer = dir / "newer.h5";
  std::filesystem::copy_file(good, newer);
  {
    h5::Handle f = OpenForEdit(newer);
    ASSERT_TRUE(h5::WriteAttr(f.get(), "format_version", uint64_t{2}));
  }
  auto n = ProfileReader::Open(newer);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().message(), newer +
                                      ": written by a newer commprof (format_version 2; this build reads 1): read it "
                                      "with that version or a later one");
}

TEST(ReaderOpenErrors, AFileLockedByAWriterIsNotCalledTruncated) {
  TempDir dir("commprof-rf");
  const std::string path = dir / "locked.h5";
  ASSERT_NE(WriteProfile(path, FourRanks()), nullptr);
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child plays a running writer: it holds the file open for writing until told to stop.
    h5::QuietErrors();
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    char c = f >= 0 ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(release[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto r = ProfileReader::Open(path);
  (void)!::write(release[1], &c, 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), path +
                                      ": locked: another process has it open for writing (a commprof run or "
                                      "aggregate still running?); read it once that process has finished");
  EXPECT_TRUE(ProfileReader::Open(path).ok()) << "readable once the writer is gone";
  for (int fd : {ready[0], ready[1], release[0], release[1]}) ::close(fd);
}

}  // namespace
}  // namespace commprof
