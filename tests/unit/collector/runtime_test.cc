// The collector runtime end to end inside one process: a real Runtime ships to a real aggregator
// (over real TCP to Ingest + Server in one test, through the transport seam to an in-process
// aggregator in the others), or spools when it cannot; the result is read back from the HDF5 file
// with the analysis reader.
#include "collector/runtime.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/ingest.h"
#include "aggregator/server.h"
#include "aggregator/spool_reader.h"
#include "analysis/load/profile_reader.h"
#include "collector/transport.h"
#include "collector_sim.h"
#include "support/live_aggregator.h"
#include "support/test_support.h"

namespace commprof {
namespace {

namespace fs = std::filesystem;

using test_support::InProcessAggregator;
using test_support::LiveAggregator;
using test_support::ReadEvents;
using test_support::TempDir;
using test_support::WaitFor;

constexpr const char* kSecret = "runtime-test-secret";
constexpr const char* kJob = "job-rt";

Config MakeConfig(const std::string& aggregator, const std::string& secret, const std::string& spool_dir) {
  Config c;
  c.aggregator = aggregator;
  c.secret = secret;
  c.job_id = kJob;
  c.spool_dir = spool_dir;
  c.buffer_events = 1024;
  c.memory_mb = 64;
  c.flush_ms = 5;
  c.request_slots = 1024;
  c.connect_timeout_ms = 2000;
  return c;
}

Identity MakeIdentity() {
  Identity id;
  id.rank = 0;
  id.world_size = 1;
  id.pid = static_cast<uint32_t>(::getpid());
  id.host = "unit-test-host";
  return id;
}

const std::vector<std::string> kNames = {"alpha", "beta", "gamma"};
constexpr uint64_t kPerThread = 1000;  // below the ring capacity (1024): nothing can be dropped
constexpr uint64_t kEvents = 2 * kPerThread;

// Records kEvents user marks from two threads: thread t uses seq t*kPerThread + i.
void RecordFromTwoThreads(Runtime& rt) {
  std::vector<uint32_t> ids;
  for (const auto& n : kNames) ids.push_back(rt.Intern(n.c_str()));
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 2; ++t) {
    threads.emplace_back([&rt, &ids, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        commprof_event e{};
        e.start_ns = rt.Now();
        e.end_ns = e.start_ns + (i % 3);
        e.kind = i % 2 == 0 ? COMMPROF_KIND_USER_MARK : COMMPROF_KIND_STEP;
        e.seq = t * kPerThread + i;
        e.name_id = ids[i % ids.size()];
        e.peer = COMMPROF_NO_PEER;
        e.device = COMMPROF_HOST_DEVICE;
        e.bytes = t;
        rt.Record(e);
      }
    });
  }
  for (auto& th : threads) th.join();
}

