// The writer under faults and at the extremes (issue 16): a write that fails (simulated here with
// RLIMIT_FSIZE, which fails writes past a size with EFBIG exactly as a full disk fails them with
// ENOSPC; tests/e2e/output_faults.py fills a real tmpfs), a hello claiming a huge world, and the
// disk a rank costs when it records little.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstring>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "analysis/load/profile_reader.h"
#include "core/h5/h5_util.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::ReadEvents;
using test_support::TempDir;

RankDescription Hello(uint32_t rank, uint32_t world) {
  RankDescription h;
  h.rank = rank;
  h.world_size = world;
  h.pid = 100 + rank;
  h.host = "host" + std::to_string(rank % 8);
  return h;
}

std::vector<commprof_event> Events(size_t n, uint64_t first_seq) {
  std::vector<commprof_event> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i].kind = COMMPROF_KIND_MPI_COLLECTIVE;
    v[i].seq = first_seq + i;
    v[i].start_ns = 1000 + 10 * (first_seq + i);
    v[i].end_ns = v[i].start_ns + 5;
    v[i].bytes = 8 * (first_seq + i);
  }
  return v;
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The root `write_status` string, read with HDF5 directly (the readers' view is theirs).
std::string ReadWriteStatus(const std::string& path) {
  h5::QuietErrors();
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) {
    return "<cannot open>";
  }
  h5::Handle d(H5Dopen2(f.get(), schema::kWriteStatusDataset, H5P_DEFAULT));
  if (!d.valid()) {
    return "<no dataset>";
  }
  h5::Handle type(H5Dget_type(d.get()));
  std::vector<char> buf(H5Tget_size(type.get()) + 1, '\0');
  if (H5Dread(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) {
    return "<cannot read>";
  }
  return buf.data();
}

// Writes past `limit` bytes fail with EFBIG (SIGXFSZ ignored) until the guard goes.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t limit) {
    ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit lim = saved_;
    lim.rlim_cur = limit;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &lim) == 0;
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &saved_); }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

TEST(WriterFaults, AFailedWriteStopsTheWriterCountsWhatIsLostAndKeepsWhatWasFlushed) {
  TempDir dir("commprof-wf");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir / "full.h5";
  constexpr size_t kFlushed = 1000;
  constexpr size_t kLost = 50000;  // 3.2 MB: cannot fit under the limit
  auto created = Hdf5Writer::Create(path, JobMeta{"job-x", "prog", 0, 0}, WriterOptions{});
  ASSERT_TRUE(created.ok()) << created.status().message();
  Hdf5Writer& w = *created.value();
  ASSERT_TRUE(w.OpenRank(Hello(0, 2)).ok());
  ASSERT_TRUE(w.AppendStrings(0, StringBatch{0, {"MPI_Allreduce"}}).ok());
  ASSERT_TRUE(w.AppendEvents(0, Events(kFlushed, 0)).ok());
  ASSERT_TRUE(w.Flush().ok());
  EXPECT_FALSE(w.failed());
  EXPECT_EQ(w.events_not_stored(), 0u);
  {
    FileSizeLimit limit(FileSize(path) + 4096);
    ASSERT_TRUE(limit.ok());
    Status st = w.AppendEvents(0, Events(kLost, kFlushed));
    if (st.ok()) {
      st = w.Flush();  // the chunks may wait in HDF5's cache until a flush writes them
    }
    ASSERT_FALSE(st.ok()) << "a write past the limit must fail";
    EXPECT_EQ(st.code(), StatusCode::kIoError);
    EXPECT_EQ(st.message(), "writing " + path + " failed: " + std::strerror(EFBIG)) << st.message();
    EXPECT_TRUE(w.failed());
    // Failed: every later call gives the same error and stores nothing, events are counted.
    Status again = w.AppendEvents(0, Events(7, kFlushed + kLost));
    EXPECT_EQ(again.message(), st.message());
    EXPECT_EQ(w.OpenRank(Hello(1, 2)).message(), st.message());
    EXPECT_EQ(w.Flush().message(), st.message());
    EXPECT_EQ(w.CloseRank(0, RankEnd::kComplete, {}, 0, "bye").message(), st.message());
    EXPECT_EQ(w.events_not_stored(), kLost + 7);
    EXPECT_EQ(w.events_stored(), kFlushed);
    // Finalize closes every handle (nothing is left for HDF5's exit handler) and says why.
    EXPECT_EQ(w.Finalize().message(), st.message());
  }
  EXPECT_EQ(ReadWriteStatus(path),
            std::string("failed: ") + std::strerror(EFBIG) + "; " + std::to_string(kLost + 7) + " events not stored");
  // What the last flush stored is there, exactly: no rows of zeros.
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r.value()->info().finalized);
  ASSERT_EQ(r.value()->info().ranks.size(), 1u);
  auto got = ReadEvents(*r.value(), 0);
  ASSERT_EQ(got.size(), kFlushed);
  auto want = Events(kFlushed, 0);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), kFlushed * sizeof(commprof_event)), 0);
}

