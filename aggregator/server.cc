#include "aggregator/server.h"

#include <array>
#include <vector>

#include "core/clock.h"
#include "core/log.h"

namespace commprof {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Ingest& ingest, const StreamPolicy& policy, ServerStats& stats)
      : socket_(std::move(socket)), hello_timer_(socket_.get_executor()), stream_(ingest, policy), stats_(stats) {
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
      COMMPROF_LOG_INFO("rank %u connected from %s (pid %u, host %s)", stream_.rank(), peer_.c_str(),
                        stream_.hello().pid, stream_.hello().host.c_str());
      wire::HelloAck ack{true, ""};
      return SendAckThen(ack, false);
    }
    if (stream_.said_bye()) {
      stats_.byes++;
      return Finish("bye");
    }
    ReadHeader();
  }

  // Clock alignment for ranks without MPI: our steady clock is their reference. Answer at once;
  // the rank waits for the pong before its next ping, so writes never overlap.
  void AnswerPing() {
    uint64_t now = SteadyNowNs();
    auto ping = wire::DecodeClockPing(payload_);
    if (!stream_.accepted()) {
      return Drop("clock-ping before the hello");
    }
    if (!ping.ok()) {
      return Drop(ping.status().message());
    }
    out_.clear();
    wire::AppendClockPong(out_, wire::ClockPong{ping.value(), now});
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                        if (ec) {
                          return self->Finish("cannot send clock-pong: " + ec.message());
                        }
                        self->ReadHeader();
                      });
  }

  void SendAckThen(const wire::HelloAck& ack, bool close_after) {
    out_.clear();
    wire::AppendHelloAck(out_, ack);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this(), close_after](const boost::system::error_code& ec, size_t) {
                        if (close_after) {
                          return self->Close();
                        }
                        if (ec) {
                          return self->Finish("cannot send hello-ack: " + ec.message());
                        }
                        self->ReadHeader();
                      });
  }

  void Refuse(const std::string& why) {
    stats_.refused++;
    hello_timer_.cancel();
    COMMPROF_LOG_WARN("refused connection from %s: %s; nothing from this peer is stored", peer_.c_str(), why.c_str());
    SendAckThen(wire::HelloAck{false, why}, true);
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
    Close();
  }

  void Close() {
    hello_timer_.cancel();
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
  RankStream stream_;
  ServerStats& stats_;
  std::string peer_;
  std::array<uint8_t, wire::kHeaderSize> header_{};
  wire::FrameHeader current_{};
  std::vector<uint8_t> payload_;
  std::vector<uint8_t> out_;
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
