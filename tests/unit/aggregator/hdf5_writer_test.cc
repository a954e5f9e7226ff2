// The HDF5 writer's own rules: what it refuses, and what it stores for large and compressed tables.
#include "aggregator/hdf5/hdf5_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "analysis/load/profile_reader.h"
#include "core/h5/byte_shuffle.h"
#include "core/h5/h5_util.h"
#include "core/h5/lz4_filter.h"
#include "support/test_support.h"

namespace commprof {
namespace {

namespace fs = std::filesystem;

using test_support::ReadEvents;
using test_support::TempDir;

RankDescription Hello(uint32_t rank, uint32_t world) {
  RankDescription h;
  h.rank = rank;
  h.world_size = world;
  h.pid = 10 + rank;
  h.host = "h" + std::to_string(rank);
  return h;
}

std::vector<commprof_event> Events(size_t n, uint64_t first_seq) {
  std::vector<commprof_event> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i].kind = COMMPROF_KIND_COMPUTE_KERNEL;
    v[i].seq = first_seq + i;
    v[i].start_ns = 3 * (first_seq + i);
    v[i].end_ns = 3 * (first_seq + i) + 2;
    v[i].device = static_cast<uint16_t>((first_seq + i) % 8);
    v[i].bytes = (first_seq + i) % 1000;
  }
  return v;
}

TEST(Hdf5Writer, CreateInAMissingDirectoryFailsNamingThePath) {
  auto w = Hdf5Writer::Create("/nonexistent-commprof-dir/out.h5", JobMeta{}, WriterOptions{});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kIoError);
  EXPECT_NE(w.status().message().find("/nonexistent-commprof-dir/out.h5"), std::string::npos);
}

TEST(Hdf5Writer, OpeningARankTwiceIsRejected) {
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  auto w = Hdf5Writer::Create(dir / "a.h5", JobMeta{}, WriterOptions{});
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE(w.value()->OpenRank(Hello(0, 1)).ok());
  Status st = w.value()->OpenRank(Hello(0, 1));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rank 0 is already in"), std::string::npos) << st.message();
}

TEST(Hdf5Writer, StringTableMustContinueWhereItEnded) {
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  auto w = Hdf5Writer::Create(dir / "a.h5", JobMeta{}, WriterOptions{});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w.value()->OpenRank(Hello(0, 1)).ok());
  ASSERT_TRUE(w.value()->AppendStrings(0, StringBatch{0, {"a", "b"}}).ok());
  Status gap = w.value()->AppendStrings(0, StringBatch{3, {"d"}});
  EXPECT_EQ(gap.code(), StatusCode::kCorrupt);
  EXPECT_NE(gap.message().find("continues at id 3 but 2 ids are known"), std::string::npos) << gap.message();
  Status again = w.value()->AppendStrings(0, StringBatch{0, {"a"}});
  EXPECT_EQ(again.code(), StatusCode::kCorrupt);
  EXPECT_TRUE(w.value()->AppendStrings(0, StringBatch{2, {"c"}}).ok());
  ASSERT_TRUE(w.value()->Finalize().ok());
  auto r = ProfileReader::Open(dir / "a.h5");
  ASSERT_TRUE(r.ok());
  auto s = r.value()->Strings(0);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Hdf5Writer, FramesForAnUnknownRankAreInternalErrors) {
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  auto w = Hdf5Writer::Create(dir / "a.h5", JobMeta{}, WriterOptions{});
  ASSERT_TRUE(w.ok());
  auto ev = Events(1, 0);
  EXPECT_EQ(w.value()->AppendEvents(4, ev).code(), StatusCode::kInternal);
  EXPECT_EQ(w.value()->AppendStrings(4, StringBatch{0, {"x"}}).code(), StatusCode::kInternal);
  EXPECT_EQ(w.value()->SetClock(4, RankClock{}).code(), StatusCode::kInternal);
  EXPECT_EQ(w.value()->CloseRank(4, RankEnd::kComplete, {}, 0, "").code(), StatusCode::kInternal);
}

