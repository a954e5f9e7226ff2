// Finding or starting a node's relay (core/relay_rendezvous.h): exactly one start per group
// however many ranks ask at once, every rank gets the address the relay published, a relay that
// cannot start fails its whole group at once (so the ranks fall back to the aggregator), and two
// runs never meet each other's relays. The relay here is a shell script that publishes an address
// the way `commprof relay` does (BASE.addr, renamed into place) and records each start.
#include "core/relay_rendezvous.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "core/launcher_env.h"

namespace commprof {
namespace {

namespace fs = std::filesystem;

class RelayRendezvous : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("relay-rdv-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "shards");
    fs::create_directories(dir_ / "starts");
    fs::create_directories(dir_ / "rdv");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stand-in for `commprof relay`: records its start (pid, LD_PRELOAD, shard), then publishes
  // ADDRESS under the --rendezvous base it was given.
  std::string FakeRelay(const std::string& address) {
    fs::path script = dir_ / "fake-relay.sh";
    std::ofstream out(script);
    out << "#!/bin/sh\n"
        << "base=''; shard=''\n"
        << "while [ $# -gt 0 ]; do case \"$1\" in --rendezvous) base=$2;; --shard) shard=$2;; esac; shift; done\n"
        << "echo \"${LD_PRELOAD:-none} $shard\" > " << (dir_ / "starts").string() << "/$$\n"
        << "sleep 0.2\n"
        << "echo " << address << " > $base.addr.tmp && mv $base.addr.tmp $base.addr\n";
    out.close();
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }

  RelayRequest Request(const std::string& command, const std::string& host, uint32_t group = 0) {
    RelayRequest r;
    r.command = command;
    r.parent = "127.0.0.1:1";
    r.shard_dir = (dir_ / "shards").string();
    r.job_key = RelayJobKey("job-1", "secret-1", r.parent);
    r.host_key = host;
    r.group = group;
    r.timeout_ms = 20000;
    r.rendezvous_dir = (dir_ / "rdv").string();
    return r;
  }

  std::vector<std::string> Starts() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_ / "starts")) {
      std::ifstream in(e.path());
      std::string line;
      std::getline(in, line);
      out.push_back(line);
    }
    return out;
  }

  fs::path dir_;
};

TEST_F(RelayRendezvous, EightRanksAskingAtOnceStartOneRelayAndAllGetItsAddress) {
  const std::string cmd = FakeRelay("127.0.0.1:40001");
  ::setenv("LD_PRELOAD", "/nonexistent/libcommprof.so", 1);  // what a profiled rank has
  std::vector<std::thread> ranks;
  std::vector<std::string> got(8);
  for (int i = 0; i < 8; ++i) {
    ranks.emplace_back([&, i] {
      auto a = FindOrStartRelay(Request(cmd, "node7"));
      got[i] = a.ok() ? a.value() : "error: " + a.status().message();
    });
  }
  for (auto& t : ranks) {
    t.join();
  }
  ::unsetenv("LD_PRELOAD");
  for (const auto& g : got) {
    EXPECT_EQ(g, "127.0.0.1:40001");
  }
  auto starts = Starts();
  ASSERT_EQ(starts.size(), 1u) << "one relay per group, however many ranks ask";
  // The relay does not load the collector, and its shard is named after the node and group.
  EXPECT_EQ(starts[0].rfind("none ", 0), 0u) << starts[0];
  EXPECT_NE(starts[0].find((dir_ / "shards").string() + "/node7-0-"), std::string::npos) << starts[0];
}

