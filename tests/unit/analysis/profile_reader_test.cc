// A file written by the Hdf5Writer, read back by the analysis reader and, independently, by h5py
// and h5dump; plus a file whose writer was killed after a flush.
#include "analysis/load/profile_reader.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "aggregator/hdf5/hdf5_writer.h"
#include "core/schema/enums.h"
#include "support/test_support.h"

namespace commprof {
namespace {

namespace fs = std::filesystem;

using test_support::ExpectEventEq;
using test_support::ReadEvents;
using test_support::TempDir;

commprof_event Ev(uint64_t i, uint8_t kind) {
  commprof_event e{};
  e.start_ns = 1000000 + i * 1000;
  e.end_ns = e.start_ns + 100 + i;
  e.bytes = (i + 1) * 4096;
  e.comm_id = i == 0 ? COMMPROF_COMM_WORLD_ID : (uint64_t{1} << 32) | i;
  e.seq = 10 + i;
  e.correlation = static_cast<uint32_t>(900 + i);
  e.name_id = static_cast<uint32_t>(1 + i % 2);
  e.thread_id = static_cast<uint32_t>(i % 3);
  e.peer = i % 2 == 0 ? COMMPROF_NO_PEER : static_cast<int32_t>(i);
  e.device = i % 2 == 0 ? static_cast<uint16_t>(COMMPROF_HOST_DEVICE) : static_cast<uint16_t>(i);
  e.kind = kind;
  e.subtype = static_cast<uint8_t>(COMMPROF_OP_ALLREDUCE);
  e.datatype = COMMPROF_DT_FLOAT64;
  e.reduce_op = COMMPROF_RED_MAX;
  e.flags = static_cast<uint16_t>(i);
  return e;
}

RankDescription MakeHello(uint32_t rank, uint32_t world, uint32_t pid, const std::string& host) {
  RankDescription h;
  h.rank = rank;
  h.world_size = world;
  h.pid = pid;
  h.host = host;
  h.start_steady_ns = 5000 + rank;
  h.start_utc_ns = 6000 + rank;
  return h;
}

// Runs a shell command, returning its exit status and everything it printed.
std::pair<int, std::string> RunCommand(const std::string& cmd) {
  std::string out;
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The first Python interpreter that can import h5py ("" if none).
std::string PythonWithH5py() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    std::string cmd = std::string(py) + " -c 'import h5py' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

// rank 0: complete, with strings, events, a clock with samples and bye counters
// rank 1: open, never closed  -> "disconnected" at Finalize
// rank 2: never said hello    -> "missing"
class WrittenProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    path_ = dir_ / "job.h5";
    JobMeta meta;
    meta.job_id = "job-h5";
    meta.command_line = "mpirun -n 3 ./app --steps 10";
    meta.world_size = 3;
    meta.start_epoch_ns = 1700000000123456789ull;
    auto w = Hdf5Writer::Create(path_, meta, WriterOptions{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    Hdf5Writer& writer = *w.value();

    ASSERT_TRUE(writer.OpenRank(MakeHello(0, 3, 111, "node-a")).ok());
    ASSERT_TRUE(writer.OpenRank(MakeHello(1, 3, 222, "node-b")).ok());
    EXPECT_TRUE(writer.HasRank(0));
    EXPECT_FALSE(writer.HasRank(2));
    ASSERT_TRUE(writer.AppendStrings(0, StringBatch{0, {"<overflow>", "MPI_Allreduce"}}).ok());
    ASSERT_TRUE(writer.AppendStrings(0, StringBatch{2, {"step"}}).ok());
    ASSERT_TRUE(writer.AppendStrings(1, StringBatch{0, {"<overflow>", "MPI_Send", "MPI_Recv"}}).ok());
    rank0_ = {Ev(0, COMMPROF_KIND_MPI_COLLECTIVE), Ev(1, COMMPROF_KIND_MPI_P2P), Ev(2, COMMPROF_KIND_STEP)};
    rank1_ = {Ev(7, COMMPROF_KIND_MPI_WAIT), Ev(8, COMMPROF_KIND_NCCL_COLLECTIVE)};
    ASSERT_TRUE(writer.AppendEvents(0, std::span(rank0_).first(2)).ok());
    ASSERT_TRUE(writer.AppendEvents(0, std::span(rank0_).subspan(2)).ok());
    ASSERT_TRUE(writer.AppendEvents(1, rank1_).ok());
    RankClock clock;
    clock.offset_ns = -250;
    clock.drift_ppm = 0.5;
    clock.error_bound_ns = 40;
    clock.anchor_local_ns = 5000;
    clock.method = "mpi-pingpong";
    clock.samples = {{1, 2, 3}, {10, 20, 30}};
    ASSERT_TRUE(writer.SetClock(0, clock).ok());
    ASSERT_TRUE(writer
                    .CloseRank(0, RankEnd::kComplete,
                               {{"events_recorded", 3},
                                {"dropped_ring_full", 4},
                                {"dropped_strings", 1},
                                {"events_shipped", 3},
                                {"batches_sent", 2},
                                {"spooled", 0}},
                               1, "bye")
                    .ok());
    Status fin = writer.Finalize();
    ASSERT_TRUE(fin.ok()) << fin.message();
    EXPECT_TRUE(writer.Finalize().ok()) << "Finalize is idempotent";
  }

  std::unique_ptr<ProfileReader> Open() {
    auto r = ProfileReader::Open(path_);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r.value()) : nullptr;
  }

  TempDir dir_{"commprof-rd"};
  std::string path_;
  std::vector<commprof_event> rank0_, rank1_;
};

TEST_F(WrittenProfile, RootAttributesReadBack) {
  auto r = Open();
  ASSERT_NE(r, nullptr);
  const ProfileInfo& info = r->info();
  EXPECT_EQ(info.path, path_);
  EXPECT_EQ(info.format, "commprof");
  EXPECT_EQ(info.format_version, 1u);
  EXPECT_EQ(info.job_id, "job-h5");
  EXPECT_EQ(info.command_line, "mpirun -n 3 ./app --steps 10");
  EXPECT_EQ(info.world_size, 3u);
  EXPECT_EQ(info.start_epoch_ns, 1700000000123456789ull);
  EXPECT_TRUE(info.finalized);
  ASSERT_EQ(info.ranks.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(info.ranks[i].rank, i);
}

TEST_F(WrittenProfile, CompleteRankAttributesAndCountersReadBack) {
  auto r = Open();
  ASSERT_NE(r, nullptr);
  const RankInfo& k = r->info().ranks.at(0);
  EXPECT_EQ(k.host, "node-a");
  EXPECT_EQ(k.pid, 111u);
  EXPECT_EQ(k.status, "complete");
  EXPECT_EQ(k.end_reason, "bye");
  EXPECT_EQ(k.event_count, 3u);
  EXPECT_EQ(k.clock_offset_ns, -250);
  EXPECT_EQ(k.clock_drift_ppm, 0.5);
  EXPECT_EQ(k.clock_error_bound_ns, 40);
  EXPECT_EQ(k.clock_method, "mpi-pingpong");
  std::map<std::string, uint64_t> want = {{"events_recorded", 3}, {"dropped_ring_full", 4}, {"dropped_strings", 1},
                                          {"events_shipped", 3},  {"batches_sent", 2},      {"spooled", 0},
                                          {"dropped_events", 5},  {"batches_lost", 1},      {"events_written", 3}};
  EXPECT_EQ(k.counters, want);
  EXPECT_EQ(k.dropped_events, 5u);
}

TEST_F(WrittenProfile, UnclosedRankIsDisconnectedAndAbsentRankIsMissing) {
  auto r = Open();
  ASSERT_NE(r, nullptr);
  const RankInfo& open = r->info().ranks.at(1);
  EXPECT_EQ(open.status, "disconnected");
  EXPECT_EQ(open.end_reason, "no bye before the aggregator finished");
  EXPECT_EQ(open.host, "node-b");
  EXPECT_EQ(open.pid, 222u);
  EXPECT_EQ(open.event_count, 2u);
  EXPECT_EQ(open.counters.at("events_written"), 2u);
  EXPECT_EQ(open.clock_method, "none");
  EXPECT_EQ(open.clock_error_bound_ns, -1);
  const RankInfo& missing = r->info().ranks.at(2);
  EXPECT_EQ(missing.status, "missing");
  EXPECT_EQ(missing.event_count, 0u);
  EXPECT_EQ(missing.host, "");
  EXPECT_TRUE(ReadEvents(*r, 2).empty());
  auto s = r->Strings(2);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s.value().empty());
}

TEST_F(WrittenProfile, EventFieldsAndStringsReadBackExactly) {
  auto r = Open();
  ASSERT_NE(r, nullptr);
  auto e0 = ReadEvents(*r, 0);
  ASSERT_EQ(e0.size(), rank0_.size());
  for (size_t i = 0; i < e0.size(); ++i) ExpectEventEq(e0[i], rank0_[i], i);
  auto e1 = ReadEvents(*r, 1);
  ASSERT_EQ(e1.size(), rank1_.size());
  for (size_t i = 0; i < e1.size(); ++i) ExpectEventEq(e1[i], rank1_[i], i);
  auto s0 = r->Strings(0);
  ASSERT_TRUE(s0.ok());
  EXPECT_EQ(s0.value(), (std::vector<std::string>{"<overflow>", "MPI_Allreduce", "step"}));
  auto s1 = r->Strings(1);
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1.value(), (std::vector<std::string>{"<overflow>", "MPI_Send", "MPI_Recv"}));
  // a rank number not in the file at all
  EXPECT_TRUE(ReadEvents(*r, 99).empty());
}

TEST_F(WrittenProfile, ClockSamplesAreStoredAsAnNBy3Table) {
  h5::Handle f(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_TRUE(f.valid());
  h5::Handle d(H5Dopen2(f.get(), "/ranks/0/clock_samples", H5P_DEFAULT));
  ASSERT_TRUE(d.valid());
  h5::Handle space(H5Dget_space(d.get()));
  hsize_t dims[2] = {0, 0};
  ASSERT_EQ(H5Sget_simple_extent_ndims(space.get()), 2);
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  EXPECT_EQ(dims[0], 2u);
  EXPECT_EQ(dims[1], 3u);
  uint64_t v[6] = {};
  ASSERT_GE(H5Dread(d.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v), 0);
  EXPECT_EQ(std::vector<uint64_t>(v, v + 6), (std::vector<uint64_t>{1, 2, 3, 10, 20, 30}));
  EXPECT_EQ(h5::ReadIntAttr(f.get(), "world_size").value_or(0), 3);
  h5::Handle g(H5Gopen2(f.get(), "/ranks/0", H5P_DEFAULT));
  EXPECT_EQ(h5::ReadIntAttr(g.get(), "clock_anchor_local_ns").value_or(0), 5000);
  EXPECT_EQ(h5::ReadIntAttr(g.get(), "start_steady_ns").value_or(0), 5000);
  EXPECT_EQ(h5::ReadIntAttr(g.get(), "start_utc_ns").value_or(0), 6000);
  EXPECT_EQ(h5::ReadStringAttr(f.get(), "ranks_missing").value_or("?"), "2");
  EXPECT_FALSE(h5::ReadStringAttr(f.get(), "no_such_attr").has_value());
}

TEST_F(WrittenProfile, H5pyReadsTheSameEventsAndAttributes) {
  std::string py = PythonWithH5py();
  if (py.empty()) GTEST_SKIP() << "no python3 with h5py (python3 -c 'import h5py' fails)";
  std::string script = dir_ / "check.py";
  {
    std::ofstream s(script);
    s << "import sys, h5py\n"
         "f = h5py.File(sys.argv[1], 'r')\n"
         "e = f['ranks/0/events']\n"
         "a = f.attrs['job_id']\n"
         "a = a.decode() if isinstance(a, bytes) else a\n"
         "st = f['ranks/2'].attrs['status']\n"
         "st = st.decode() if isinstance(st, bytes) else st\n"
         "print('n=%d seq1=%d bytes2=%d peer1=%d kind0=%d job=%s r1=%d rank2=%s' % (len(e), e['seq'][1], "
         "e['bytes'][2], e['peer'][1], e['kind'][0], a, len(f['ranks/1/events']), st))\n";
  }
  auto [rc, out] = RunCommand(py + " " + script + " " + path_);
  ASSERT_EQ(rc, 0) << out;
  std::string want = "n=3 seq1=" + std::to_string(rank0_[1].seq) + " bytes2=" + std::to_string(rank0_[2].bytes) +
                     " peer1=" + std::to_string(rank0_[1].peer) + " kind0=" + std::to_string(rank0_[0].kind) +
                     " job=job-h5 r1=2 rank2=missing";
  EXPECT_NE(out.find(want), std::string::npos) << "h5py printed: " << out << "\nwanted: " << want;
}

TEST_F(WrittenProfile, H5dumpShowsTheAttributes) {
  if (RunCommand("h5dump --version").first != 0) GTEST_SKIP() << "h5dump (hdf5-tools) is not installed";
  auto [rc, out] = RunCommand("h5dump -A " + path_);
  ASSERT_EQ(rc, 0) << out;
  for (const char* s : {"ATTRIBUTE \"job_id\"", "\"job-h5\"", "\"complete\"", "\"disconnected\"", "\"missing\"",
                        "ATTRIBUTE \"dropped_events\"", "\"mpirun -n 3 ./app --steps 10\""}) {
    EXPECT_NE(out.find(s), std::string::npos) << "h5dump -A lacks " << s;
  }
  auto [rc2, events] = RunCommand("h5dump -H -d /ranks/1/events " + path_);
  ASSERT_EQ(rc2, 0) << events;
  EXPECT_NE(events.find("DATASPACE  SIMPLE { ( 2 ) / ( H5S_UNLIMITED ) }"), std::string::npos) << events;
}

TEST(ProfileReaderRecovery, FlushedButNeverFinalizedFileOpensWithItsEvents) {
  TempDir dir("commprof-rd");
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir / "killed.h5";
  std::vector<commprof_event> events;
  for (uint64_t i = 0; i < 10; ++i) events.push_back(Ev(i, COMMPROF_KIND_MPI_COLLECTIVE));
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child plays an aggregator killed mid-job: it flushes, then dies without Finalize.
    JobMeta meta;
    meta.job_id = "killed-job";
    meta.world_size = 2;
    auto w = Hdf5Writer::Create(path, meta, WriterOptions{});
    if (!w.ok()) ::_exit(2);
    if (!w.value()->OpenRank(MakeHello(0, 2, 333, "node-k")).ok()) ::_exit(3);
    if (!w.value()->AppendStrings(0, StringBatch{0, {"<overflow>", "x"}}).ok()) ::_exit(4);
    if (!w.value()->AppendEvents(0, events).ok()) ::_exit(5);
    if (!w.value()->Flush().ok()) ::_exit(6);
    ::raise(SIGKILL);
    ::_exit(7);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);

  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  EXPECT_FALSE(info.finalized);
  EXPECT_EQ(info.job_id, "killed-job");
  EXPECT_EQ(info.world_size, 2u);
  ASSERT_EQ(info.ranks.size(), 1u) << "Finalize never ran, so no 'missing' groups were added";
  EXPECT_EQ(info.ranks[0].status, "connected");
  EXPECT_EQ(info.ranks[0].event_count, events.size());
  auto got = ReadEvents(*r.value(), 0);
  ASSERT_EQ(got.size(), events.size());
  for (size_t i = 0; i < got.size(); ++i) ExpectEventEq(got[i], events[i], i);
  auto s = r.value()->Strings(0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value(), (std::vector<std::string>{"<overflow>", "x"}));
}

TEST(ProfileReaderErrors, MissingFileIsNotAnHdf5File) {
  auto r = ProfileReader::Open("/nonexistent/dir/none.h5");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/none.h5"), std::string::npos);
}

TEST(ProfileReaderErrors, TextFileIsNotAnHdf5File) {
  TempDir dir("commprof-rd");
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir / "notes.h5";
  std::ofstream(path) << "this is not HDF5\n";
  auto r = ProfileReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not an HDF5 file"), std::string::npos) << r.status().message();
}

TEST(ProfileReaderErrors, ForeignOrNewerHdf5FilesAreRejectedByFormatAttributes) {
  TempDir dir("commprof-rd");
  ASSERT_FALSE(dir.path().empty());
  h5::QuietErrors();
  std::string foreign = dir / "foreign.h5";
  {
    h5::Handle f(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    ASSERT_TRUE(h5::WriteAttr(f.get(), "format", std::string("netcdf")));
  }
  auto r1 = ProfileReader::Open(foreign);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("not a commprof file"), std::string::npos) << r1.status().message();

  std::string newer = dir / "newer.h5";
  {
    h5::Handle f(H5Fcreate(newer.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    ASSERT_TRUE(h5::WriteAttr(f.get(), "format", std::string("commprof")));
    ASSERT_TRUE(h5::WriteAttr(f.get(), "format_version", uint64_t{2}));
  }
  auto r2 = ProfileReader::Open(newer);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("format_version 2"), std::string::npos) << r2.status().message();

  std::string no_ranks = dir / "noranks.h5";
  {
    h5::Handle f(H5Fcreate(no_ranks.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    ASSERT_TRUE(h5::WriteAttr(f.get(), "format", std::string("commprof")));
    ASSERT_TRUE(h5::WriteAttr(f.get(), "format_version", uint64_t{1}));
  }
  // Without world_size (every writer gives it): damaged, named, not a job of 0 ranks.
  auto r4 = ProfileReader::Open(no_ranks);
  ASSERT_FALSE(r4.ok());
  EXPECT_EQ(r4.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r4.status().message().find("root attribute 'world_size' is missing or cannot be read"), std::string::npos)
      << r4.status().message();
  {
    h5::Handle f(H5Fopen(no_ranks.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    ASSERT_TRUE(h5::WriteAttr(f.get(), "world_size", uint64_t{2}));
    ASSERT_TRUE(h5::WriteAttr(f.get(), "finalized", uint64_t{1}));
  }
  auto r3 = ProfileReader::Open(no_ranks);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r3.status().message().find("/ranks"), std::string::npos) << r3.status().message();
}

TEST(ProfileReaderKinds, KindNamesCoverEveryKindAndRejectOthers) {
  EXPECT_STREQ(schema::KindName(COMMPROF_KIND_MPI_INIT), "mpi_init");
  EXPECT_STREQ(schema::KindName(COMMPROF_KIND_MPI_COLLECTIVE), "mpi_collective");
  EXPECT_STREQ(schema::KindName(COMMPROF_KIND_USER_MARK), "user_mark");
  EXPECT_STREQ(schema::KindName(COMMPROF_KIND_SYNC), "sync");
  EXPECT_STREQ(schema::KindName(COMMPROF_KIND_NONE), "unknown");
  EXPECT_STREQ(schema::KindName(COMMPROF_KIND_COUNT_), "unknown");
  for (int k = COMMPROF_KIND_MPI_INIT; k < COMMPROF_KIND_COUNT_; ++k) {
    EXPECT_STRNE(schema::KindName(static_cast<uint8_t>(k)), "unknown") << k;
  }
}

// The drift's uncertainty: the first and last points' half round trips over their distance.
TEST(RankInfoDrift, UncertaintyIsTheEndPointsHalfRoundTripsOverTheirSpan) {
  RankInfo r;
  EXPECT_FALSE(r.clock_drift_uncertainty_ppm().has_value()) << "no point";
  r.clock_points = {{1'000'000, 5, 2'000}};
  EXPECT_FALSE(r.clock_drift_uncertainty_ppm().has_value()) << "one point";
  // 2 us + 3 us over 5 ms: 1000 ppm, whatever lies between
  r.clock_points = {{1'000'000, 5, 2'000}, {3'000'000, 7, 100'000}, {6'000'000, 9, 3'000}};
  ASSERT_TRUE(r.clock_drift_uncertainty_ppm().has_value());
  EXPECT_DOUBLE_EQ(*r.clock_drift_uncertainty_ppm(), 1000.0);
  // ranks of one host: exact points, no uncertainty
  r.clock_points = {{0, 0, 0}, {2'000'000'000, 0, 0}};
  EXPECT_DOUBLE_EQ(*r.clock_drift_uncertainty_ppm(), 0.0);
}

}  // namespace
}  // namespace commprof