// What every run of RecordFromTwoThreads must leave in rank 0 of a file.
void ExpectRecordedRun(const std::string& path, const char* want_spooled) {
  auto r = ProfileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ProfileInfo& info = r.value()->info();
  EXPECT_TRUE(info.finalized);
  EXPECT_EQ(info.job_id, kJob);
  ASSERT_EQ(info.ranks.size(), 1u);
  const RankInfo& rank = info.ranks[0];
  EXPECT_EQ(rank.rank, 0u);
  EXPECT_EQ(rank.status, "complete");
  EXPECT_EQ(rank.host, "unit-test-host");
  EXPECT_EQ(rank.pid, static_cast<uint64_t>(::getpid()));
  EXPECT_EQ(rank.event_count, kEvents);
  auto counter = [&](const char* name) -> uint64_t {
    auto it = rank.counters.find(name);
    EXPECT_NE(it, rank.counters.end()) << "counter " << name << " missing";
    return it == rank.counters.end() ? ~uint64_t{0} : it->second;
  };
  EXPECT_EQ(counter("events_recorded"), kEvents);
  EXPECT_EQ(counter("events_shipped"), kEvents);
  EXPECT_EQ(counter("events_written"), kEvents);
  EXPECT_EQ(counter("dropped_ring_full"), 0u);
  EXPECT_EQ(counter("dropped_no_buffer"), 0u);
  EXPECT_EQ(counter("dropped_events"), 0u);
  EXPECT_EQ(counter("batches_lost"), 0u);
  EXPECT_EQ(counter("spooled"), std::string(want_spooled) == "spooled" ? 1u : 0u);

  auto strings = r.value()->Strings(0);
  ASSERT_TRUE(strings.ok()) << strings.status().message();
  // the reserved names of a fresh table, then ours in first-seen order
  std::vector<std::string> want_strings;
  StringTable fresh;
  for (auto v : fresh.Since(0)) want_strings.emplace_back(v);
  want_strings.insert(want_strings.end(), kNames.begin(), kNames.end());
  EXPECT_EQ(strings.value(), want_strings);

  auto events = ReadEvents(*r.value(), 0);
  ASSERT_EQ(events.size(), kEvents);
  std::set<uint64_t> seqs;
  std::set<uint32_t> thread_ids[2];
  uint64_t last_seq[2] = {0, 0};
  bool seen_any[2] = {false, false};
  for (const auto& e : events) {
    seqs.insert(e.seq);
    ASSERT_LT(e.seq, kEvents);
    uint64_t t = e.seq / kPerThread;
    uint64_t i = e.seq % kPerThread;
    EXPECT_EQ(e.kind, i % 2 == 0 ? COMMPROF_KIND_USER_MARK : COMMPROF_KIND_STEP) << e.seq;
    EXPECT_EQ(strings.value().at(e.name_id), kNames[i % kNames.size()]) << e.seq;
    EXPECT_EQ(e.end_ns - e.start_ns, i % 3) << e.seq;
    EXPECT_EQ(e.bytes, t) << e.seq;
    EXPECT_EQ(e.peer, COMMPROF_NO_PEER);
    EXPECT_EQ(e.device, COMMPROF_HOST_DEVICE);
    thread_ids[t].insert(e.thread_id);
    // one thread's events stay in its recording order
    if (seen_any[t]) {
      EXPECT_GT(e.seq, last_seq[t]);
    }
    last_seq[t] = e.seq;
    seen_any[t] = true;
  }
  EXPECT_EQ(seqs.size(), kEvents) << "some seq values are missing or repeated";
  ASSERT_EQ(thread_ids[0].size(), 1u);
  ASSERT_EQ(thread_ids[1].size(), 1u);
  EXPECT_NE(*thread_ids[0].begin(), *thread_ids[1].begin()) << "the two threads share a thread_id";
}

std::vector<std::string> SpoolFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".cpspool") out.push_back(entry.path().string());
  }
  return out;
}

// Merges one spool file into a fresh output, as `commprof merge` does.
void MergeSpool(const std::string& spool, const std::string& out, const StreamPolicy& policy) {
  JobMeta meta;
  meta.job_id = kJob;
  meta.world_size = 1;
  auto in = Ingest::Start(out, meta, WriterOptions{}, 50);
  ASSERT_TRUE(in.ok()) << in.status().message();
  SpoolResult res = IngestSpoolFile(*in.value(), spool, policy);
  EXPECT_TRUE(res.status.ok()) << res.status.message();
  EXPECT_TRUE(res.accepted);
  EXPECT_EQ(res.rank, 0u);
  EXPECT_EQ(res.job_id, kJob);
  Status fin = in.value()->Finish();
  EXPECT_TRUE(fin.ok()) << fin.message();
}

TEST(RuntimeAggregator, ShipsEveryEventStringAndCounterOverTcp) {
  TempDir dir("commprof-rt");
  ASSERT_FALSE(dir.path().empty());
  LiveAggregator agg(dir / "out.h5", StreamPolicy{kSecret, kJob}, 1);
  ASSERT_TRUE(agg.ok());
  {
    Runtime rt(MakeConfig("127.0.0.1:" + std::to_string(agg.port()), kSecret, dir / "spool"), MakeIdentity());
    rt.Start();
    RecordFromTwoThreads(rt);
    rt.Shutdown();
    rt.Shutdown();  // idempotent
  }
  ASSERT_TRUE(WaitFor([&] { return agg.stats().ended.load() == 1; })) << "the aggregator never saw the stream end";
  EXPECT_EQ(agg.stats().accepted.load(), 1u);
  EXPECT_EQ(agg.stats().byes.load(), 1u);
  EXPECT_EQ(agg.stats().refused.load(), 0u);
  EXPECT_EQ(agg.stats().dropped.load(), 0u);
  Status fin = agg.Finish();
  ASSERT_TRUE(fin.ok()) << fin.message();
  EXPECT_TRUE(SpoolFiles(dir / "spool").empty()) << "a connected runtime must not spool";
  ExpectRecordedRun(dir / "out.h5", "live");
}