TEST_F(RelayRendezvous, EachNodeAndGroupAndRunHasItsOwnRelay) {
  const std::string cmd = FakeRelay("127.0.0.1:40002");
  ASSERT_TRUE(FindOrStartRelay(Request(cmd, "nodeA", 0)).ok());
  ASSERT_TRUE(FindOrStartRelay(Request(cmd, "nodeA", 0)).ok());  // found, not started again
  ASSERT_TRUE(FindOrStartRelay(Request(cmd, "nodeA", 1)).ok());
  ASSERT_TRUE(FindOrStartRelay(Request(cmd, "nodeB", 0)).ok());
  RelayRequest next_run = Request(cmd, "nodeA", 0);
  next_run.job_key = RelayJobKey("job-1", "secret-2", next_run.parent);  // a second step of the same Slurm job
  ASSERT_TRUE(FindOrStartRelay(next_run).ok());
  EXPECT_EQ(Starts().size(), 4u);
}

// A rank whose relay ended while the job runs (its parent gone, a signal) starts another: that one
// gets a shard and log of its own, and the first relay's (the first part of the node's ranks) stay.
TEST_F(RelayRendezvous, ARelayStartedAfterTheFirstEndedGetsItsOwnShardName) {
  const std::string cmd = FakeRelay("127.0.0.1:40005");
  ASSERT_TRUE(FindOrStartRelay(Request(cmd, "nodeE")).ok());
  auto first = Starts();
  ASSERT_EQ(first.size(), 1u);
  const std::string first_shard = first[0].substr(first[0].find(' ') + 1);
  { std::ofstream(first_shard) << "the first relay's shard"; }
  // The first relay ends: it withdraws its address (as `commprof relay` does when it finishes).
  std::string base;
  for (const auto& e : fs::directory_iterator(dir_ / "rdv")) {
    if (e.path().extension() == ".addr") {
      base = (e.path().parent_path() / e.path().stem()).string();
    }
  }
  ASSERT_FALSE(base.empty());
  WithdrawRelay(base);
  ASSERT_TRUE(FindOrStartRelay(Request(cmd, "nodeE")).ok());
  auto starts = Starts();
  ASSERT_EQ(starts.size(), 2u);
  std::set<std::string> shards;
  for (const auto& s : starts) {
    shards.insert(s.substr(s.find(' ') + 1));
  }
  ASSERT_EQ(shards.size(), 2u) << "the second relay got the first one's shard name";
  shards.erase(first_shard);
  EXPECT_TRUE(shards.begin()->ends_with("-2.h5")) << *shards.begin();
  std::ifstream in(first_shard);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "the first relay's shard");
  EXPECT_TRUE(fs::exists(first_shard + ".log")) << "the first relay's log is kept";
}

TEST_F(RelayRendezvous, ARelayThatExitsBeforeListeningFailsItsWholeGroupAtOnce) {
  auto first = FindOrStartRelay(Request("/bin/false", "nodeC"));
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("exit code 1"), std::string::npos) << first.status().message();
  EXPECT_NE(first.status().message().find(".h5.log"), std::string::npos) << first.status().message();
  // The next rank of the group is not left waiting for an address that will not come.
  auto second = FindOrStartRelay(Request("/bin/false", "nodeC"));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("could not start"), std::string::npos) << second.status().message();
}

TEST_F(RelayRendezvous, ACommandThatCannotRunIsReportedAndFailsTheGroup) {
  const std::string missing = (dir_ / "no-such-commprof").string();
  auto first = FindOrStartRelay(Request(missing, "nodeD"));
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find(missing), std::string::npos) << first.status().message();
  auto second = FindOrStartRelay(Request(missing, "nodeD"));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("could not start"), std::string::npos) << second.status().message();
}

TEST_F(RelayRendezvous, AShardDirectoryThatCannotBeMadeIsNamedNotTheCommand) {
  const std::string cmd = FakeRelay("127.0.0.1:40003");
  RelayRequest r = Request(cmd, "nodeF");
  std::ofstream(dir_ / "a-file") << "x";
  r.shard_dir = (dir_ / "a-file" / "shards").string();  // under a regular file: no directory can be made
  auto got = FindOrStartRelay(r);
  ASSERT_FALSE(got.ok());
  const std::string& why = got.status().message();
  EXPECT_NE(why.find("cannot create the shard directory " + r.shard_dir + ": Not a directory"), std::string::npos)
      << why;
  EXPECT_EQ(why.find(cmd), std::string::npos) << why;  // the command is fine
  EXPECT_TRUE(Starts().empty());
  // The rest of the group is told at once, not left waiting for an address.
  auto second = FindOrStartRelay(r);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("could not start"), std::string::npos) << second.status().message();
}

