#include "collector/transport.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/clock.h"
#include "core/log.h"

namespace commprof {
namespace {

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(int fd) : fd_(fd) {}
  ~TcpTransport() override { ::close(fd_); }

  Status Send(std::span<const uint8_t> bytes) override {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        return Unavailable(std::string("send to aggregator failed: ") + std::strerror(errno));
      }
      off += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Status Receive(wire::FrameHeader& header, std::vector<uint8_t>& payload, uint32_t timeout_ms) override {
    return ReceiveUntil(header, payload, SteadyNowNs() + static_cast<uint64_t>(timeout_ms) * 1000000ull);
  }

  // One whole frame before `deadline` (steady clock), through the inbox like every other read.
  Status ReceiveUntil(wire::FrameHeader& header, std::vector<uint8_t>& payload, uint64_t deadline) {
    for (;;) {
      auto got = TakeFrame(header, payload);
      if (!got.ok()) {
        return got.status();
      }
      if (got.value()) {
        return Status::Ok();
      }
      uint64_t now = SteadyNowNs();
      if (now >= deadline) {
        return Unavailable(inbox_.empty() ? "no frame from the aggregator in time"
                                          : "truncated frame from the aggregator");
      }
      pollfd pfd{fd_, POLLIN, 0};
      int pr = ::poll(&pfd, 1, static_cast<int>((deadline - now) / 1000000 + 1));
      if (pr < 0 && errno != EINTR) {
        return Unavailable(std::string("poll on the aggregator connection failed: ") + std::strerror(errno));
      }
      if (pr > 0) {
        Status st = Fill();
        if (!st.ok()) {
          // The peer's last frames (a final batch-ack before it closed) still count.
          auto last = TakeFrame(header, payload);
          return last.ok() && last.value() ? Status::Ok() : st;
        }
      }
    }
  }

  Result<bool> TryReceive(wire::FrameHeader& header, std::vector<uint8_t>& payload) override {
    auto got = TakeFrame(header, payload);
    if (!got.ok() || got.value()) {
      return got;
    }
    Status st = Fill();
    got = TakeFrame(header, payload);
    if (!st.ok() && got.ok() && !got.value()) {
      return st;  // frames received before the end are handed out first
    }
    return got;
  }

  bool acknowledges() const override { return true; }
  // The first frame of a connection; `closed` tells a connection closed at once (the aggregator's
  // connection caps) from one that stays silent.
  Status ReceiveFirst(wire::FrameHeader& header, std::vector<uint8_t>& payload, uint64_t deadline_ns, bool& closed) {
    Status st = ReceiveUntil(header, payload, deadline_ns);
    closed = !st.ok() && closed_;
    return st;
  }
  const char* name() const override { return "tcp"; }

 private:
  // Reads what the socket holds without blocking; an error or EOF is the connection's end.
  Status Fill() {
    uint8_t buf[4096];
    for (;;) {
      ssize_t got = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (got > 0) {
        inbox_.insert(inbox_.end(), buf, buf + got);
        continue;
      }
      if (got == 0) {
        closed_ = true;
        return Unavailable("the aggregator closed the connection");
      }
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Status::Ok();
      }
      closed_ = errno == ECONNRESET;
      return Unavailable(std::string("receive from aggregator failed: ") + std::strerror(errno));
    }
  }

  // Moves the first whole frame out of the inbox: false when it does not hold one yet.
  Result<bool> TakeFrame(wire::FrameHeader& header, std::vector<uint8_t>& payload) {
    if (inbox_.size() < wire::kHeaderSize) {
      return false;
    }
    auto h = wire::DecodeHeader(std::span<const uint8_t>(inbox_.data(), wire::kHeaderSize));
    if (!h.ok()) {
      return h.status();
    }
    size_t total = wire::kHeaderSize + h->payload_len;
    if (inbox_.size() < total) {
      return false;
    }
    header = h.value();
    payload.assign(inbox_.begin() + wire::kHeaderSize, inbox_.begin() + static_cast<std::ptrdiff_t>(total));
    inbox_.erase(inbox_.begin(), inbox_.begin() + static_cast<std::ptrdiff_t>(total));
    return true;
  }