TEST(RuntimeAggregator, WrongSecretIsRefusedAndTheRuntimeSpoolsEverything) {
  TempDir dir("commprof-rt");
  ASSERT_FALSE(dir.path().empty());
  InProcessAggregator agg(dir / "out.h5", StreamPolicy{kSecret, kJob}, 1);
  ASSERT_TRUE(agg.ok());
  {
    RuntimeSeams seams;
    seams.transports = agg.Transports(dir / "spool");
    Runtime rt(MakeConfig("in-process", "not-the-secret", dir / "spool"), MakeIdentity(), std::move(seams));
    rt.Start();
    RecordFromTwoThreads(rt);
    rt.Shutdown();
  }
  ASSERT_TRUE(WaitFor([&] { return agg.stats().refused.load() == 1; }));
  EXPECT_EQ(agg.stats().accepted.load(), 0u);
  EXPECT_EQ(agg.stats().ended.load(), 0u);
  Status fin = agg.Finish();
  ASSERT_TRUE(fin.ok()) << fin.message();

  // nothing of the refused rank was stored: it is reported missing
  auto live = ProfileReader::Open(dir / "out.h5");
  ASSERT_TRUE(live.ok()) << live.status().message();
  ASSERT_EQ(live.value()->info().ranks.size(), 1u);
  EXPECT_EQ(live.value()->info().ranks[0].status, "missing");
  EXPECT_EQ(live.value()->info().ranks[0].event_count, 0u);
  EXPECT_TRUE(ReadEvents(*live.value(), 0).empty());

  auto spools = SpoolFiles(dir / "spool");
  ASSERT_EQ(spools.size(), 1u) << "the refused runtime must fall back to one spool file";
  EXPECT_EQ(fs::path(spools[0]).filename().string(),
            std::string(kJob) + "-rank0-pid" + std::to_string(::getpid()) + ".cpspool");
  // the spool's hello carries the runtime's (wrong) proof: merge it as a local file, unchecked
  MergeSpool(spools[0], dir / "merged.h5", StreamPolicy{std::nullopt, kJob});
  ExpectRecordedRun(dir / "merged.h5", "spooled");
}

TEST(RuntimeAggregator, SpoolSignedWithAnotherSecretIsRefusedWhenTheSecretIsChecked) {
  TempDir dir("commprof-rt");
  ASSERT_FALSE(dir.path().empty());
  {
    Runtime rt(MakeConfig("", "spool-secret", dir / "spool"), MakeIdentity());
    rt.Start();
    RecordFromTwoThreads(rt);
    rt.Shutdown();
  }
  auto spools = SpoolFiles(dir / "spool");
  ASSERT_EQ(spools.size(), 1u);
  JobMeta meta;
  meta.world_size = 1;
  auto in = Ingest::Start(dir / "merged.h5", meta, WriterOptions{}, 50);
  ASSERT_TRUE(in.ok()) << in.status().message();
  SpoolResult res = IngestSpoolFile(*in.value(), spools[0], StreamPolicy{std::string("other"), ""});
  EXPECT_FALSE(res.accepted);
  EXPECT_FALSE(res.status.ok());
  EXPECT_NE(res.status.message().find("HMAC"), std::string::npos) << res.status.message();
  EXPECT_NE(res.status.message().find(spools[0]), std::string::npos) << res.status.message();
  ASSERT_TRUE(in.value()->Finish().ok());
  auto r = ProfileReader::Open(dir / "merged.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r.value()->info().ranks.size(), 1u);
  EXPECT_EQ(r.value()->info().ranks[0].status, "missing");
}

TEST(RuntimeAggregator, UnreachableAggregatorMakesTheRuntimeSpoolAndTheMergeHasAllEvents) {
  TempDir dir("commprof-rt");
  ASSERT_FALSE(dir.path().empty());
  {
    Runtime rt(MakeConfig("127.0.0.1:1", kSecret, dir / "spool/nested"), MakeIdentity());
    rt.Start();
    RecordFromTwoThreads(rt);
    rt.Shutdown();
  }
  auto spools = SpoolFiles(dir / "spool/nested");
  ASSERT_EQ(spools.size(), 1u) << "expected one spool file in a created nested directory";
  auto hello = ReadSpoolHello(spools[0]);
  ASSERT_TRUE(hello.ok()) << hello.status().message();
  EXPECT_EQ(hello->job_id, kJob);
  EXPECT_EQ(hello->rank, 0u);
  EXPECT_EQ(hello->host, "unit-test-host");
  // signed with the job secret: a checking merge accepts it
  MergeSpool(spools[0], dir / "merged.h5", StreamPolicy{kSecret, kJob});
  ExpectRecordedRun(dir / "merged.h5", "spooled");
}

TEST(RuntimeAggregator, TinyRingCountsEveryDroppedEventInTheByeCounters) {
  TempDir dir("commprof-rt");
  ASSERT_FALSE(dir.path().empty());
  InProcessAggregator agg(dir / "out.h5", StreamPolicy{kSecret, kJob}, 1);
  ASSERT_TRUE(agg.ok());
  constexpr uint64_t kRecorded = 1000;
  {
    Config c = MakeConfig("in-process", kSecret, dir / "spool");
    c.buffer_events = 16;
    c.flush_ms = 1000;  // the shipper does not drain while we record
    RuntimeSeams seams;
    seams.transports = agg.Transports(dir / "spool");
    Runtime rt(c, MakeIdentity(), std::move(seams));
    rt.Start();
    for (uint64_t i = 0; i < kRecorded; ++i) {
      commprof_event e{};
      e.start_ns = e.end_ns = rt.Now();
      e.kind = COMMPROF_KIND_USER_MARK;
      e.seq = i;
      rt.Record(e);
    }
    rt.Shutdown();
  }
  ASSERT_TRUE(WaitFor([&] { return agg.stats().ended.load() == 1; }));
  ASSERT_TRUE(agg.Finish().ok());
  auto r = ProfileReader::Open(dir / "out.h5");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r.value()->info().ranks.size(), 1u);
  const RankInfo& rank = r.value()->info().ranks[0];
  EXPECT_EQ(rank.status, "complete");
  ASSERT_EQ(rank.counters.count("events_recorded"), 1u);
  ASSERT_EQ(rank.counters.count("dropped_ring_full"), 1u);
  uint64_t recorded = rank.counters.at("events_recorded");
  uint64_t dropped = rank.counters.at("dropped_ring_full");
  EXPECT_EQ(recorded + dropped, kRecorded);
  EXPECT_GT(dropped, 0u);
  EXPECT_GE(recorded, 16u);  // at least one full ring's worth got in
  EXPECT_EQ(rank.dropped_events, dropped);
  EXPECT_EQ(rank.event_count, recorded);
  // the events that got in are the earliest ones, in order
  auto events = ReadEvents(*r.value(), 0);
  ASSERT_EQ(events.size(), recorded);
  for (size_t i = 1; i < events.size(); ++i) EXPECT_GT(events[i].seq, events[i - 1].seq);
  EXPECT_EQ(events[0].seq, 0u);
}

