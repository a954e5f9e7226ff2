#include "support/live_aggregator.h"

#include <utility>

namespace commprof::test_support {

LiveAggregator::LiveAggregator(const std::string& path, StreamPolicy policy, uint32_t world_size) {
  Start(path, std::move(policy), world_size);
}

void LiveAggregator::Start(const std::string& path, StreamPolicy policy, uint32_t world_size,
                           const ServerLimits& limits) {
  JobMeta meta;
  meta.job_id = policy.job_id;
  meta.world_size = world_size;
  auto in = Ingest::Start(path, meta, WriterOptions{}, 50);
  ASSERT_TRUE(in.ok()) << in.status().message();
  ingest_ = std::move(in.value());
  auto s = Server::Listen(io_, *ingest_, std::move(policy), "127.0.0.1", 0, limits);
  ASSERT_TRUE(s.ok()) << s.status().message();
  server_ = std::move(s.value());
  thread_ = std::thread([this] { io_.run(); });
}

Status LiveAggregator::Finish() {
  if (finished_) return Status::Ok();
  finished_ = true;
  // The io thread is stopped and joined first: the acceptor is the io thread's while it runs (it
  // re-arms async_accept from its handlers), so closing it from here before would race.
  io_.stop();
  if (thread_.joinable()) thread_.join();
  if (server_) server_->Close();
  return ingest_ ? ingest_->Finish() : Status::Ok();
}

}  // namespace commprof::test_support
