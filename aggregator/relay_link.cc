#include "aggregator/relay_link.h"

#include "core/log.h"

namespace commprof {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

RelayLink::RelayLink(tcp::socket socket, wire::RelayHello hello, std::string peer) : socket_(std::move(socket)) {
  hello.proof = {};
  record_.hello = std::move(hello);
  record_.peer = std::move(peer);
}

RelayRecord RelayLink::record() const {
  std::lock_guard<std::mutex> lock(mu_);
  return record_;
}

void RelayLink::Start() {
  COMMPROF_LOG_INFO("relay on %s (pid %u) connected from %s; shard %s", record_.hello.host.c_str(), record_.hello.pid,
                    record_.peer.c_str(), record_.hello.shard.c_str());
  std::vector<uint8_t> ack;
  wire::AppendHelloAck(ack, wire::HelloAck{true, ""});
  Write(std::move(ack));
  ReadHeader();
}

void RelayLink::SendFinish(uint32_t grace_ms) {
  if (finished_.load()) {
    return;
  }
  std::vector<uint8_t> frame;
  wire::AppendRelayFinish(frame, wire::RelayFinish{grace_ms});
  Write(std::move(frame));
}

void RelayLink::Abandon(const std::string& why) { End(why); }

void RelayLink::ReadHeader() {
  asio::async_read(socket_, asio::buffer(header_),
                   [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                     if (ec) {
                       return self->End(ec == asio::error::eof ? "connection closed" : ec.message());
                     }
                     auto h = wire::DecodeHeader(self->header_);
                     if (!h.ok()) {
                       return self->End(h.status().message());
                     }
                     self->current_ = h.value();
                     self->payload_.resize(h->payload_len);
                     asio::async_read(self->socket_, asio::buffer(self->payload_),
                                      [self](const boost::system::error_code& ec2, size_t) {
                                        if (ec2) {
                                          return self->End("truncated frame: " + ec2.message());
                                        }
                                        self->Handle();
                                      });
                   });
}

void RelayLink::Handle() {
  if (current_.type == wire::FrameType::kRelayProgress) {
    auto p = wire::DecodeRelayProgress(payload_);
    if (!p.ok()) {
      return End(p.status().message());
    }
    ranks_done_.store(p->ranks_done);  // what `aggregate --expect` counts; the parent needs nothing else
    return ReadHeader();
  }
  if (current_.type == wire::FrameType::kRelayDone) {
    auto d = wire::DecodeRelayDone(payload_);
    if (!d.ok()) {
      return End(d.status().message());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      record_.done = true;
      record_.result = std::move(d.value());
    }
    ranks_done_.store(static_cast<uint32_t>(record_.result.ranks.size()));
    return End("done");
  }
  End(std::string("a ") + wire::FrameTypeName(current_.type) + " frame on a relay's control connection");
}

void RelayLink::Write(std::vector<uint8_t> frame) {
  writes_.push_back(std::move(frame));
  if (writes_.size() == 1) {
    WriteFront();
  }
}

void RelayLink::WriteFront() {
  asio::async_write(socket_, asio::buffer(writes_.front()),
                    [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                      self->writes_.pop_front();
                      if (ec) {
                        self->writes_.clear();
                        return self->End("cannot write to the relay: " + ec.message());
                      }
                      if (!self->writes_.empty()) {
                        self->WriteFront();
                      }
                    });
}

void RelayLink::End(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (record_.closed) {
      return;
    }
    record_.closed = true;
    record_.end_reason = why;
    if (!record_.done) {
      COMMPROF_LOG_WARN("relay on %s (pid %u): control connection ended before its shard was finished: %s",
                        record_.hello.host.c_str(), record_.hello.pid, why.c_str());
    }
  }
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  finished_.store(true);
}

void RelayBook::Add(std::shared_ptr<RelayLink> link) {
  std::lock_guard<std::mutex> lock(mu_);
  links_.push_back(std::move(link));
}

std::vector<std::shared_ptr<RelayLink>> RelayBook::links() const {
  std::lock_guard<std::mutex> lock(mu_);
  return links_;
}

}  // namespace commprof