TEST(Runtime, CountersStartAtZeroAndCountRecordedEvents) {
  Runtime rt(MakeConfig("", "", "/nonexistent-unused"), MakeIdentity());  // never started
  commprof_event e{};
  e.kind = COMMPROF_KIND_USER_MARK;
  for (int i = 0; i < 5; ++i) rt.Record(e);
  rt.SetUserEnabled(false);
  rt.Record(e);  // ignored while disabled
  wire::Bye bye = rt.Counters();
  std::map<std::string, uint64_t> c(bye.counters.begin(), bye.counters.end());
  EXPECT_EQ(c.at("events_recorded"), 5u);
  EXPECT_EQ(c.at("dropped_ring_full"), 0u);
  EXPECT_EQ(c.at("dropped_no_buffer"), 0u);
  EXPECT_EQ(c.at("dropped_range_depth"), 0u);
  EXPECT_EQ(c.at("dropped_requests"), 0u);
  EXPECT_EQ(c.at("dropped_strings"), 0u);
  rt.CountRangeOverflow();
  rt.CountUntrackedRequest();
  rt.CountUntrackedRequest();
  bye = rt.Counters();
  c = std::map<std::string, uint64_t>(bye.counters.begin(), bye.counters.end());
  EXPECT_EQ(c.at("dropped_range_depth"), 1u);
  EXPECT_EQ(c.at("dropped_requests"), 2u);
}

TEST(Runtime, ThreadsBeyondTheMemoryBudgetCountTheirEventsAsDropped) {
  Config c = MakeConfig("", "", "/nonexistent-unused");
  c.buffer_events = 16384;  // 1 MiB per ring
  c.memory_mb = 1;          // room for exactly one ring
  Runtime rt(c, MakeIdentity());
  commprof_event e{};
  e.kind = COMMPROF_KIND_USER_MARK;
  rt.Record(e);  // this thread takes the only ring
  std::thread other([&] {
    for (int i = 0; i < 7; ++i) rt.Record(e);
    EXPECT_EQ(rt.Thread()->ring, nullptr);
    EXPECT_EQ(rt.Thread()->index, 1u);
  });
  other.join();
  EXPECT_NE(rt.Thread()->ring, nullptr);
  EXPECT_EQ(rt.Thread()->index, 0u);
  wire::Bye bye = rt.Counters();
  std::map<std::string, uint64_t> m(bye.counters.begin(), bye.counters.end());
  EXPECT_EQ(m.at("events_recorded"), 1u);
  EXPECT_EQ(m.at("dropped_no_buffer"), 7u);
}

