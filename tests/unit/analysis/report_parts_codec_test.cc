// The parts a distributed `commprof report` moves between its processes (report_parts_codec.h):
// a report computed from decoded parts is the one-process report, JSON byte for byte; errors
// cross as themselves; bytes that are not a part are refused, never misread.
#include "analysis/report/report_parts_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/report/report_json.h"
#include "analysis/report/report_model.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;
using namespace test_support::events;

commprof_event Memory(bool alloc, uint64_t t, uint64_t address, uint64_t bytes) {
  commprof_event e{};
  e.kind = alloc ? COMMPROF_KIND_MEM_ALLOC : COMMPROF_KIND_MEM_FREE;
  e.start_ns = e.end_ns = t;
  e.seq = address;
  e.bytes = bytes;
  e.device = 0;
  e.subtype = 3;  // CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
  e.peer = COMMPROF_NO_PEER;
  return e;
}

// Four ranks: allreduces with rank 2 late, a Late Sender from rank 1 to rank 0, rank 3 allocating
// and freeing device memory, and clock offsets, so every part (p2p, overlap, time, memory) counts.
std::vector<RankData> Job() {
  std::vector<RankData> ranks(4);
  for (uint64_t s = 0; s < 5; ++s) {
    const uint64_t t = 1000000 * (s + 1);
    for (uint32_t r = 0; r < 4; ++r) {
      const uint64_t late = r == 2 ? 40000 : 0;
      ranks[r].events.push_back(
          Collective(COMMPROF_OP_ALLREDUCE, s, t + late + 1000 * r, t + 60000 + 1000 * r, {.bytes = 4096}));
    }
    ranks[0].events.push_back(Recv(t + 100000, t + 180000, 1, 7, 64));
    ranks[1].events.push_back(Send(t + 170000, t + 175000, 0, 7, 64));
    ranks[3].events.push_back(Memory(true, t + 200000, 0x1000 + s, 1 << 20));
    ranks[3].events.push_back(Memory(false, t + 300000, 0x1000 + s, 0));
  }
  for (uint32_t r = 0; r < 4; ++r) {
    const int64_t offset = -1000 * static_cast<int64_t>(r);
    ranks[r].points = {{0, offset, 100}, {10000000, offset, 100}};
  }
  return ranks;
}

std::string JsonOf(const JobReport& rep) { return ReportModelToJson(BuildReportModel(rep)).dump(2); }

TEST(ReportPartsCodec, ReportFromDecodedPartsIsTheOneProcessReport) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "job.h5", Job());
  ASSERT_NE(reader, nullptr);
  auto alone = AnalyzeJob(*reader);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  ASSERT_GT(alone->p2p.matched, 0u);
  ASSERT_FALSE(alone->memory.empty());

  const std::string p2p_bytes = EncodeP2PPart(MatchP2PMessages(*reader, ReportP2POptions()));
  // Two processes' blocks of ranks, sent in the other order: the index places each pass.
  IndexedRankPasses low, high;
  for (uint32_t i = 0; i < reader->info().ranks.size(); ++i) {
    auto pass = ComputeRankPass(*reader, reader->info().ranks[i]);
    ASSERT_TRUE(pass.ok()) << pass.status().message();
    (i < 2 ? low : high).emplace_back(i, std::move(pass.value()));
  }
  const std::vector<std::string> pass_bytes = {EncodeRankPassPart(high), EncodeRankPassPart(low)};
  AnalysisSources sources;
  sources.p2p = [&] { return DecodeP2PPart(p2p_bytes); };
  sources.rank_passes = [&]() -> Result<std::vector<RankPass>> {
    std::vector<RankPass> out(reader->info().ranks.size());
    for (const std::string& bytes : pass_bytes) {
      auto part = DecodeRankPassPart(bytes);
      if (!part.ok()) {
        return part.status();
      }
      for (auto& [index, pass] : part.value()) {
        out.at(index) = std::move(pass);
      }
    }
    return out;
  };
  auto given = AnalyzeJob(*reader, sources);
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_EQ(JsonOf(given.value()), JsonOf(alone.value()));
  EXPECT_EQ(given->memory.size(), alone->memory.size());
  EXPECT_EQ(given->p2p.messages.size(), 0u);  // freed after the delay costs, as alone
}

