#include "core/tcp_connect.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "core/clock.h"

namespace commprof {

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

Result<int> ConnectTcp(const std::string& address, uint64_t deadline, const char* what) {
  std::string host, port;
  if (!SplitHostPort(address, host, port)) {
    return InvalidArgument(std::string(what) + " address '" + address + "' is not host:port");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Unavailable(std::string("cannot resolve ") + what + " " + address + ": " + gai_strerror(rc));
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
    return Unavailable(std::string("cannot connect to ") + what + " " + address + ": " + last_error);
  }
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool SendAll(int fd, std::span<const uint8_t> bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

namespace {

bool RecvAll(int fd, uint8_t* p, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t got = ::recv(fd, p + off, n - off, 0);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return false;
    }
    off += static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

Status ReadFrame(int fd, wire::FrameHeader& header, std::vector<uint8_t>& payload) {
  std::array<uint8_t, wire::kHeaderSize> h{};
  if (!RecvAll(fd, h.data(), h.size())) {
    return Unavailable("the peer closed the connection");
  }
  auto decoded = wire::DecodeHeader(h);
  if (!decoded.ok()) {
    return decoded.status();
  }
  header = decoded.value();
  payload.resize(header.payload_len);
  if (!RecvAll(fd, payload.data(), payload.size())) {
    return Unavailable("the peer closed the connection inside a frame");
  }
  return Status::Ok();
}

}  // namespace commprof