TEST(Hdf5Writer, EventsSpanningManyChunksReadBackInOrder) {
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  constexpr size_t kTotal = 70001;  // many writer chunks (256 records) and > one reader chunk (65536)
  {
    auto w = Hdf5Writer::Create(dir / "big.h5", JobMeta{}, WriterOptions{});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(0, 1)).ok());
    size_t written = 0;
    for (size_t batch : {size_t{1}, size_t{4095}, size_t{30000}, size_t{0}, size_t{35905}}) {
      auto ev = Events(batch, written);
      ASSERT_TRUE(w.value()->AppendEvents(0, ev).ok());
      written += batch;
    }
    ASSERT_EQ(written, kTotal);
    ASSERT_TRUE(w.value()->CloseRank(0, RankEnd::kComplete, {}, 0, "bye").ok());
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  auto r = ProfileReader::Open(dir / "big.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()->info().ranks.at(0).event_count, kTotal);
  EXPECT_EQ(r.value()->info().ranks.at(0).counters.at("events_written"), kTotal);
  size_t chunks = 0;
  auto got = ReadEvents(*r.value(), 0, &chunks);
  EXPECT_EQ(chunks, 2u);
  ASSERT_EQ(got.size(), kTotal);
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].seq != i || got[i].start_ns != 3 * i || got[i].device != i % 8 || got[i].bytes != i % 1000) ++bad;
  }
  EXPECT_EQ(bad, 0u);
}

// The filters an events table was created with, in pipeline order.
std::vector<int> EventFilters(const fs::path& path, uint32_t rank) {
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  h5::Handle d(H5Dopen2(f.get(), ("/ranks/" + std::to_string(rank) + "/events").c_str(), H5P_DEFAULT));
  h5::Handle dcpl(H5Dget_create_plist(d.get()));
  std::vector<int> ids;
  for (int i = 0; i < H5Pget_nfilters(dcpl.get()); ++i) {
    unsigned flags = 0;
    size_t n = 0;
    ids.push_back(H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &n, nullptr, 0, nullptr, nullptr));
  }
  return ids;
}

TEST(Hdf5Writer, EveryCodecReadsBackTheSameEventsAndLz4IsTheDefault) {
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  auto ev = Events(5000, 100);
  struct Case {
    const char* codec;
    std::vector<int> filters;
  };
  const Case cases[] = {{"none", {}},
                        {"lz4", {H5Z_FILTER_SHUFFLE, h5::kLz4FilterId}},
                        {"deflate:4", {H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}}};
  std::map<std::string, uintmax_t> sizes;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.codec);
    auto opt = ParseCompression(c.codec);
    ASSERT_TRUE(opt.has_value());
    fs::path path = dir / (std::string(c.codec).substr(0, 4) + ".h5");
    {
      auto w = Hdf5Writer::Create(path, JobMeta{}, *opt);
      ASSERT_TRUE(w.ok());
      ASSERT_TRUE(w.value()->OpenRank(Hello(0, 1)).ok());
      // Several appends, so chunks are written partly filled and rewritten.
      for (size_t at = 0; at < ev.size(); at += 700) {
        size_t n = std::min<size_t>(700, ev.size() - at);
        ASSERT_TRUE(w.value()->AppendEvents(0, std::span(ev).subspan(at, n)).ok());
        ASSERT_TRUE(w.value()->Flush().ok());
      }
      ASSERT_TRUE(w.value()->Finalize().ok());
    }
    EXPECT_EQ(EventFilters(path, 0), c.filters);
    auto r = ProfileReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto got = ReadEvents(*r.value(), 0);
    ASSERT_EQ(got.size(), ev.size());
    EXPECT_EQ(std::memcmp(got.data(), ev.data(), ev.size() * sizeof(commprof_event)), 0);
    sizes[c.codec] = fs::file_size(path);
  }
  // 5000 64-byte records: 320 kB plain; these regular ones shrink to well under a quarter.
  EXPECT_GT(sizes["none"], 5000u * 64u);
  EXPECT_LT(sizes["lz4"] * 4, sizes["none"]);
  EXPECT_LT(sizes["deflate:4"] * 4, sizes["none"]);
  EXPECT_EQ(WriterOptions{}.compression, Compression::kLz4);
}

