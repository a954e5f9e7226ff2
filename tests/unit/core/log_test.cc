// The rate-limited logger (core/log.h): lines a peer can provoke cost a bounded number of lines
// per key and window, and what was suppressed is still told.
#include "core/log.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace commprof {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class RateLimitedLogTest : public ::testing::Test {
 protected:
  void SetUp() override { SetLogLevel(LogLevel::kWarn); }
  uint64_t now_ns_ = 1'000'000'000;
  RateLimitedLog log_{3, 1000, [this] { return now_ns_; }};
};

TEST_F(RateLimitedLogTest, AtMostBurstLinesPerKeyPerWindowThenTheNextLineTellsHowManyWereSuppressed) {
  ::testing::internal::CaptureStderr();
  int printed = 0;
  for (int i = 0; i < 1000; ++i) printed += log_.Log(LogLevel::kWarn, "refused", "refused peer %d", i) ? 1 : 0;
  now_ns_ += 999'999'999;  // still the same window
  printed += log_.Log(LogLevel::kWarn, "refused", "refused peer late") ? 1 : 0;
  now_ns_ += 1;  // the next window
  printed += log_.Log(LogLevel::kWarn, "refused", "refused peer next") ? 1 : 0;
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed, 4);
  EXPECT_EQ(Count(err, "\n"), 4u) << err;
  EXPECT_NE(err.find("refused peer 0\n"), std::string::npos) << err;
  EXPECT_NE(err.find("refused peer 2\n"), std::string::npos) << err;
  EXPECT_EQ(err.find("refused peer 3"), std::string::npos) << err;
  EXPECT_NE(err.find("refused peer next (998 similar messages suppressed)"), std::string::npos) << err;
  EXPECT_EQ(log_.suppressed_total(), 998u);
}

TEST_F(RateLimitedLogTest, KeysAreLimitedIndependently) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 10; ++i) {
    log_.Log(LogLevel::kWarn, "a", "a%d", i);
    log_.Log(LogLevel::kWarn, "b", "b%d", i);
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Count(err, ": a"), 3u) << err;
  EXPECT_EQ(Count(err, ": b"), 3u) << err;
}

TEST_F(RateLimitedLogTest, FlushTellsWhatIsStillSuppressedOnceAndOnlyOnce) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 8; ++i) log_.Log(LogLevel::kWarn, "accept", "accept failed %d", i);
  log_.Flush();
  log_.Flush();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Count(err, "5 similar messages suppressed (accept)"), 1u) << err;
  EXPECT_EQ(Count(err, "\n"), 4u) << err;
}

TEST_F(RateLimitedLogTest, LinesBelowTheLogLevelAreNeitherPrintedNorCounted) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(log_.Log(LogLevel::kDebug, "k", "debug %d", i));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(err.empty()) << err;
  EXPECT_EQ(log_.suppressed_total(), 0u);
}

}  // namespace
}  // namespace commprof
