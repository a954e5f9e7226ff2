// Test doubles for the collector's seams (collector/runtime.h, RuntimeSeams): a clock the test
// sets, an aggregator inside the test process that a runtime ships to without a network, and a
// sink that keeps every frame a runtime sends. With them several simulated ranks run in one
// process and give the same result on every run.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aggregator/ingest.h"
#include "aggregator/rank_stream.h"
#include "aggregator/server.h"
#include "collector/host_clock.h"
#include "collector/transport.h"
#include "core/wire.h"

namespace commprof::test_support {

// A clock that stands still until the test moves it. Anchor(): the time it reads, with a fixed
// UTC, so a hello is the same on every run.
class ManualClock final : public HostClock {
 public:
  explicit ManualClock(uint64_t start_ns = 0, uint64_t utc_ns = 1'700'000'000'000'000'000ull)
      : now_(start_ns), utc_ns_(utc_ns) {}
  uint64_t Now() const override { return now_.load(std::memory_order_acquire); }
  uint64_t FromSteady(uint64_t) const override { return Now(); }
  ClockAnchor Anchor() const override { return {Now(), utc_ns_}; }

  void Set(uint64_t ns) { now_.store(ns, std::memory_order_release); }
  void Advance(uint64_t ns) { now_.fetch_add(ns, std::memory_order_acq_rel); }

 private:
  std::atomic<uint64_t> now_;
  const uint64_t utc_ns_;
};

// A HostClock the runtime owns that reads a clock the test keeps (runtimes take ownership).
class BorrowedClock final : public HostClock {
 public:
  explicit BorrowedClock(const HostClock& clock) : clock_(clock) {}
  uint64_t Now() const override { return clock_.Now(); }
  uint64_t FromSteady(uint64_t steady_ns) const override { return clock_.FromSteady(steady_ns); }
  ClockAnchor Anchor() const override { return clock_.Anchor(); }

 private:
  const HostClock& clock_;
};

// The aggregator's receiving side without the network: Ingest into an HDF5 file, and one
// RankStream per connection fed synchronously by the runtime's Send. Clock pings are answered
// with `reference`'s time (the steady clock when null). Counts what the TCP server counts.
class InProcessAggregator {
 public:
  InProcessAggregator(const std::string& path, StreamPolicy policy, uint32_t world_size,
                      const HostClock* reference = nullptr);
  ~InProcessAggregator() { (void)Finish(); }
  InProcessAggregator(const InProcessAggregator&) = delete;
  InProcessAggregator& operator=(const InProcessAggregator&) = delete;

  bool ok() const { return ingest_ != nullptr; }
  const ServerStats& stats() const { return stats_; }
  // For one runtime: connections to this aggregator; spool files under `spool_dir`.
  std::unique_ptr<TransportFactory> Transports(const std::string& spool_dir);
  // Finishes the ingest (once; later calls return Ok). Every runtime must be shut down first.
  Status Finish();

 private:
  class Link;
  class Factory;

  StreamPolicy policy_;
  const HostClock* reference_;
  std::unique_ptr<Ingest> ingest_;
  ServerStats stats_;
  bool finished_ = false;
};

// Keeps every frame each runtime sends, by rank, as a reader would see them; never spools.
class FrameCapture {
 public:
  struct Frame {
    wire::FrameType type{};
    std::vector<uint8_t> payload;
  };
  std::unique_ptr<TransportFactory> Transports(uint32_t rank);
  std::vector<Frame> FramesOf(uint32_t rank) const;
  // A frame from the "aggregator" to rank `rank` (one whole frame, header included): its shipper
  // reads it with TryReceive at its next flush.
  void Deliver(uint32_t rank, std::vector<uint8_t> frame);

 private:
  class Sink;
  class Factory;
  void Add(uint32_t rank, Frame f);
  bool TakeDelivered(uint32_t rank, wire::FrameHeader& header, std::vector<uint8_t>& payload);

  mutable std::mutex mu_;
  std::map<uint32_t, std::vector<Frame>> frames_;
  std::map<uint32_t, std::vector<std::vector<uint8_t>>> inbox_;
};

}  // namespace commprof::test_support
