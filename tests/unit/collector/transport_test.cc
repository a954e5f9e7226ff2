// The collector's transports (collector/transport.h): spool files and directories are private to
// their owner (docs/wire-protocol.md, "Spool files"), whatever the umask, and the spool starts
// with the hello with its nonce-less proof that `commprof merge --secret` checks.
#include "collector/transport.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace commprof {
namespace {

using Bytes = std::vector<uint8_t>;

// Sets the umask for one test and restores it.
class UmaskGuard {
 public:
  explicit UmaskGuard(mode_t m) : old_(::umask(m)) {}
  ~UmaskGuard() { ::umask(old_); }

 private:
  mode_t old_;
};

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

wire::Hello MakeHello() {
  wire::Hello h;
  h.rank = 3;
  h.world_size = 4;
  h.pid = 4242;
  h.host = "spool-host";
  h.job_id = "job-spool";
  return h;
}

TEST(SpoolPermissions, NewSpoolFileIs0600AndTheDirectoriesItCreatesAre0700EvenUnderAPermissiveUmask) {
  test_support::TempDir dir("commprof-spoolperm");
  ASSERT_FALSE(dir.path().empty());
  UmaskGuard umask_guard(0);  // 0644 / 0755 in the code would show as such
  Bytes hello;
  wire::AppendHello(hello, MakeHello(), "the-secret");
  std::string path;
  auto spool = OpenSpool(dir / "a/b", MakeHello(), hello, &path);
  ASSERT_TRUE(spool.ok()) << spool.status().message();
  spool.value().reset();
  EXPECT_EQ(path, dir / "a/b/job-spool-rank3-pid4242.cpspool");
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(dir / "a"), 0700u);
  EXPECT_EQ(ModeOf(dir / "a/b"), 0700u);

  // It starts with the hello, whose proof is the spool (nonce-less) one.
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  wire::FrameHeader h;
  Bytes payload;
  auto r = wire::ReadFrame(f, h, payload);
  std::fclose(f);
  ASSERT_TRUE(r.ok() && r.value());
  EXPECT_EQ(h.type, wire::FrameType::kHello);
  EXPECT_TRUE(wire::VerifyHelloProof(payload, "the-secret"));
}

TEST(SpoolPermissions, AnEarlierWorldReadableSpoolFileOfTheSameNameBecomes0600) {
  test_support::TempDir dir("commprof-spoolperm");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir / "job-spool-rank3-pid4242.cpspool";
  std::FILE* old = std::fopen(path.c_str(), "wb");
  ASSERT_NE(old, nullptr);
  std::fputs("stale", old);
  std::fclose(old);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  Bytes hello;
  wire::AppendHello(hello, MakeHello(), "s");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  auto spool = OpenSpool(dir.path(), MakeHello(), hello, nullptr);
  ASSERT_TRUE(spool.ok()) << spool.status().message();
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(dir.path()), 0755u) << "a directory the user made is left as it is";
}

TEST(SpoolPermissions, ASpoolDirectoryThatCannotBeCreatedIsAnErrorNamingIt) {
  test_support::TempDir dir("commprof-spoolperm");
  ASSERT_FALSE(dir.path().empty());
  const std::string file = dir / "plain-file";
  std::FILE* f = std::fopen(file.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  Bytes hello;
  wire::AppendHello(hello, MakeHello(), "s");
  auto spool = OpenSpool(file + "/sub", MakeHello(), hello, nullptr);
  ASSERT_FALSE(spool.ok());
  EXPECT_NE(spool.status().message().find("cannot create spool"), std::string::npos) << spool.status().message();
  EXPECT_NE(spool.status().message().find("plain-file"), std::string::npos) << spool.status().message();
}

}  // namespace
}  // namespace commprof
