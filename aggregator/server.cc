#include "aggregator/server.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <vector>

#include "core/clock.h"
#include "core/log.h"

namespace commprof {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Lines any peer can provoke (refusals, drops, caps, accept errors): a flood of bad peers must not
// become a flood of log lines (core/log.h). Five lines per kind per second.
RateLimitedLog& PeerLog() {
  static RateLimitedLog log(5, 1000);
  return log;
}

}  // namespace

// How often a session tells its rank what is on disk (the ingest flushes every --flush-ms, and at
// once after a bye), and how long a rank's bye may wait for the file to take it.
constexpr auto kAckPeriod = std::chrono::milliseconds(100);
// After a bye the rank blocks in MPI_Finalize (or exit) until its ack: look every ms whether the
// ingest has flushed it (waiting out kAckPeriod added up to 100 ms to every job's end).
constexpr auto kByeAckPoll = std::chrono::milliseconds(1);
constexpr auto kByeAckDeadline = std::chrono::seconds(20);

class Session : public std::enable_shared_from_this<Session>, public HangPeer {
 public:
  Session(tcp::socket socket, Ingest& ingest, const StreamPolicy& policy, ServerStats& stats,
          const ServerLimits& limits, std::shared_ptr<PendingBook> book, std::shared_ptr<HangWatch> watch,
          std::shared_ptr<RelayBook> relays)
      : socket_(std::move(socket)),
        hello_timer_(socket_.get_executor()),
        ack_timer_(socket_.get_executor()),
        pause_timer_(socket_.get_executor()),
        stream_(ingest, policy),
        stats_(stats),
        limits_(limits),
        book_(std::move(book)),
        watch_(std::move(watch)),
        relays_(std::move(relays)),
        started_(std::chrono::steady_clock::now()) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
    if (watch_ != nullptr && watch_->enabled()) {
      // The watchdog's progress: completed communication in the batches as they arrive.
      stream_.ObserveEvents(
          [w = watch_.get()](uint32_t rank, std::span<const commprof_event> events) { w->Events(rank, events); });
    }
  }

  // A hang-query or hang-abort from the watchdog (io thread). Nothing goes to a finished session.
  void SendToRank(std::vector<uint8_t> frame) override {
    if (!finished_) {
      Write(std::move(frame));
    }
  }

  // Elastic restarts' workers to their incarnation's ingest (Server::RouteIncarnations).
  void RouteIncarnations(const IncarnationRouter& router) { stream_.RouteIncarnations(router); }

  void Start() {
    stats_.connections++;
    stats_.pending++;
    book_->sessions.push_back(weak_from_this());
    in_book_ = std::prev(book_->sessions.end());
    pending_ = true;
    // A peer must introduce itself promptly; a silent connection is closed.
    hello_timer_.expires_after(std::chrono::milliseconds(limits_.hello_timeout_ms));
    hello_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec && !self->stream_.accepted()) {
        self->Drop("no hello within " + std::to_string(self->limits_.hello_timeout_ms) + " ms");
      }
    });
    SendChallenge();
  }

  // The pending cap needs room: this session, still without a hello, gives way.
  void Evict() {
    stats_.evicted++;
    Drop("no hello after " + std::to_string(AgeMs()) + " ms while " + std::to_string(limits_.max_pending) +
         " connections were awaiting theirs (the pending cap)");
  }
  uint64_t AgeMs() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_).count());
  }

 private:
  // ---- before authentication: a challenge out, one bounded hello in ----

  // A fresh nonce per connection: the hello's proof must cover it, so a hello captured from
  // another connection or read from a spool file cannot authenticate this one.
  void SendChallenge() {
    auto nonce = wire::RandomNonce();
    if (!nonce.ok()) {
      return Drop(nonce.status().message());
    }
    stream_.RequireChallenge(nonce.value());
    out_.clear();
    wire::AppendChallenge(out_, nonce.value());
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                        if (ec) {
                          return self->Finish("cannot send the challenge: " + ec.message());
                        }
                        self->ReadHelloHeader();
                      });
  }

  // Only a hello may come first, and no longer than the longest valid hello: nothing a peer says
  // before it is authenticated makes the server allocate more than kMaxHelloPayload bytes.
  void ReadHelloHeader() {
    asio::async_read(
        socket_, asio::buffer(header_), [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
          if (ec) {
            return self->Finish(ec == asio::error::eof ? "connection closed" : ec.message());
          }
          auto h = wire::DecodeHeader(self->header_);
          if (!h.ok()) {
            return self->Drop(h.status().message());
          }
          const bool relay = h->type == wire::FrameType::kRelayHello;
          if (h->type != wire::FrameType::kHello && !relay) {
            return self->Drop(std::string("a ") + wire::FrameTypeName(h->type) +
                              " frame before the hello (only a hello may come first)");
          }
          const size_t longest = relay ? wire::kMaxRelayHelloPayload : wire::kMaxHelloPayload;
          if (h->payload_len > longest) {
            return self->Drop(std::string(wire::FrameTypeName(h->type)) + " of " + std::to_string(h->payload_len) +
                              " bytes is longer than any valid one (" + std::to_string(longest) + " bytes)");
          }
          self->current_ = h.value();
          self->payload_.resize(h->payload_len);
          asio::async_read(self->socket_, asio::buffer(self->payload_),
                           [self](const boost::system::error_code& ec2, size_t) {
                             if (ec2) {
                               return self->Finish("truncated hello: " + ec2.message());
                             }
                             if (self->current_.type == wire::FrameType::kRelayHello) {
                               return self->HandleRelayHello();
                             }
                             self->HandleHello();
                           });
        });
  }

  void HandleHello() {
    Status st = stream_.OnFrame(wire::FrameType::kHello, payload_);
    if (!st.ok()) {
      return Refuse(st.message());
    }
    hello_timer_.cancel();
    LeaveBook();
    stats_.accepted++;
    stats_.open++;
    stats_.streaming++;
    COMMPROF_LOG_INFO("rank %u %s from %s (pid %u, host %s)", stream_.rank(),
                      stream_.resumed() ? "resumed its stream" : "connected", peer_.c_str(), stream_.hello().pid,
                      stream_.hello().host.c_str());
    payload_ = std::vector<uint8_t>();  // the hello's buffer is not kept
    std::vector<uint8_t> ack;
    wire::AppendHelloAck(ack, wire::HelloAck{true, ""});
    Write(std::move(ack));
    ScheduleBatchAcks();
    if (watch_ != nullptr) {
      watch_->RankConnected(stream_.rank(), stream_.hello().world_size, shared_from_this());
    }
    ReadHeader();
  }

  // A relay's control connection (docs/scale.md#relays): proven like a rank's hello, then handed
  // to a RelayLink, which owns the socket from here on.
  void HandleRelayHello() {
    auto hello = wire::DecodeRelayHello(payload_);
    if (!hello.ok()) {
      return Refuse(hello.status().message());
    }
    const StreamPolicy& policy = stream_.policy();
    if (!policy.job_id.empty() && hello->job_id != policy.job_id) {
      return Refuse("relay of job '" + hello->job_id + "', not of this job ('" + policy.job_id + "')");
    }
    if (policy.secret.has_value() &&
        !wire::VerifyHelloProof(payload_, *policy.secret, stream_.challenge().value_or(wire::Nonce{}))) {
      return Refuse("relay-hello proof does not match the job secret");
    }
    hello_timer_.cancel();
    LeaveBook();
    stats_.relays++;
    auto link = std::make_shared<RelayLink>(std::move(socket_), std::move(hello.value()), peer_);
    relays_->Add(link);
    link->Start();
    // The socket is the link's now: this session ends without touching it.
    finished_ = true;
    closed_ = true;
    stats_.connections--;
  }

  void LeaveBook() {
    if (pending_) {
      pending_ = false;
      book_->sessions.erase(in_book_);
      stats_.pending--;
    }
  }

  // ---- after authentication: the frame loop ----

  void ReadHeader() {
    // Back-pressure: while the writer is behind (its queue over its bound), read nothing more. The
    // socket's buffers fill, and the collector's sends wait: the aggregator's memory stays bounded
    // (docs/scale.md#back-pressure) and nothing is lost. Looked at again every ms.
    if (stream_.ingest().Congested()) {
      if (!paused_) {
        paused_ = true;
        stats_.read_pauses++;
      }
      pause_timer_.expires_after(std::chrono::milliseconds(1));
      pause_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (!ec && !self->finished_) {
          self->ReadHeader();
        }
      });
      return;
    }
    paused_ = false;
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                       if (ec) {
                         return self->Finish(ec == asio::error::eof ? "connection closed" : ec.message());
                       }
                       auto h = wire::DecodeHeader(self->header_);
                       if (!h.ok()) {
                         return self->Drop(h.status().message());
                       }
                       self->current_ = h.value();
                       self->payload_.resize(h->payload_len);
                       self->ReadPayload();
                     });
  }

  void ReadPayload() {
    asio::async_read(socket_, asio::buffer(payload_),
                     [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                       if (ec) {
                         return self->Finish("truncated frame: " + ec.message());
                       }
                       self->Handle();
                     });
  }

  void Handle() {
    if (current_.type == wire::FrameType::kClockPing) {
      return AnswerPing();
    }
    if (current_.type == wire::FrameType::kHangState) {
      return TakeHangState();
    }
    Status st = stream_.OnFrame(current_.type, payload_);
    if (!st.ok()) {
      return Drop(st.message());
    }
    if (stream_.said_bye()) {
      stats_.byes++;
      stats_.streaming--;
      bye_at_ = std::chrono::steady_clock::now();
      signal_bye_ = stream_.end_reason().starts_with("killed by signal");
      if (watch_ != nullptr) {
        watch_->RankEnded(stream_.rank(), this, /*bye=*/true, stream_.end_reason());
      }
      // The rank waits for the acknowledgement that its whole stream is on disk: the session stays
      // open (reading nothing more) until the ingest has flushed the bye, or the deadline passes.
      bye_deadline_ = std::chrono::steady_clock::now() + kByeAckDeadline;
      ScheduleBatchAcks();  // replaces the pending wait with one of kByeAckPoll
      return;
    }
    ReadHeader();
  }

  // Clock alignment for ranks without MPI: our steady clock is their reference. Answer at once;
  // the rank waits for the pong before its next ping.
  void AnswerPing() {
    uint64_t now = SteadyNowNs();
    auto ping = wire::DecodeClockPing(payload_);
    if (!stream_.accepted()) {
      return Drop("clock-ping before the hello");
    }
    if (!ping.ok()) {
      return Drop(ping.status().message());
    }
    std::vector<uint8_t> pong;
    wire::AppendClockPong(pong, wire::ClockPong{ping.value(), now});
    Write(std::move(pong));
    ReadHeader();
  }

  // A rank's answer to a hang-query (docs/wire-protocol.md): to the watchdog, which ignores one
  // that answers no query in flight. A malformed one drops this connection only.
  void TakeHangState() {
    if (!stream_.accepted()) {
      return Drop("hang-state before the hello");
    }
    auto state = wire::DecodeHangState(payload_);
    if (!state.ok()) {
      return Drop(state.status().message());
    }
    if (watch_ != nullptr) {
      watch_->Answer(stream_.rank(), std::move(state.value()));
    }
    ReadHeader();
  }

  // After the challenge, writes go out one at a time, in order (hello-ack, clock-pongs and batch
  // acks interleave).
  void Write(std::vector<uint8_t> frame) {
    writes_.push_back(std::move(frame));
    if (writes_.size() == 1) {
      WriteFront();
    }
  }

  void WriteFront() {
    asio::async_write(socket_, asio::buffer(writes_.front()),
                      [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                        self->writes_.pop_front();
                        if (ec) {
                          self->writes_.clear();
                          return self->Finish("cannot write to the rank: " + ec.message());
                        }
                        if (!self->writes_.empty()) {
                          return self->WriteFront();
                        }
                        if (self->close_after_writes_) {
                          self->Close();
                        }
                      });
  }

  // The delivery guarantee (docs/wire-protocol.md, batch-ack): tell the collector which batches
  // are on disk, so it can forget them; it resends the rest after a reconnect.
  void ScheduleBatchAcks() {
    ack_timer_.expires_after(stream_.said_bye() ? kByeAckPoll : kAckPeriod);
    ack_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->finished_) {
        return;
      }
      self->SendBatchAck();
    });
  }

  void SendBatchAck() {
    Ingest::Durable d = stream_.ingest().DurableOf(stream_.rank());
    // Never acknowledge more than this stream has carried: after a resume the durable count may
    // include batches the collector has not resent yet, which it still holds and will send.
    uint64_t batches = std::min(d.batches, stream_.next_batch());
    bool bye = stream_.said_bye() && d.bye;
    // A rank that sent its bye from a fatal-signal handler dies once acknowledged, and the launcher
    // then kills the other ranks at once (mpirun does): hold its ack until every open rank has
    // said bye, or kAckPeriod at most, so that they can deliver their own ends first.
    if (bye && signal_bye_ && stats_.streaming.load() > 0 && std::chrono::steady_clock::now() - bye_at_ < kAckPeriod) {
      bye = false;
    }
    if (batches > acked_ || bye) {
      acked_ = batches;
      std::vector<uint8_t> frame;
      wire::AppendBatchAck(frame, wire::BatchAck{batches, bye});
      Write(std::move(frame));
    }
    // A failed writer makes nothing durable any more: end the session at once, so that the rank,
    // waiting for its bye's acknowledgement, sees the connection close and spools what it holds
    // instead of waiting out COMMPROF_BYE_ACK_MS (and this session kByeAckDeadline).
    if (stream_.said_bye() && !bye && d.never) {
      return Finish("bye (not acknowledged: the writer failed)");
    }
    if (stream_.said_bye() && (bye || std::chrono::steady_clock::now() >= bye_deadline_)) {
      if (!bye) {
        COMMPROF_LOG_WARN("rank %u: its stream could not be flushed to disk within %lld s; not acknowledged",
                          stream_.rank(), static_cast<long long>(kByeAckDeadline.count()));
      }
      return Finish("bye");
    }
    ScheduleBatchAcks();
  }

  void Refuse(const std::string& why) {
    stats_.refused++;
    hello_timer_.cancel();
    LeaveBook();
    PeerLog().Log(LogLevel::kWarn, "refused", "refused connection from %s: %s; nothing from this peer is stored",
                  peer_.c_str(), why.c_str());
    std::vector<uint8_t> ack;
    wire::AppendHelloAck(ack, wire::HelloAck{false, why});
    close_after_writes_ = true;
    Write(std::move(ack));
  }

  void Drop(const std::string& why) {
    stats_.dropped++;
    if (stream_.accepted()) {
      COMMPROF_LOG_WARN("dropping connection of rank %u from %s: %s", stream_.rank(), peer_.c_str(), why.c_str());
    } else {
      PeerLog().Log(LogLevel::kWarn, "dropped", "dropping connection from %s: %s", peer_.c_str(), why.c_str());
    }
    Finish(why, /*corrupt=*/true);
  }

  void Finish(const std::string& reason, bool corrupt = false) {
    if (finished_) {
      return;
    }
    finished_ = true;
    if (stream_.accepted()) {
      if (!stream_.said_bye()) {
        COMMPROF_LOG_WARN("rank %u disconnected without a bye (%s)", stream_.rank(), reason.c_str());
      }
      stream_.End(reason, corrupt);
      stats_.ended++;
      if (watch_ != nullptr && !stream_.said_bye()) {
        watch_->RankEnded(stream_.rank(), this, /*bye=*/false, reason);
      }
    }
    ack_timer_.cancel();
    // What is queued (a final batch-ack) still goes out; the socket closes after it.
    if (writes_.empty()) {
      Close();
    } else {
      close_after_writes_ = true;
    }
  }

  void Close() {
    hello_timer_.cancel();
    ack_timer_.cancel();
    LeaveBook();
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    if (!closed_) {
      closed_ = true;
      stats_.connections--;
      if (stream_.accepted()) {
        stats_.open--;
        if (!stream_.said_bye()) {
          stats_.streaming--;
        }
      }
    }
  }

  tcp::socket socket_;
  asio::steady_timer hello_timer_;
  asio::steady_timer ack_timer_;
  asio::steady_timer pause_timer_;  // back-pressure: the next look at the writer's queue
  bool paused_ = false;
  RankStream stream_;
  ServerStats& stats_;
  const ServerLimits limits_;
  std::shared_ptr<PendingBook> book_;
  std::shared_ptr<HangWatch> watch_;   // null without --hang-timeout
  std::shared_ptr<RelayBook> relays_;  // the server's: relays are handed there
  std::list<std::weak_ptr<Session>>::iterator in_book_;
  bool pending_ = false;
  std::chrono::steady_clock::time_point started_;
  std::string peer_;
  std::array<uint8_t, wire::kHeaderSize> header_{};
  wire::FrameHeader current_{};
  std::vector<uint8_t> payload_;
  std::vector<uint8_t> out_;  // the challenge (the only write before the frame loop)
  std::deque<std::vector<uint8_t>> writes_;
  bool close_after_writes_ = false;
  uint64_t acked_ = 0;
  std::chrono::steady_clock::time_point bye_deadline_{};
  std::chrono::steady_clock::time_point bye_at_{};
  bool signal_bye_ = false;  // the bye came from the rank's fatal-signal handler
  bool finished_ = false;
  bool closed_ = false;
};