// A job started by hand against `commprof aggregate` names a shard directory nobody made: the
// first rank of the group makes it (with its parents, as mkdir -p) and its relay writes there.
TEST_F(RelayRendezvous, AShardDirectoryNotThereYetIsMadeByTheRankThatStartsTheRelay) {
  const std::string cmd = FakeRelay("127.0.0.1:40005");
  RelayRequest r = Request(cmd, "nodeH");
  r.shard_dir = (dir_ / "new" / "job.h5.shards").string();
  auto got = FindOrStartRelay(r);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got.value(), "127.0.0.1:40005");
  EXPECT_TRUE(fs::is_directory(r.shard_dir));
  auto starts = Starts();
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_NE(starts[0].find(r.shard_dir + "/nodeH-0-"), std::string::npos) << starts[0];
}

TEST_F(RelayRendezvous, AFailureOfOneAggregatorsRelayDoesNotReachTheNextAggregatorOfTheSameJob) {
  // `commprof aggregate --job-id J --secret-file F` run again: same job id, same secret, a new
  // aggregator (address). The first one's relay failed to start; the second's starts.
  RelayRequest first = Request((dir_ / "no-such-commprof").string(), "nodeG");
  ASSERT_FALSE(FindOrStartRelay(first).ok());
  RelayRequest again = Request(FakeRelay("127.0.0.1:40004"), "nodeG");
  again.parent = "127.0.0.1:2";
  again.job_key = RelayJobKey("job-1", "secret-1", again.parent);
  auto got = FindOrStartRelay(again);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got.value(), "127.0.0.1:40004");
}

TEST_F(RelayRendezvous, MissingSettingsAreAnErrorNotAStart) {
  RelayRequest r = Request(FakeRelay("127.0.0.1:1"), "nodeE");
  r.shard_dir.clear();
  EXPECT_EQ(FindOrStartRelay(r).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Starts().empty());
}

TEST(RelayKeys, JobKeyDependsOnTheSecretAndTheParentAndNamesAreMadeSafeForFiles) {
  EXPECT_NE(RelayJobKey("42", "a", "10.0.0.1:5000"), RelayJobKey("42", "b", "10.0.0.1:5000"));
  EXPECT_NE(RelayJobKey("42", "a", "10.0.0.1:5000"), RelayJobKey("42", "a", "10.0.0.1:5001"));
  EXPECT_EQ(RelayJobKey("42", "a", "10.0.0.1:5000"), RelayJobKey("42", "a", "10.0.0.1:5000"));
  EXPECT_EQ(RelayJobKey("42", "a", "10.0.0.1:5000").rfind("42-", 0), 0u);
  EXPECT_EQ(SanitizeKey("node/../x y"), "node_.._x_y");
  EXPECT_EQ(SanitizeKey(""), "_");
  EXPECT_EQ(SanitizeKey(std::string(100, 'n')).size(), 64u);
}

TEST(RelayKeys, GroupsSplitANodesRanksByTheirLocalRank) {
  EXPECT_EQ(RelayGroup(0, 4), 0u);
  EXPECT_EQ(RelayGroup(3, 4), 0u);
  EXPECT_EQ(RelayGroup(4, 4), 1u);
  EXPECT_EQ(RelayGroup(7, 0xffffffffu), 0u);  // one per node
  ::setenv("SLURM_LOCALID", "6", 1);
  EXPECT_EQ(LauncherLocalRank(), 6u);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);  // Open MPI's comes first
  EXPECT_EQ(LauncherLocalRank(), 2u);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x2", 1);  // not a number: the next one
  EXPECT_EQ(LauncherLocalRank(), 6u);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("SLURM_LOCALID");
}

}  // namespace
}  // namespace commprof
