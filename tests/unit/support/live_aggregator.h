// A live aggregator for the unit tests: Ingest + Server + io thread on 127.0.0.1:<any port>, and
// a fixture around it. Apart from test_support.h because it brings in Boost.Asio, which most test
// files do not need (it doubles their compile time).
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "aggregator/ingest.h"
#include "aggregator/server.h"
#include "analysis/load/profile_reader.h"
#include "support/test_support.h"

namespace commprof::test_support {

// Ingest + Server on 127.0.0.1:<any port>, served by one io thread.
class LiveAggregator {
 public:
  LiveAggregator() = default;
  // Starts at once (see Start); ok() says whether it serves.
  LiveAggregator(const std::string& path, StreamPolicy policy, uint32_t world_size);
  ~LiveAggregator() { (void)Finish(); }
  LiveAggregator(const LiveAggregator&) = delete;
  LiveAggregator& operator=(const LiveAggregator&) = delete;

  // Ingest into `path` for job policy.job_id with world_size ranks, then the server and its io
  // thread. A step that fails is a fatal test failure and leaves ok() false.
  void Start(const std::string& path, StreamPolicy policy, uint32_t world_size,
             const ServerLimits& limits = ServerLimits{});

  bool ok() const { return server_ != nullptr; }
  uint16_t port() const { return server_->port(); }
  const ServerStats& stats() const { return server_->stats(); }

  // Closes the server, stops and joins the io thread and finishes the ingest (once; later calls
  // return Ok).
  Status Finish();

 private:
  std::unique_ptr<Ingest> ingest_;
  boost::asio::io_context io_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  bool finished_ = false;
};

// A test fixture around a LiveAggregator writing <temp dir>/out.h5: subclasses start it in SetUp
// (agg_.Start(dir_ / "out.h5", ...)); TearDown stops it and expects the ingest to finish cleanly.
class LiveAggregatorTest : public ::testing::Test {
 protected:
  explicit LiveAggregatorTest(const std::string& temp_prefix) : dir_(temp_prefix) {}

  void TearDown() override { Stop(); }

  void Stop() {
    Status st = agg_.Finish();
    EXPECT_TRUE(st.ok()) << st.message();
  }

  // Stops the server and opens what it wrote.
  std::unique_ptr<ProfileReader> StopAndRead() {
    Stop();
    auto r = ProfileReader::Open(dir_ / "out.h5");
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(r.value()) : nullptr;
  }

  uint16_t port() const { return agg_.port(); }
  const ServerStats& stats() const { return agg_.stats(); }

  TempDir dir_;
  LiveAggregator agg_;
};

}  // namespace commprof::test_support