TEST(Hdf5Writer, TheShuffleIsHdf5sForAnyRecordCountAndSizeOnEveryInstructionPath) {
  // Byte j of record i goes to out[j * n + i], HDF5's shuffle filter; the fast paths (16 and 8
  // records at a time, with the widest vectors the processor has or narrower ones) and the tail
  // must all agree with it. Sizes that are multiples of 64 take AVX-512, of 32 AVX2, of 16 SSE2.
  int paths_run = 0;
  for (h5::ShufflePath path :
       {h5::ShufflePath::kAvx512, h5::ShufflePath::kAvx2, h5::ShufflePath::kSse2, h5::ShufflePath::kPortable}) {
    if (!h5::ShufflePathAvailable(path)) {
      continue;
    }
    ++paths_run;
    for (size_t size : {64, 128, 96, 32, 48, 24, 12, 5}) {
      for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 1023, 1024}) {
        std::vector<uint8_t> in(n * size);
        for (size_t k = 0; k < in.size(); ++k) {
          in[k] = static_cast<uint8_t>(k * 131 + k / 7);
        }
        std::vector<uint8_t> out(in.size(), 0xEE);
        h5::ShuffleRecordsUsing(path, in, size, out.data());
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i) {
          for (size_t j = 0; j < size; ++j) {
            wrong += out[j * n + i] != in[i * size + j];
          }
        }
        EXPECT_EQ(wrong, 0u) << n << " records of " << size << " bytes, path " << static_cast<int>(path);
        std::vector<uint8_t> back(in.size(), 0xEE);
        h5::ShuffleRecordsUsing(path, out, n, back.data());  // the planes are n records of `size` bytes
        EXPECT_EQ(back, in) << "unshuffled " << n << " records of " << size << " bytes, path "
                            << static_cast<int>(path);
        std::vector<uint8_t> best(in.size(), 0xEE);
        h5::ShuffleRecords(in, size, best.data());
        EXPECT_EQ(best, out) << "the default path, " << n << " records of " << size << " bytes";
      }
    }
  }
  EXPECT_GE(paths_run, 1);  // the portable one at least
}

// Makes the LZ4 chunk of /ranks/RANK/events that holds `row` undecodable: its first block claims
// more bytes than the chunk holds (neither our decoder nor HDF5's pipeline can take it).
void DamageChunk(const fs::path& path, uint32_t rank, hsize_t row) {
  haddr_t addr = HADDR_UNDEF;
  {
    h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    h5::Handle d(H5Dopen2(f.get(), ("/ranks/" + std::to_string(rank) + "/events").c_str(), H5P_DEFAULT));
    hsize_t offset[1] = {row};
    unsigned mask = 0;
    hsize_t size = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(d.get(), offset, &mask, &addr, &size), 0);
    ASSERT_GT(size, 16u);
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(addr + 12));
  const char huge[4] = {0x7F, 0x00, 0x00, 0x00};
  f.write(huge, 4);
}

TEST(Hdf5Writer, ACorruptLz4ChunkIsAReadErrorNamingTheTableAndTheOtherChunksStillRead) {
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  const fs::path path = dir / "c.h5";
  auto ev = Events(3 * schema::kEventChunk, 0);
  {
    auto w = Hdf5Writer::Create(path, JobMeta{}, WriterOptions{});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(0, 2)).ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(1, 2)).ok());
    ASSERT_TRUE(w.value()->AppendEvents(0, ev).ok());
    ASSERT_TRUE(w.value()->AppendEvents(1, ev).ok());
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  DamageChunk(path, 0, schema::kEventChunk);  // rank 0's second chunk
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Status bad = r.value()->ForEachEventChunk(0, [](std::span<const commprof_event>) {});
  EXPECT_EQ(bad.code(), StatusCode::kCorrupt);
  EXPECT_NE(bad.message().find("/ranks/0/events"), std::string::npos) << bad.message();
  // The damaged chunk's own records, not the start of the read that met it.
  const std::string records = "records " + std::to_string(schema::kEventChunk) + "-" +
                              std::to_string(2 * schema::kEventChunk - 1) + " (a damaged chunk)";
  EXPECT_NE(bad.message().find(records), std::string::npos) << bad.message();
  auto other = ReadEvents(*r.value(), 1);
  ASSERT_EQ(other.size(), ev.size());
  EXPECT_EQ(std::memcmp(other.data(), ev.data(), ev.size() * sizeof(commprof_event)), 0);
}

