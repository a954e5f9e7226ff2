// The aggregator's network side (Boost.Asio): accepts one TCP connection per rank, reads frames
// (header, then payload, each bounds-checked before anything is allocated), and hands them to a
// RankStream. A bad frame or a refused hello closes that connection only, with a logged reason.
//
// Before a connection is authenticated (docs/wire-protocol.md, "Before authentication") the
// server sends it a challenge and reads one bounded hello only, with a deadline; connections
// awaiting their hello and all connections are capped; running out of file descriptors pauses
// accepting instead of spinning; lines a peer can provoke are rate-limited.
#pragma once

// Boost 1.74 asio/awaitable.hpp uses std::exchange without including <utility> under C++20, so
// <utility> comes first, kept there against clang-format's include sorting.
// clang-format off
#include <utility>
// clang-format on
#include <atomic>
#include <boost/asio.hpp>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "aggregator/hang_watch.h"
#include "aggregator/ingest.h"
#include "aggregator/rank_stream.h"
#include "aggregator/relay_link.h"

namespace commprof {

struct ServerStats {
  std::atomic<uint32_t> accepted{0};  // hellos accepted
  std::atomic<uint32_t> refused{0};   // hellos refused (proof, job, duplicate)
  std::atomic<uint32_t> dropped{0};   // connections dropped for a bad frame (or no hello in time)
  std::atomic<uint32_t> open{0};      // authenticated sessions (ranks) currently open
  std::atomic<uint32_t> ended{0};     // accepted sessions that ended (bye or not)
  std::atomic<uint32_t> byes{0};
  std::atomic<uint32_t> connections{0};    // all connections open now, authenticated or not
  std::atomic<uint32_t> pending{0};        // sessions awaiting their hello now
  std::atomic<uint32_t> capped{0};         // connections closed at once: a cap was reached
  std::atomic<uint32_t> evicted{0};        // pending sessions dropped to make room at the cap
  std::atomic<uint32_t> accept_pauses{0};  // accept failed for lack of resources (EMFILE, ...)
  std::atomic<uint32_t> read_pauses{0};    // times a session stopped reading: the writer was behind
  std::atomic<uint32_t> streaming{0};      // authenticated sessions open that have not said bye
  std::atomic<uint32_t> relays{0};         // relays accepted (their control connections)
};

// The pre-authentication limits (docs/wire-protocol.md, "Before authentication").
struct ServerLimits {
  // Connections awaiting their hello. At the cap, the oldest one gives way to a new connection if
  // it has waited evict_after_ms; otherwise the new connection is closed at once (a collector
  // retries such a connection within its connect timeout).
  uint32_t max_pending = 64;
  uint32_t evict_after_ms = 1000;
  // All open connections, authenticated or not; beyond it new connections are closed at once.
  uint32_t max_connections = 16384;
  // A connection that has not sent an acceptable hello by then is closed.
  uint32_t hello_timeout_ms = 10000;
  // After accept fails for lack of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM), accepting pauses
  // this long, doubling while it keeps failing, up to the max.
  uint32_t accept_pause_ms = 100;
  uint32_t accept_pause_max_ms = 1600;
  // SO_RCVBUF of each connection; 0: the system's own, autotuned. Set only with the slow-disk test
  // aid (COMMPROF_TEST_WRITER_DELAY_US), so that a congested aggregator is reached with little data.
  uint32_t receive_buffer_bytes = 0;
};

class Session;

// The server's book of sessions awaiting their hello, oldest first. Shared with the sessions
// (which leave it when authenticated or closed) so that a session outliving the server is safe.
struct PendingBook {
  std::list<std::weak_ptr<Session>> sessions;
};

class Server {
 public:
  // Listens on host:port (port 0: any free port).
  static Result<std::unique_ptr<Server>> Listen(boost::asio::io_context& io, Ingest& ingest, StreamPolicy policy,
                                                const std::string& host, uint16_t port,
                                                const ServerLimits& limits = ServerLimits{},
                                                std::shared_ptr<HangWatch> hang_watch = nullptr);
  uint16_t port() const;
  const ServerStats& stats() const { return stats_; }
  // Hellos of an incarnation above 0 (an elastic restart's workers) go where `router` says; call
  // before the io_context runs. Unset: to the ingest given, which refuses a rank already taken.
  void RouteIncarnations(IncarnationRouter router) { router_ = std::move(router); }
  void Close();  // stop accepting (sessions continue until their peers close); stops the hang watchdog
  // The relays that connected (docs/scale.md#relays).
  const std::shared_ptr<RelayBook>& relays() const { return relays_; }

 private:
  Server(boost::asio::io_context& io, Ingest& ingest, StreamPolicy policy, const ServerLimits& limits,
         std::shared_ptr<HangWatch> hang_watch);
  void Accept();
  // Before a session exists: the caps (true: admit `socket`) and the pause after a failed accept.
  bool Admit(boost::asio::ip::tcp::socket& socket);
  void PauseAccepting(const boost::system::error_code& ec);

  Ingest& ingest_;
  IncarnationRouter router_;
  StreamPolicy policy_;
  ServerLimits limits_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_timer_;
  uint32_t accept_pause_ms_ = 0;  // the current pause; 0 while accepting works
  uint64_t accept_failures_ = 0;  // failed accepts in the current run of failures
  std::shared_ptr<PendingBook> pending_ = std::make_shared<PendingBook>();
  ServerStats stats_;
  std::shared_ptr<HangWatch> hang_watch_;  // null, or the --hang-timeout watchdog the sessions report to
  std::shared_ptr<RelayBook> relays_ = std::make_shared<RelayBook>();
};

}  // namespace commprof
