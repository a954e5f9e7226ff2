// The aggregator's network side (Boost.Asio): accepts one TCP connection per rank, reads frames
// (header, then payload, each bounds-checked before anything is allocated), and hands them to a
// RankStream. A bad frame or a refused hello closes that connection only, with a logged reason.
#pragma once

// Boost 1.74 asio/awaitable.hpp uses std::exchange without including <utility> under C++20:
// <utility> first (clang-format's include sorting would move it after Asio).
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "aggregator/ingest.h"
#include "aggregator/rank_stream.h"

namespace commprof {

struct ServerStats {
  std::atomic<uint32_t> accepted{0};  // hellos accepted
  std::atomic<uint32_t> refused{0};   // hellos refused (proof, job, duplicate)
  std::atomic<uint32_t> dropped{0};   // connections dropped for a bad frame
  std::atomic<uint32_t> open{0};      // sessions currently open
  std::atomic<uint32_t> ended{0};     // accepted sessions that ended (bye or not)
  std::atomic<uint32_t> byes{0};
};

class Server {
 public:
  // Listens on host:port (port 0: any free port).
  static Result<std::unique_ptr<Server>> Listen(boost::asio::io_context& io, Ingest& ingest, StreamPolicy policy,
                                                const std::string& host, uint16_t port);
  uint16_t port() const;
  const ServerStats& stats() const { return stats_; }
  void Close();  // stop accepting (sessions continue until their peers close)

 private:
  Server(boost::asio::io_context& io, Ingest& ingest, StreamPolicy policy);
  void Accept();

  Ingest& ingest_;
  StreamPolicy policy_;
  boost::asio::ip::tcp::acceptor acceptor_;
  ServerStats stats_;
};

}  // namespace commprof