TEST(Hdf5Writer, ADamagedLastChunkOfARankWithoutByeIsLeftOutAndTheRestRead) {
  // What a writer that failed (or was killed) while rewriting a rank's last, partly filled chunk
  // can leave (docs/reliability.md): that chunk unreadable. A rank without a bye is read without
  // it, named as partly unreadable; one whose bye was stored (flushed after the chunk) and a damage
  // before the last chunk stay read errors.
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  const fs::path path = dir / "t.h5";
  const hsize_t whole = 2 * schema::kEventChunk;
  auto ev = Events(static_cast<size_t>(whole + schema::kEventChunk / 2), 0);
  {
    auto w = Hdf5Writer::Create(path, JobMeta{}, WriterOptions{});
    ASSERT_TRUE(w.ok());
    for (uint32_t r = 0; r < 3; ++r) {
      ASSERT_TRUE(w.value()->OpenRank(Hello(r, 3)).ok());
      ASSERT_TRUE(w.value()->AppendEvents(r, ev).ok());
    }
    ASSERT_TRUE(w.value()->CloseRank(1, RankEnd::kComplete, {}, 0, "bye").ok());
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  DamageChunk(path, 0, whole);                // rank 0: no bye, its last chunk
  DamageChunk(path, 1, whole);                // rank 1: a bye, its last chunk
  DamageChunk(path, 2, schema::kEventChunk);  // rank 2: no bye, a chunk before its last
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  ASSERT_EQ(info.ranks.size(), 3u);
  EXPECT_EQ(info.ranks[0].event_count, whole);
  EXPECT_EQ(info.ranks[0].damaged_tail, ev.size() - whole);
  EXPECT_EQ(info.ranks[0].missing_events(), ev.size() - whole);
  ASSERT_EQ(info.faults.size(), 1u);
  EXPECT_TRUE(info.faults[0].partial);
  EXPECT_EQ(info.faults[0].rank, std::optional<uint32_t>(0));
  const std::string records =
      "/ranks/0/events records " + std::to_string(whole) + "-" + std::to_string(ev.size() - 1) + " cannot be read";
  EXPECT_NE(info.faults[0].message.find(records), std::string::npos) << info.faults[0].message;
  auto got = ReadEvents(*r.value(), 0);
  ASSERT_EQ(got.size(), whole);
  EXPECT_EQ(std::memcmp(got.data(), ev.data(), got.size() * sizeof(commprof_event)), 0);
  for (uint32_t rank : {1u, 2u}) {
    EXPECT_EQ(info.ranks[rank].damaged_tail, 0u);
    Status bad = r.value()->ForEachEventChunk(rank, [](std::span<const commprof_event>) {});
    EXPECT_EQ(bad.code(), StatusCode::kCorrupt) << "rank " << rank;
    EXPECT_NE(bad.message().find("(a damaged chunk)"), std::string::npos) << bad.message();
  }
}

TEST(Hdf5Writer, CompressionNamesParseOrAreRefused) {
  EXPECT_EQ(ParseCompression("lz4")->compression, Compression::kLz4);
  EXPECT_EQ(ParseCompression("none")->compression, Compression::kNone);
  EXPECT_EQ(ParseCompression("deflate")->deflate_level, 1);
  EXPECT_EQ(ParseCompression("deflate:9")->deflate_level, 9);
  for (const char* bad : {"", "LZ4", "deflate:0", "deflate:10", "deflate:", "zstd", "lz4 "}) {
    EXPECT_FALSE(ParseCompression(bad).has_value()) << bad;
  }
  WriterOptions wrong;
  wrong.compression = Compression::kDeflate;
  wrong.deflate_level = 12;
  TempDir dir("commprof-w");
  auto w = Hdf5Writer::Create(dir / "x.h5", JobMeta{}, wrong);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("deflate level 12"), std::string::npos) << w.status().message();
}