Server::Server(asio::io_context& io, Ingest& ingest, StreamPolicy policy, const ServerLimits& limits,
               std::shared_ptr<HangWatch> hang_watch)
    : ingest_(ingest),
      policy_(std::move(policy)),
      limits_(limits),
      acceptor_(io),
      accept_timer_(io),
      hang_watch_(std::move(hang_watch)) {}

Result<std::unique_ptr<Server>> Server::Listen(asio::io_context& io, Ingest& ingest, StreamPolicy policy,
                                               const std::string& host, uint16_t port, const ServerLimits& limits,
                                               std::shared_ptr<HangWatch> hang_watch) {
  std::unique_ptr<Server> s(new Server(io, ingest, std::move(policy), limits, std::move(hang_watch)));
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) {
    return InvalidArgument("listen address '" + host + "' is not an IP address: " + ec.message());
  }
  tcp::endpoint ep(addr, port);
  s->acceptor_.open(ep.protocol(), ec);
  if (!ec) {
    s->acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  }
  if (!ec) {
    s->acceptor_.bind(ep, ec);
  }
  if (!ec) {
    s->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  }
  s->Accept();
  return s;
}

uint16_t Server::port() const {
  boost::system::error_code ec;
  auto ep = acceptor_.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void Server::Close() {
  boost::system::error_code ec;
  acceptor_.close(ec);
  accept_timer_.cancel();
  if (hang_watch_ != nullptr) {
    hang_watch_->Stop();
  }
  PeerLog().Flush();
}

void Server::Accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) {
      return;
    }
    if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space || ec == asio::error::no_memory ||
        ec.value() == ENFILE) {
      return PauseAccepting(ec);
    }
    if (accept_pause_ms_ != 0) {
      COMMPROF_LOG_WARN("accepting connections again after %llu failed accepts",
                        static_cast<unsigned long long>(accept_failures_));
      accept_pause_ms_ = 0;
      accept_failures_ = 0;
    }
    if (ec) {
      // Per-connection failures (the peer reset before we took it): nothing to wait for.
      PeerLog().Log(LogLevel::kWarn, "accept", "accept failed: %s", ec.message().c_str());
    } else if (Admit(socket)) {
      boost::system::error_code opt_ec;
      socket.set_option(tcp::no_delay(true), opt_ec);
      if (limits_.receive_buffer_bytes != 0) {
        socket.set_option(asio::socket_base::receive_buffer_size(static_cast<int>(limits_.receive_buffer_bytes)),
                          opt_ec);
      }
      auto session = std::make_shared<Session>(std::move(socket), ingest_, policy_, stats_, limits_, pending_,
                                               hang_watch_, relays_);
      if (router_) {
        session->RouteIncarnations(router_);
      }
      session->Start();
    }
    Accept();
  });
}

