// Call sites of a hand-made 2-rank job (analysis/load/stack_table.h, analysis/metrics/call_sites.h):
// the join of CALL_SITE to its API event, the wait from the collective instance, symbolization's
// fallbacks (a module not readable here, no addr2line) and the /stacks table round trip.
#include "analysis/metrics/call_sites.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/load/stack_table.h"
#include "analysis/report/job_report.h"
#include "collector/event_builder.h"
#include "support/test_support.h"

namespace commprof {
namespace {

using test_support::RankData;
using test_support::TempDir;

constexpr const char* kGoneModule = "/nonexistent/dir/libgone.so";

commprof_event Frame(uint32_t stack, int32_t depth, uint32_t module, uint64_t address, uint32_t symbol) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_STACK_FRAME;
  e.seq = stack;
  e.peer = depth;
  e.bytes = address;
  e.name_id = module;
  e.correlation = symbol;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

// Strings: 1 MPI_Allreduce, 2 the module, 3 slow's and 4 fast's mangled names, 5 main, 6 MPI_Send.
// Three world allreduces (seq 0-2) per rank: the first two from stack 1 (slow, called from main),
// the third from stack 2 (fast); rank 1 arrives 20 us late at the first two, so rank 0 waits there.
// Rank 0 also has one MPI_Send of 10 us from stack 2 and a CALL_SITE of no event (unjoined).
RankData Rank(uint32_t r) {
  RankData d;
  d.strings = {"", "MPI_Allreduce", kGoneModule, "_Z4slowv", "_Z4fastv", "main", "MPI_Send"};
  const uint64_t late = r == 1 ? 20000 : 0;
  for (uint64_t seq = 0; seq < 3; ++seq) {
    const uint64_t t0 = 1000000 * (seq + 1) + (seq < 2 ? late : 0);
    commprof_event e = test_support::events::Collective(COMMPROF_OP_ALLREDUCE, seq, t0, 1000000 * (seq + 1) + 30000,
                                                        {.bytes = 8, .name = 1});
    d.events.push_back(CallSiteEvent(seq < 2 ? 1 : 2, e));
    d.events.push_back(e);
  }
  if (r == 0) {
    commprof_event s = test_support::events::Send(5000000, 5010000, 1, 0, 64);
    s.name_id = 6;
    d.events.push_back(CallSiteEvent(2, s));
    d.events.push_back(s);
    commprof_event orphan = s;
    orphan.start_ns = 6000000;
    d.events.push_back(CallSiteEvent(2, orphan));
  } else {
    commprof_event rv = test_support::events::Recv(4990000, 5010000, 0, 0, 64);
    d.events.push_back(rv);
  }
  d.events.push_back(Frame(1, 0, 2, 0x1234, 3));
  d.events.push_back(Frame(1, 1, 2, 0x2000, 5));
  d.events.push_back(Frame(2, 0, 2, 0x1500, 4));
  d.events.push_back(Frame(2, 1, 2, 0x2010, 5));
  return d;
}

// The ranks' byes say they recorded stacks (what makes the analyses look for them).
test_support::ProfileOptions Stacked() {
  test_support::ProfileOptions o;
  o.counters = {{"stacks_unique", 2}};
  return o;
}

TEST(CallSites, JoinsEachCallToItsStackWithTheInstanceWaitAndRanksBySlowestSite) {
  TempDir dir;
  auto reader = test_support::WriteProfile(dir / "job.h5", {Rank(0), Rank(1)}, Stacked());
  ASSERT_NE(reader, nullptr);
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  const std::vector<CallSite>& sites = rep->call_sites.sites;
  ASSERT_EQ(sites.size(), 3u);
  // No /stacks table: the collector's dladdr names, demangled, with module + address.
  EXPECT_EQ(sites[0].function, "slow()");
  EXPECT_EQ(sites[0].op, "MPI_Allreduce");
  EXPECT_EQ(sites[0].calls, 4u);  // 2 ranks x 2
  EXPECT_EQ(sites[0].wait_ns, 2 * 20000);
  EXPECT_EQ(sites[0].bytes, 4u * 8);
  EXPECT_EQ(sites[0].ranks, 2u);
  EXPECT_EQ(sites[0].module, kGoneModule);
  EXPECT_EQ(sites[0].address, 0x1234u);
  EXPECT_EQ(sites[0].stack, (std::vector<std::string>{"slow() (libgone.so+0x1234)", "main (libgone.so+0x2000)"}));
  // The send waits its 10 us inside the call; the third allreduce nobody waits at.
  EXPECT_EQ(sites[1].op, "MPI_Send");
  EXPECT_EQ(sites[1].function, "fast()");
  EXPECT_EQ(sites[1].calls, 1u);
  EXPECT_EQ(sites[1].wait_ns, 10000);
  EXPECT_EQ(sites[2].op, "MPI_Allreduce");
  EXPECT_EQ(sites[2].calls, 2u);
  EXPECT_EQ(sites[2].wait_ns, 0);
  EXPECT_EQ(rep->call_sites.unjoined, 1u);
  // The JSON has them in the same order.
  const auto json = ReportToJson(*rep);
  ASSERT_EQ(json["call_sites"].size(), 3u);
  EXPECT_EQ(json["call_sites"][0]["function"], "slow()");
  EXPECT_EQ(json["call_sites"][0]["wait_ns"], 40000);
}

TEST(CallSites, ModuleNotReadableHereKeepsModuleAndOffsetAndIsSaidOnce) {
  TempDir dir;
  const std::string path = dir / "job.h5";
  auto reader = test_support::WriteProfile(path, {Rank(0), Rank(1)}, Stacked());
  ASSERT_NE(reader, nullptr);
  auto sym = SymbolizeStacks(*reader);
  ASSERT_TRUE(sym.ok()) << sym.status().message();
  ASSERT_EQ(sym->notes.size(), 1u);
  EXPECT_NE(sym->notes[0].find("not readable here"), std::string::npos) << sym->notes[0];
  EXPECT_NE(sym->notes[0].find(kGoneModule), std::string::npos) << sym->notes[0];
  ASSERT_EQ(sym->rows.size(), 8u);  // 2 ranks x 2 stacks x 2 frames
  const schema::StackRow& first = sym->rows[0];
  EXPECT_EQ(first.rank, 0u);
  EXPECT_EQ(first.stack_id, 1u);
  EXPECT_EQ(first.depth, 0u);
  EXPECT_STREQ(first.function, "slow()");
  EXPECT_STREQ(first.file, "");
  EXPECT_EQ(first.line, 0u);
  EXPECT_STREQ(first.module, kGoneModule);
  EXPECT_EQ(first.address, 0x1234u);
  // Stored and read back; the analysis then reads /stacks.
  reader.reset();
  ASSERT_TRUE(WriteStacksTable(path, sym->rows).ok());
  auto back = ReadStacksTable(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 8u);
  EXPECT_STREQ((*back)[7].function, "main");
  auto again = ProfileReader::Open(path);
  ASSERT_TRUE(again.ok());
  auto stacks = LoadStacks(*again.value());
  ASSERT_TRUE(stacks.ok());
  EXPECT_EQ(stacks->size(), 4u);
  EXPECT_EQ(stacks->at({1, 2}).front().function, "fast()");
}

TEST(CallSites, WithoutAddr2lineFramesKeepTheirSymbolAndItIsSaidOnce) {
  TempDir dir;
  RankData r0 = Rank(0);
  // A readable module this time (this test program), so addr2line would be run.
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  r0.strings[2] = std::string(self, static_cast<size_t>(n));
  auto reader = test_support::WriteProfile(dir / "job.h5", {r0}, Stacked());
  ASSERT_NE(reader, nullptr);
  SymbolizeOptions o;
  o.addr2line = "/nonexistent/bin/addr2line";
  auto sym = SymbolizeStacks(*reader, o);
  ASSERT_TRUE(sym.ok()) << sym.status().message();
  ASSERT_EQ(sym->notes.size(), 1u);
  EXPECT_NE(sym->notes[0].find("cannot run '/nonexistent/bin/addr2line'"), std::string::npos) << sym->notes[0];
  ASSERT_EQ(sym->rows.size(), 4u);
  EXPECT_STREQ(sym->rows[0].function, "slow()");
  EXPECT_STREQ(sym->rows[0].file, "");
}

TEST(CallSites, ModuleAddr2lineCannotReadKeepsModuleAndOffsetAndIsSaidOnce) {
  TempDir dir;
  const std::string not_elf = dir / "libtext.so";
  { std::ofstream(not_elf) << "not an ELF file\n"; }
  RankData r0 = Rank(0);
  r0.strings[2] = not_elf;
  auto reader = test_support::WriteProfile(dir / "job.h5", {r0}, Stacked());
  ASSERT_NE(reader, nullptr);
  auto sym = SymbolizeStacks(*reader);
  ASSERT_TRUE(sym.ok()) << sym.status().message();
  ASSERT_EQ(sym->notes.size(), 1u);
  EXPECT_NE(sym->notes[0].find("could not read 1 module file(s) (first: " + not_elf), std::string::npos)
      << sym->notes[0];
  ASSERT_EQ(sym->rows.size(), 4u);
  EXPECT_STREQ(sym->rows[0].function, "slow()");
  EXPECT_STREQ(sym->rows[0].file, "");
  EXPECT_EQ(sym->rows[0].address, 0x1234u);
}

TEST(CallSites, AFileWithoutStacksHasNoCallSites) {
  TempDir dir;
  RankData plain;
  plain.events.push_back(test_support::events::Collective(COMMPROF_OP_ALLREDUCE, 0, 100, 200));
  auto reader = test_support::WriteProfile(dir / "job.h5", {plain});
  ASSERT_NE(reader, nullptr);
  EXPECT_FALSE(HasStacks(reader->info()));
  auto rep = AnalyzeJob(*reader);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->call_sites.sites.empty());
  EXPECT_TRUE(ReportToJson(*rep)["call_sites"].empty());
}

}  // namespace
}  // namespace commprof