TEST(Hdf5Writer, WorldSizeIsLearnedFromHellosAndGapsBecomeMissingRanks) {
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  {
    auto w = Hdf5Writer::Create(dir / "w.h5", JobMeta{}, WriterOptions{});  // world_size 0: unknown
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(3, 4)).ok());
    ASSERT_TRUE(
        w.value()
            ->CloseRank(3, RankEnd::kCorrupt, {{"dropped_a", 2}, {"dropped_b", 3}, {"other", 9}}, 0, "bad frame")
            .ok());
    // destroyed without Finalize: the destructor finalizes
  }
  auto r = ProfileReader::Open(dir / "w.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  EXPECT_TRUE(info.finalized);
  EXPECT_EQ(info.world_size, 4u);
  ASSERT_EQ(info.ranks.size(), 4u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(info.ranks[i].status, "missing") << i;
  EXPECT_EQ(info.ranks[3].status, "corrupt");
  EXPECT_EQ(info.ranks[3].end_reason, "bad frame");
  EXPECT_EQ(info.ranks[3].dropped_events, 5u) << "dropped_events sums the dropped_* counters";
  EXPECT_EQ(info.ranks[3].counters.count("rank"), 0u) << "identity attributes are not counters";
  EXPECT_EQ(info.ranks[3].counters.count("clock_offset_ns"), 0u) << "clock model attributes are not counters";
}

TEST(Hdf5Writer, AFileWhoseWriterNeverFinalizesKnowsTheWorldSizeFromItsFirstFlush) {
  // What a killed (or failed) writer leaves is its last flush: a copy of the file taken after a
  // flush, the writer still open. Its world_size must be the hellos' (MPI_COMM_WORLD is sized by
  // it: with 0, every collective of the job read as incomplete).
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  auto w = Hdf5Writer::Create(dir / "live.h5", JobMeta{}, WriterOptions{});  // world_size 0: unknown
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w.value()->OpenRank(Hello(1, 3)).ok());
  ASSERT_TRUE(w.value()->AppendEvents(1, Events(10, 0)).ok());
  ASSERT_TRUE(w.value()->Flush().ok());
  fs::copy_file(dir / "live.h5", dir / "killed.h5");
  ASSERT_TRUE(w.value()->LinkRank(2, 5, "other.h5").ok());  // a relay's rank raises it again
  ASSERT_TRUE(w.value()->Flush().ok());
  fs::copy_file(dir / "live.h5", dir / "killed2.h5");
  auto r = ProfileReader::Open(dir / "killed.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r.value()->info().finalized);
  EXPECT_EQ(r.value()->info().world_size, 3u);
  EXPECT_EQ(r.value()->info().ranks.at(0).event_count, 10u);
  h5::Handle f(H5Fopen((dir / "killed2.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_EQ(h5::ReadIntAttr(f.get(), "world_size").value_or(0), 5);
}

// Relays (docs/scale.md#relays): a shard marks no rank missing (the others are in other shards),
// and the job's file links the shard's ranks, which every reader then sees as the job's own.
TEST(Hdf5Writer, AShardMarksNoRankMissingAndTheJobFileLinksItsRanks) {
  TempDir dir("commprof-w");
  ASSERT_FALSE(dir.path().empty());
  fs::create_directories(fs::path(dir / "job.h5.shards"));
  const std::string shard = dir / "job.h5.shards/node1-0-77.h5";
  {
    WriterOptions shard_options;
    shard_options.shard = true;
    auto w = Hdf5Writer::Create(shard, JobMeta{}, shard_options);
    ASSERT_TRUE(w.ok());
    for (uint32_t rank : {2u, 3u}) {
      ASSERT_TRUE(w.value()->OpenRank(Hello(rank, 4)).ok());
      ASSERT_TRUE(w.value()->AppendEvents(rank, Events(1500 + rank, 0)).ok());
      ASSERT_TRUE(w.value()->CloseRank(rank, RankEnd::kComplete, {}, 0, "bye").ok());
    }
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  auto s = ProfileReader::Open(shard);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s.value()->info().ranks.size(), 2u) << "a shard holds its own ranks only, none 'missing'";
  {
    auto w = Hdf5Writer::Create(dir / "job.h5", JobMeta{}, WriterOptions{});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w.value()->OpenRank(Hello(0, 4)).ok());  // one rank reached the job's aggregator itself
    ASSERT_TRUE(w.value()->AppendEvents(0, Events(10, 0)).ok());
    ASSERT_TRUE(w.value()->CloseRank(0, RankEnd::kComplete, {}, 0, "bye").ok());
    ASSERT_TRUE(w.value()->LinkRank(2, 4, "job.h5.shards/node1-0-77.h5").ok());
    ASSERT_TRUE(w.value()->LinkRank(3, 4, "job.h5.shards/node1-0-77.h5").ok());
    EXPECT_FALSE(w.value()->LinkRank(0, 4, "job.h5.shards/node1-0-77.h5").ok()) << "rank 0 is already in the file";
    ASSERT_TRUE(w.value()->Finalize().ok());
  }
  // Read from another working directory: the links are relative to the job file's directory.
  const fs::path cwd = fs::current_path();
  fs::current_path("/");
  auto r = ProfileReader::Open(dir / "job.h5");
  fs::current_path(cwd);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  ASSERT_EQ(info.ranks.size(), 4u);
  EXPECT_EQ(info.ranks[1].status, "missing") << "rank 1 is in no shard and never said hello";
  EXPECT_EQ(info.ranks[2].status, "complete");
  EXPECT_EQ(info.ranks[2].event_count, 1502u);
  EXPECT_EQ(info.ranks[3].event_count, 1503u);
  EXPECT_EQ(info.ranks[3].host, "h3");
  auto events = ReadEvents(*r.value(), 3);
  ASSERT_EQ(events.size(), 1503u);
  EXPECT_EQ(events.back().seq, 1502u);
}

TEST(Hdf5Writer, RankEndNames) {
  EXPECT_STREQ(schema::RankStatusName(RankEnd::kComplete), "complete");
  EXPECT_STREQ(schema::RankStatusName(RankEnd::kDisconnected), "disconnected");
  EXPECT_STREQ(schema::RankStatusName(RankEnd::kCorrupt), "corrupt");
}

}  // namespace
}  // namespace commprof