TEST(Runtime, ShutdownRecordsRequestsNeverSeenToCompleteAsIncomplete) {
  Runtime rt(MakeConfig("", "", "/nonexistent-unused"), MakeIdentity());  // never started: nothing ships
  commprof_event pending{};
  pending.kind = COMMPROF_KIND_MPI_COLLECTIVE;
  pending.subtype = COMMPROF_OP_ALLREDUCE;
  pending.flags = COMMPROF_FLAG_NONBLOCKING;
  pending.seq = 41;
  ASSERT_TRUE(rt.requests().Insert(0x7f00deadbee0, pending));
  pending.seq = 42;
  ASSERT_TRUE(rt.requests().Insert(0x7f00deadbef0, pending));
  commprof_event done{};
  ASSERT_TRUE(rt.requests().Take(0x7f00deadbef0, done));  // this one completed normally
  rt.Shutdown();
  std::map<std::string, uint64_t> c;
  for (const auto& [k, v] : rt.Counters().counters) c[k] = v;
  EXPECT_EQ(c.at("requests_incomplete"), 1u);
  EXPECT_EQ(c.at("events_recorded"), 1u);
  std::vector<commprof_event> drained;
  commprof_event scratch[8];
  rt.DrainAll(scratch, 8, [&](const commprof_event* ev, uint32_t n) { drained.insert(drained.end(), ev, ev + n); });
  ASSERT_EQ(drained.size(), 1u);
  EXPECT_EQ(drained[0].seq, 41u);
  EXPECT_EQ(drained[0].flags, COMMPROF_FLAG_NONBLOCKING | COMMPROF_FLAG_INCOMPLETE);
  commprof_event gone{};
  EXPECT_FALSE(rt.requests().Take(0x7f00deadbee0, gone)) << "the table is emptied at shutdown";
}

TEST(Runtime, SplitHostPortHandlesIpv4AndBracketedIpv6) {
  std::string host, port;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:7000", host, port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, "7000");
  ASSERT_TRUE(SplitHostPort("[::1]:9", host, port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, "9");
  EXPECT_FALSE(SplitHostPort("nohost", host, port));
  EXPECT_FALSE(SplitHostPort(":80", host, port));
  EXPECT_FALSE(SplitHostPort("host:", host, port));
}

}  // namespace
}  // namespace commprof

namespace commprof {
namespace {

// Sets launcher variables for one test and restores the environment afterwards.
class LauncherEnv : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"PMIX_RANK",    "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                          "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                          "SLURM_NTASKS"};
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(LauncherEnv, NoLauncherGivesNoRank) {
  EXPECT_EQ(RankFromEnvironment(), -1);
  EXPECT_EQ(WorldSizeFromEnvironment(), -1);
}

// srun --mpi=pmix sets PMIX_RANK and SLURM_PROCID, no OMPI_* before
// MPI_Init; the size comes from SLURM_NTASKS.
TEST_F(LauncherEnv, SrunWithPmixTakesPmixRankAndSlurmTasks) {
  setenv("PMIX_RANK", "2", 1);
  setenv("SLURM_PROCID", "2", 1);
  setenv("SLURM_NTASKS", "4", 1);
  EXPECT_EQ(RankFromEnvironment(), 2);
  EXPECT_EQ(WorldSizeFromEnvironment(), 4);
}

// Under mpirun inside sbatch every rank sees SLURM_PROCID=0 (inherited from the batch step) and
// SLURM_NTASKS of the allocation; mpirun's own variables must win.
TEST_F(LauncherEnv, MpirunInsideSbatchIgnoresTheInheritedSlurmProcid) {
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("PMIX_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  EXPECT_EQ(RankFromEnvironment(), 3);
  EXPECT_EQ(WorldSizeFromEnvironment(), 4);
}

TEST_F(LauncherEnv, SlurmProcidAloneIsTheLastResort) {
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "6", 1);
  EXPECT_EQ(RankFromEnvironment(), 5);
  EXPECT_EQ(WorldSizeFromEnvironment(), 6);
}

}  // namespace
}  // namespace commprof