bool Server::Admit(tcp::socket& socket) {
  auto refuse = [&](const char* key, const std::string& why) {
    stats_.capped++;
    boost::system::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    std::string peer = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
    PeerLog().Log(LogLevel::kWarn, key, "closing connection from %s at once: %s", peer.c_str(), why.c_str());
    socket.close(ec);
    return false;
  };
  if (stats_.connections.load() >= limits_.max_connections) {
    return refuse("cap-total", std::to_string(limits_.max_connections) + " connections are open (the connection cap)");
  }
  while (!pending_->sessions.empty() && pending_->sessions.front().expired()) {
    pending_->sessions.pop_front();  // a session destroyed without closing (io shut down): not pending
  }
  if (pending_->sessions.size() >= limits_.max_pending) {
    auto oldest = pending_->sessions.front().lock();
    if (oldest != nullptr && oldest->AgeMs() >= limits_.evict_after_ms) {
      oldest->Evict();  // leaves the book
    } else {
      // Ranks starting together hit this: a collector connects again (and loses nothing), so say
      // so, or a user of a large job reads the line as a lost rank.
      return refuse("cap-pending", std::to_string(limits_.max_pending) +
                                       " connections are awaiting their hello (the pending cap); a commprof rank "
                                       "connects again by itself (or spools its events after its connect "
                                       "timeout), nothing of it is lost");
    }
  }
  return true;
}

void Server::PauseAccepting(const boost::system::error_code& ec) {
  ++accept_failures_;
  stats_.accept_pauses++;
  accept_pause_ms_ =
      accept_pause_ms_ == 0 ? limits_.accept_pause_ms : std::min(accept_pause_ms_ * 2, limits_.accept_pause_max_ms);
  PeerLog().Log(LogLevel::kWarn, "accept-pause", "cannot accept connections (%s): pausing accepts for %u ms",
                ec.message().c_str(), accept_pause_ms_);
  accept_timer_.expires_after(std::chrono::milliseconds(accept_pause_ms_));
  accept_timer_.async_wait([this](const boost::system::error_code& wait_ec) {
    if (!wait_ec && acceptor_.is_open()) {
      Accept();
    }
  });
}

}  // namespace commprof