  int fd_;
  std::vector<uint8_t> inbox_;
  bool closed_ = false;  // the peer closed or reset the connection (not a timeout)
};

class SpoolTransport final : public Transport {
 public:
  SpoolTransport(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}
  ~SpoolTransport() override { std::fclose(f_); }

  Status Send(std::span<const uint8_t> bytes) override {
    if (std::fwrite(bytes.data(), 1, bytes.size(), f_) != bytes.size() || std::fflush(f_) != 0) {
      return IoError("write to spool file " + path_ + " failed: " + std::strerror(errno));
    }
    return Status::Ok();
  }
  Status Receive(wire::FrameHeader&, std::vector<uint8_t>&, uint32_t) override {
    return Unavailable("a spool file cannot answer");
  }
  const char* name() const override { return "spool"; }

 private:
  std::FILE* f_;
  std::string path_;
};

Status MakeDirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      // 0700: spool files hold the rank's events and a hello signed with the job secret.
      if (!cur.empty() && ::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) {
        return IoError("cannot create spool directory " + cur + ": " + std::strerror(errno));
      }
    }
    if (i < dir.size()) {
      cur.push_back(dir[i]);
    }
  }
  return Status::Ok();
}

}  // namespace

bool SplitHostPort(const std::string& address, std::string& host, std::string& port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return false;
  }
  host = address.substr(0, colon);
  port = address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return true;
}