TEST(WriterFaults, ACleanFinishSaysCompleteAndACreateThatCannotWriteNamesTheReason) {
  TempDir dir("commprof-wf");
  ASSERT_FALSE(dir.path().empty());
  {
    auto w = Hdf5Writer::Create(dir / "ok.h5", JobMeta{}, WriterOptions{});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  EXPECT_EQ(ReadWriteStatus(dir / "ok.h5"), "complete");
  {
    FileSizeLimit limit(0);  // nothing at all can be written
    ASSERT_TRUE(limit.ok());
    auto w = Hdf5Writer::Create(dir / "none.h5", JobMeta{}, WriterOptions{});
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().message(), "writing " + (dir / "none.h5") + " failed: " + std::strerror(EFBIG));
  }
}

TEST(WriterFaults, AHelloClaimingAMillionRanksCostsOnlyTheRanksPresent) {
  TempDir dir("commprof-wf");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir / "huge.h5";
  {
    auto w = Hdf5Writer::Create(path, JobMeta{}, WriterOptions{});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(0, 4)).ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(5, 1000000)).ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(4000000000u, 8)).ok());  // a rank beyond every world size
    ASSERT_TRUE(w.value()->AppendEvents(5, Events(3, 0)).ok());
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  h5::QuietErrors();
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_TRUE(f.valid());
  EXPECT_EQ(h5::ReadIntAttr(f.get(), "world_size").value_or(-1), 1000000);
  EXPECT_EQ(h5::ReadStringAttr(f.get(), "ranks_missing").value_or("?"), "1-4,6-999999");
  h5::Handle ranks(H5Gopen2(f.get(), schema::kRanksGroup, H5P_DEFAULT));
  H5G_info_t gi{};
  ASSERT_GE(H5Gget_info(ranks.get(), &gi), 0);
  EXPECT_EQ(gi.nlinks, 3u) << "only the ranks present have groups: 999998 missing ones are listed, not created";
  EXPECT_GT(H5Lexists(ranks.get(), "4000000000", H5P_DEFAULT), 0);
  EXPECT_LT(FileSize(path), 200u * 1024) << "no per-rank storage for ranks that are not there";
}

TEST(WriterFaults, AFewMissingRanksStillGetGroupsAndRangesListThem) {
  TempDir dir("commprof-wf");
  ASSERT_FALSE(dir.path().empty());
  {
    auto w = Hdf5Writer::Create(dir / "m.h5", JobMeta{}, WriterOptions{});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(0, 9)).ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(5, 9)).ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(7, 9)).ok());
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  auto r = ProfileReader::Open(dir / "m.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  EXPECT_EQ(info.world_size, 9u);
  ASSERT_EQ(info.ranks.size(), 9u);
  for (uint32_t i : {1u, 2u, 3u, 4u, 6u, 8u}) EXPECT_EQ(info.ranks[i].status, "missing") << i;
  h5::Handle f(H5Fopen((dir / "m.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_EQ(h5::ReadStringAttr(f.get(), "ranks_missing").value_or("?"), "1-4,6,8");
}

// Issue 16 item 11: the disk a rank costs is what it recorded, not a 1 MiB chunk.
TEST(WriterFaults, OneHundredTwentyEightRanksOf55EventsTakeUnder5MB) {
  TempDir dir("commprof-wf");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir / "small.h5";
  constexpr uint32_t kRanks = 128;
  constexpr size_t kEvents = 55;
  {
    auto w = Hdf5Writer::Create(path, JobMeta{"j", "mpirun -np 128 ./app", kRanks, 0}, WriterOptions{});
    ASSERT_TRUE(w.ok());
    for (uint32_t r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(w.value()->OpenRank(Hello(r, kRanks)).ok());
      ASSERT_TRUE(w.value()->AppendStrings(r, StringBatch{0, {"MPI_Init", "MPI_Allreduce", "MPI_Finalize"}}).ok());
      // Three frames, as a rank ships them, and a clock model with its samples.
      ASSERT_TRUE(w.value()->AppendEvents(r, Events(20, 0)).ok());
      ASSERT_TRUE(w.value()->AppendEvents(r, Events(30, 20)).ok());
      ASSERT_TRUE(w.value()->AppendEvents(r, Events(5, 50)).ok());
      RankClock c;
      c.method = "mpi";
      c.points = {ClockPoint{1, 2, 3}, ClockPoint{4, 5, 6}};
      c.samples.assign(64, ClockSample{1, 2, 3});
      ASSERT_TRUE(w.value()->SetClock(r, c).ok());
      ASSERT_TRUE(w.value()->CloseRank(r, RankEnd::kComplete, {{"events_recorded", kEvents}}, 0, "bye").ok());
    }
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  const uint64_t size = FileSize(path);
  EXPECT_LT(size, 5'000'000u) << "128 ranks x 55 events";
  std::printf("128 ranks x 55 events: %llu bytes (%.1f KB per rank)\n", static_cast<unsigned long long>(size),
              static_cast<double>(size) / kRanks / 1000.0);
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r.value()->info().ranks.size(), kRanks);
  auto want = Events(kEvents, 0);
  for (uint32_t rank : {0u, 77u, 127u}) {
    auto got = ReadEvents(*r.value(), rank);
    ASSERT_EQ(got.size(), kEvents) << rank;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), kEvents * sizeof(commprof_event)), 0) << rank;
  }
}

}  // namespace
}  // namespace commprof
