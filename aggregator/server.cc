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

// How often a session tells its rank what is on disk (the ingest flushes every --flush-ms, and at
// once after a bye), and how long a rank's bye may wait for the file to take it.
constexpr auto kAckPeriod = std::chrono::milliseconds(100);
constexpr auto kByeAckDeadline = std::chrono::seconds(20);

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Ingest& ingest, const StreamPolicy& policy, ServerStats& stats)
      : socket_(std::move(socket)),
        hello_timer_(socket_.get_executor()),
        ack_timer_(socket_.get_executor()),
        ingest_(ingest),
        stream_(ingest, policy),
        stats_(stats) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void Start() {
    stats_.open++;
    // A peer must introduce itself promptly; a silent connection is closed.
    hello_timer_.expires_after(std::chrono::seconds(10));
    hello_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec && !self->stream_.accepted()) {
        self->Drop("no hello within 10 s");
      }
    });
    ReadHeader();
  }

 private:
  void ReadHeader() {
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
    bool was_accepted = stream_.accepted();
    Status st = stream_.OnFrame(current_.type, payload_);
    if (!st.ok()) {
      if (!was_accepted && current_.type == wire::FrameType::kHello) {
        return Refuse(st.message());
      }
      return Drop(st.message());
    }
    if (!was_accepted && stream_.accepted()) {
      hello_timer_.cancel();
      stats_.accepted++;
      COMMPROF_LOG_INFO("rank %u %s from %s (pid %u, host %s)", stream_.rank(),
                        stream_.resumed() ? "resumed its stream" : "connected", peer_.c_str(), stream_.hello().pid,
                        stream_.hello().host.c_str());
      std::vector<uint8_t> ack;
      wire::AppendHelloAck(ack, wire::HelloAck{true, ""});
      Write(std::move(ack));
      ScheduleBatchAcks();
      return ReadHeader();
    }
    if (stream_.said_bye()) {
      stats_.byes++;
      // The rank waits for the acknowledgement that its whole stream is on disk: the session stays
      // open (reading nothing more) until the ingest has flushed the bye, or the deadline passes.
      bye_deadline_ = std::chrono::steady_clock::now() + kByeAckDeadline;
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

  // Writes go out one at a time, in order (hello-ack, clock-pongs, batch acks interleave).
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
    ack_timer_.expires_after(kAckPeriod);
    ack_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->finished_) {
        return;
      }
      self->SendBatchAck();
    });
  }

  void SendBatchAck() {
    Ingest::Durable d = ingest_.DurableOf(stream_.rank());
    // Never acknowledge more than this stream has seen: after a resume, durable counts may include
    // batches the collector has not resent yet, which it still holds and will send.
    uint64_t batches = std::min(d.batches, stream_.next_batch());
    bool bye = stream_.said_bye() && d.bye;
    if (batches > acked_ || bye) {
      acked_ = batches;
      std::vector<uint8_t> frame;
      wire::AppendBatchAck(frame, wire::BatchAck{batches, bye});
      Write(std::move(frame));
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
    COMMPROF_LOG_WARN("refused connection from %s: %s; nothing from this peer is stored", peer_.c_str(), why.c_str());
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
      COMMPROF_LOG_WARN("dropping connection from %s: %s", peer_.c_str(), why.c_str());
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
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    if (!closed_) {
      closed_ = true;
      stats_.open--;
    }
  }

  tcp::socket socket_;
  asio::steady_timer hello_timer_;
  asio::steady_timer ack_timer_;
  Ingest& ingest_;
  RankStream stream_;
  ServerStats& stats_;
  std::string peer_;
  std::array<uint8_t, wire::kHeaderSize> header_{};
  wire::FrameHeader current_{};
  std::vector<uint8_t> payload_;
  std::deque<std::vector<uint8_t>> writes_;
  bool close_after_writes_ = false;
  uint64_t acked_ = 0;
  std::chrono::steady_clock::time_point bye_deadline_{};
  bool finished_ = false;
  bool closed_ = false;
};

}  // namespace

Server::Server(asio::io_context& io, Ingest& ingest, StreamPolicy policy)
    : ingest_(ingest), policy_(std::move(policy)), acceptor_(io) {}

Result<std::unique_ptr<Server>> Server::Listen(asio::io_context& io, Ingest& ingest, StreamPolicy policy,
                                               const std::string& host, uint16_t port) {
  std::unique_ptr<Server> s(new Server(io, ingest, std::move(policy)));
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
}

void Server::Accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) {
      return;
    }
    if (!ec) {
      boost::system::error_code opt_ec;
      socket.set_option(tcp::no_delay(true), opt_ec);
      std::make_shared<Session>(std::move(socket), ingest_, policy_, stats_)->Start();
    } else {
      COMMPROF_LOG_WARN("accept failed: %s", ec.message().c_str());
    }
    Accept();
  });
}

}  // namespace commprof
