// The parent's side of a relay's control connection (docs/scale.md#relays).
//
// A relay is an aggregator of its own, started on a node for that node's ranks; it writes their
// streams into a shard file and keeps one control connection to its parent (the job's aggregator).
// On it the relay introduces itself (relay-hello, proven with the job's secret over the parent's
// challenge, checked by the server's session before it hands the socket here), reports how many
// of its ranks are done (relay-progress), and, once told the job is over (relay-finish), answers
// with what its finalized shard holds (relay-done). The parent then links those ranks into its
// file. Everything here runs on the server's io thread; the figures a waiting thread reads are
// atomics.
#pragma once

// Boost 1.74 asio/awaitable.hpp uses std::exchange without including <utility> under C++20, so
// <utility> comes first, kept there against clang-format's include sorting.
// clang-format off
#include <utility>
// clang-format on
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/wire.h"

namespace commprof {

// What a relay told its parent, for the thread that ends the collection.
struct RelayRecord {
  wire::RelayHello hello;  // its host, pid and shard (the proof is not kept)
  std::string peer;
  bool done = false;    // relay-done arrived: `result` holds the shard's ranks
  bool closed = false;  // the control connection ended (after relay-done, or without it)
  std::string end_reason;
  wire::RelayDone result;
};

class RelayLink : public std::enable_shared_from_this<RelayLink> {
 public:
  RelayLink(boost::asio::ip::tcp::socket socket, wire::RelayHello hello, std::string peer);
  // Accepts the relay (a hello-ack) and reads its frames.
  void Start();
  // The job is over: the relay finishes its shard, waiting up to grace_ms for its ranks.
  void SendFinish(uint32_t grace_ms);
  // Closes the connection (the parent gave up waiting).
  void Abandon(const std::string& why);

  uint32_t ranks_done() const { return ranks_done_.load(); }
  bool finished() const { return finished_.load(); }  // done or closed
  RelayRecord record() const;

 private:
  void ReadHeader();
  void Handle();
  void Write(std::vector<uint8_t> frame);
  void WriteFront();
  void End(const std::string& why);

  boost::asio::ip::tcp::socket socket_;
  mutable std::mutex mu_;  // record_
  RelayRecord record_;
  std::atomic<uint32_t> ranks_done_{0};
  std::atomic<bool> finished_{false};
  std::array<uint8_t, wire::kHeaderSize> header_{};
  wire::FrameHeader current_{};
  std::vector<uint8_t> payload_;
  std::deque<std::vector<uint8_t>> writes_;
};

// The relays of one server, in the order they connected (io thread adds, any thread reads).
class RelayBook {
 public:
  void Add(std::shared_ptr<RelayLink> link);
  std::vector<std::shared_ptr<RelayLink>> links() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<RelayLink>> links_;
};

}  // namespace commprof
