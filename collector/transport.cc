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
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/clock.h"
#include "core/launcher_env.h"
#include "core/log.h"
#include "core/relay_rendezvous.h"

namespace commprof {
namespace {

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(int fd, uint32_t send_timeout_ms = 0) : fd_(fd), send_timeout_ms_(send_timeout_ms) {}
  ~TcpTransport() override { ::close(fd_); }

  // Waits while the aggregator takes the bytes; with a send timeout, an aggregator that has not
  // taken them all by then (its writer far behind: docs/scale.md#back-pressure) is congested.
  Status Send(std::span<const uint8_t> bytes) override {
    const uint64_t deadline = SteadyNowNs() + uint64_t{send_timeout_ms_} * 1000000ull;
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          const uint64_t now = SteadyNowNs();
          if (send_timeout_ms_ != 0 && now >= deadline) {
            congested_ = true;
            return Unavailable("the aggregator did not take a batch within " + std::to_string(send_timeout_ms_) +
                               " ms (COMMPROF_SEND_TIMEOUT_MS): it is congested");
          }
          pollfd pfd{fd_, POLLOUT, 0};
          (void)::poll(&pfd, 1, send_timeout_ms_ == 0 ? -1 : static_cast<int>((deadline - now) / 1000000 + 1));
          continue;
        }
        return Unavailable(std::string("send to aggregator failed: ") + std::strerror(errno));
      }
      off += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  bool congested() const override { return congested_; }

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
  uint32_t send_timeout_ms_ = 0;  // 0: wait as long as it takes
  bool congested_ = false;
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

Result<std::unique_ptr<Transport>> ConnectToAggregator(const std::string& address, std::span<const uint8_t> hello_frame,
                                                       std::string_view secret, uint32_t timeout_ms,
                                                       uint32_t send_timeout_ms) {
  const uint64_t deadline = SteadyNowNs() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  std::unique_ptr<TcpTransport> transport;
  wire::FrameHeader h;
  std::vector<uint8_t> payload;
  // The aggregator speaks first: a challenge. A connection it closes before that hit its
  // connection caps (docs/wire-protocol.md): try again, backing off, while the timeout allows.
  for (uint32_t backoff_ms = 10;; backoff_ms = std::min(backoff_ms * 2, 500u)) {
    auto fd = ConnectTcp(address, deadline, "aggregator");
    if (!fd.ok()) {
      return fd.status();
    }
    transport = std::make_unique<TcpTransport>(fd.value(), send_timeout_ms);
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
  // An elastic restart's worker may get its predecessor's pid (a container): its incarnation keeps
  // the names apart.
  std::string path = dir + "/" + job + "-rank" + std::to_string(hello.rank) + "-pid" + std::to_string(hello.pid) +
                     (hello.incarnation > 0 ? "-inc" + std::to_string(hello.incarnation) : std::string()) + ".cpspool";
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

// The node (or simulated node) and the place on it that pick a rank's relay.
struct RelayPlace {
  std::string host_key;
  uint32_t local_index = 0;
};

// Under COMMPROF_FAKE_HOST (a testing aid) rank r is on simulated host h = item r, and its place
// is how many ranks before it share h; otherwise the node (Slurm's node name, else the host name)
// and the launcher's local rank.
RelayPlace PlaceOf(const Config& config, const wire::Hello& hello) {
  double h = 0;
  if (PerRankValue(config.fake_host, hello.rank, h) && h >= 0) {
    RelayPlace p{"simhost" + std::to_string(static_cast<uint64_t>(h)), 0};
    for (uint32_t r = 0; r < hello.rank; ++r) {
      double other = 0;
      if (PerRankValue(config.fake_host, r, other) && other == h) {
        ++p.local_index;
      }
    }
    return p;
  }
  // Slurm's node name tells its nodes apart even where they share a host name (virtual nodes).
  const char* node = std::getenv("SLURMD_NODENAME");
  return RelayPlace{node != nullptr && *node != '\0' ? node : hello.host, LauncherLocalRank()};
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string::npos) {
      j = text.size();
    }
    if (j > i) {
      out.push_back(text.substr(i, j - i));
    }
    i = j + 1;
  }
  return out;
}

class NetworkTransports final : public TransportFactory {
 public:
  explicit NetworkTransports(const Config& config)
      : config_(config),
        aggregator_(config.aggregator),
        secret_(config.secret),
        spool_dir_(config.spool_dir),
        timeout_ms_(config.connect_timeout_ms) {}

  Result<std::unique_ptr<Transport>> Connect(std::span<const uint8_t> hello_frame) override {
    if (aggregator_.empty()) {
      return Unavailable("no aggregator configured");
    }
    if (config_.relay_ranks != 0 && !relay_failed_) {
      auto t = ConnectToRelay(hello_frame);
      if (t.ok()) {
        return t;
      }
      // Relays only spread the load: the aggregator itself takes the rank (docs/scale.md#relays).
      COMMPROF_LOG_WARN("%s; connecting to the aggregator %s instead", t.status().message().c_str(),
                        aggregator_.c_str());
      relay_failed_ = true;
    }
    auto t = ConnectToAggregator(aggregator_, hello_frame, secret_, timeout_ms_, config_.send_timeout_ms);
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
  // The rank's node relay (started by the first rank of its group), then the usual handshake.
  Result<std::unique_ptr<Transport>> ConnectToRelay(std::span<const uint8_t> hello_frame) {
    if (hello_frame.size() < wire::kHeaderSize) {
      return InvalidArgument("no hello to pick a relay by");
    }
    auto hello = wire::DecodeHello(hello_frame.subspan(wire::kHeaderSize));
    if (!hello.ok()) {
      return hello.status();
    }
    RelayPlace place = PlaceOf(config_, hello.value());
    RelayRequest req;
    req.command = config_.relay_command;
    req.parent = aggregator_;
    req.shard_dir = config_.shard_dir;
    req.job_key = RelayJobKey(config_.job_id, secret_, aggregator_);
    req.host_key = place.host_key;
    req.group = RelayGroup(place.local_index, config_.relay_ranks);
    req.options = SplitWords(config_.relay_options);
    req.timeout_ms = timeout_ms_;
    auto address = FindOrStartRelay(req);
    if (!address.ok()) {
      return Unavailable("no relay for this node: " + address.status().message());
    }
    auto t = ConnectToAggregator(address.value(), hello_frame, secret_, timeout_ms_, config_.send_timeout_ms);
    if (t.ok()) {
      COMMPROF_LOG_DEBUG("connected to relay %s (node %s, group %u)", address.value().c_str(), place.host_key.c_str(),
                         req.group);
      return t;
    }
    return Unavailable("cannot use the node's relay " + address.value() + ": " + t.status().message());
  }

  const Config config_;
  bool relay_failed_ = false;  // after one failure, straight to the aggregator
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