namespace {

// A connected, blocking TCP socket to host:port by `deadline` (steady ns).
Result<int> ConnectSocket(const std::string& address, uint64_t deadline) {
  std::string host, port;
  if (!SplitHostPort(address, host, port)) {
    return InvalidArgument("COMMPROF_AGGREGATOR='" + address + "' is not host:port");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Unavailable("cannot resolve aggregator " + address + ": " + gai_strerror(rc));
  }
  int fd = -1;
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    int s = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (s < 0) {
      continue;
    }
    int rc = ::connect(s, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd pfd{s, POLLOUT, 0};
      uint64_t now = SteadyNowNs();
      int wait_ms = now < deadline ? static_cast<int>((deadline - now) / 1000000 + 1) : 0;
      if (::poll(&pfd, 1, wait_ms) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      fd = s;
    } else {
      last_error = std::strerror(errno);
      ::close(s);
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return Unavailable("cannot connect to aggregator " + address + ": " + last_error);
  }
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

Result<std::unique_ptr<Transport>> ConnectToAggregator(const std::string& address, std::span<const uint8_t> hello_frame,
                                                       std::string_view secret, uint32_t timeout_ms) {
  const uint64_t deadline = SteadyNowNs() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  std::unique_ptr<TcpTransport> transport;
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  // The aggregator speaks first: a challenge. A connection it closes before that hit its
  // connection caps (docs/wire-protocol.md): try again, backing off, while the timeout allows.
  for (uint32_t backoff_ms = 10;; backoff_ms = std::min(backoff_ms * 2, 500u)) {
    auto fd = ConnectSocket(address, deadline);
    if (!fd.ok()) {
      return fd.status();
    }
    transport = std::make_unique<TcpTransport>(fd.value());
    bool closed = false;
    Status st = transport->ReceiveFirst(h, payload, deadline, closed);
    if (st.ok()) {
      break;
    }
    transport.reset();
    if (!closed || SteadyNowNs() + backoff_ms * 1000000ull >= deadline) {
      return Unavailable("aggregator " + address + " sent no challenge: " + st.message());
    }
    ::usleep(backoff_ms * 1000);
  }
  if (h.type != wire::FrameType::kChallenge) {
    return Corrupt(std::string("aggregator ") + address + " opened with a " + wire::FrameTypeName(h.type) +
                   " frame, not a challenge (an aggregator of an older commprof?)");
  }
  auto nonce = wire::DecodeChallenge(payload);
  if (!nonce.ok()) {
    return nonce.status();
  }
  std::vector<uint8_t> signed_hello;
  COMMPROF_RETURN_IF_ERROR(wire::ResignHello(hello_frame, secret, nonce.value(), signed_hello));
  COMMPROF_RETURN_IF_ERROR(transport->Send(signed_hello));

  // The aggregator answers with an ack; a refusal (bad proof, duplicate rank) is final.
  if (Status st = transport->Receive(h, payload, timeout_ms); !st.ok()) {
    return Unavailable("aggregator " + address + " did not acknowledge the hello: " + st.message());
  }
  if (h.type != wire::FrameType::kHelloAck) {
    return Corrupt("aggregator answered the hello with a non-ack frame");
  }
  auto ack = wire::DecodeHelloAck(payload);
  if (!ack.ok()) {
    return ack.status();
  }
  if (!ack->accepted) {
    return Unauthenticated("aggregator refused this rank: " + ack->reason);
  }
  return std::unique_ptr<Transport>(std::move(transport));
}

Result<std::unique_ptr<Transport>> OpenSpool(const std::string& dir, const wire::Hello& hello,
                                             std::span<const uint8_t> hello_frame, std::string* path_out) {
  COMMPROF_RETURN_IF_ERROR(MakeDirs(dir));
  std::string job = hello.job_id.empty() ? std::string("nojob") : hello.job_id;
  std::string path =
      dir + "/" + job + "-rank" + std::to_string(hello.rank) + "-pid" + std::to_string(hello.pid) + ".cpspool";
  // 0600 (and fchmod for a file left by an earlier run): a spool file holds the rank's events and
  // a hello proving the job secret.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return IoError("cannot create spool file " + path + ": " + std::strerror(errno));
  }
  if (::fchmod(fd, 0600) != 0) {
    int err = errno;
    ::close(fd);
    return IoError("cannot make spool file " + path + " private (mode 0600): " + std::strerror(err));
  }
  std::FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) {
    int err = errno;
    ::close(fd);
    return IoError("cannot create spool file " + path + ": " + std::strerror(err));
  }
  auto spool = std::make_unique<SpoolTransport>(f, path);
  COMMPROF_RETURN_IF_ERROR(spool->Send(hello_frame));
  if (path_out != nullptr) {
    *path_out = path;
  }
  return std::unique_ptr<Transport>(std::move(spool));
}

namespace {

class NetworkTransports final : public TransportFactory {
 public:
  explicit NetworkTransports(const Config& config)
      : aggregator_(config.aggregator),
        secret_(config.secret),
        spool_dir_(config.spool_dir),
        timeout_ms_(config.connect_timeout_ms) {}

  Result<std::unique_ptr<Transport>> Connect(std::span<const uint8_t> hello_frame) override {
    if (aggregator_.empty()) {
      return Unavailable("no aggregator configured");
    }
    auto t = ConnectToAggregator(aggregator_, hello_frame, secret_, timeout_ms_);
    if (t.ok()) {
      COMMPROF_LOG_DEBUG("connected to aggregator %s", aggregator_.c_str());
    }
    return t;
  }
  Result<std::unique_ptr<Transport>> OpenSpool(const wire::Hello& hello, std::span<const uint8_t> hello_frame,
                                               std::string* path_out) override {
    return commprof::OpenSpool(spool_dir_, hello, hello_frame, path_out);
  }

 private:
  const std::string aggregator_;
  const std::string secret_;  // signs each connection's challenge (the hello frame's own proof is the spool one)
  const std::string spool_dir_;
  const uint32_t timeout_ms_;
};

}  // namespace

std::unique_ptr<TransportFactory> MakeNetworkTransports(const Config& config) {
  return std::make_unique<NetworkTransports>(config);
}

}  // namespace commprof