TEST(ReportPartsCodec, AFailedPartCarriesItsErrorIntoTheReport) {
  auto p2p = DecodeP2PPart(EncodeP2PPart(Status(StatusCode::kIoError, "job.h5: /ranks/3/events: read failed")));
  ASSERT_FALSE(p2p.ok());
  EXPECT_EQ(p2p.status().code(), StatusCode::kIoError);
  EXPECT_EQ(p2p.status().message(), "job.h5: /ranks/3/events: read failed");
  auto passes = DecodeRankPassPart(EncodeRankPassPart(Status(StatusCode::kCorrupt, "overlap of rank 2: bad")));
  ASSERT_FALSE(passes.ok());
  EXPECT_EQ(passes.status().code(), StatusCode::kCorrupt);

  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "job.h5", Job());
  ASSERT_NE(reader, nullptr);
  AnalysisSources sources;
  sources.p2p = [] { return Result<P2PMatchResult>(Status(StatusCode::kIoError, "p2p read failed")); };
  auto rep = AnalyzeJob(*reader, sources);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(), "p2p read failed");
  sources.p2p = {};
  sources.rank_passes = [] { return Result<std::vector<RankPass>>(Status(StatusCode::kIoError, "pass failed")); };
  rep = AnalyzeJob(*reader, sources);
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().message(), "pass failed");
}

TEST(ReportPartsCodec, ScreeningFaultsCrossInOrderWithTheirRanks) {
  std::vector<RankFault> left_out = {{7, "f.h5: /ranks/7/events row 2: user_range ends before it starts"},
                                     {3, "f.h5: /ranks/3/events row 0: a second allreduce"}};
  auto got = DecodeScreeningPart(EncodeScreeningPart(left_out));
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ(got.value()[0].rank, std::optional<uint32_t>(7));
  EXPECT_EQ(got.value()[0].message, left_out[0].message);
  EXPECT_EQ(got.value()[1].rank, std::optional<uint32_t>(3));
  auto none = DecodeScreeningPart(EncodeScreeningPart({}));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  const std::string bytes = EncodeScreeningPart(left_out);
  EXPECT_FALSE(DecodeScreeningPart(std::string_view(bytes).substr(0, bytes.size() - 1)).ok());
  // A fault without a rank (a group whose name is not a rank) is never sent: it cannot be marked.
  EXPECT_FALSE(DecodeScreeningPart(EncodeScreeningPart({{std::nullopt, "x"}})).ok());
}

TEST(ReportPartsCodec, BytesThatAreNotAPartAreRefused) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "job.h5", Job());
  ASSERT_NE(reader, nullptr);
  const std::string p2p = EncodeP2PPart(MatchP2PMessages(*reader, ReportP2POptions()));
  IndexedRankPasses passes;
  passes.emplace_back(0, ComputeRankPass(*reader, reader->info().ranks[0]).value());
  const std::string pass = EncodeRankPassPart(passes);
  for (size_t cut : {size_t{0}, size_t{3}, p2p.size() / 2, p2p.size() - 1}) {
    auto got = DecodeP2PPart(std::string_view(p2p).substr(0, cut));
    ASSERT_FALSE(got.ok()) << "a p2p part cut at " << cut << " was accepted";
    EXPECT_NE(got.status().message().find("malformed"), std::string::npos) << got.status().message();
  }
  for (size_t cut : {size_t{5}, pass.size() / 2, pass.size() - 1}) {
    EXPECT_FALSE(DecodeRankPassPart(std::string_view(pass).substr(0, cut)).ok()) << "cut at " << cut;
  }
  EXPECT_FALSE(DecodeP2PPart(p2p + "x").ok()) << "trailing bytes accepted";
  EXPECT_FALSE(DecodeRankPassPart(p2p).ok()) << "a p2p part taken as rank passes";
  EXPECT_FALSE(DecodeP2PPart(pass).ok()) << "rank passes taken as a p2p part";
  std::string flipped = p2p;
  flipped[0] = static_cast<char>(flipped[0] ^ 1);
  EXPECT_FALSE(DecodeP2PPart(flipped).ok()) << "a wrong magic accepted";
}

}  // namespace
}  // namespace commprof
