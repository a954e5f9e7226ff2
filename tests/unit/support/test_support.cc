#include "support/test_support.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "aggregator/hdf5/hdf5_writer.h"

namespace commprof::test_support {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

bool WaitFor(const std::function<bool()>& done, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TcpClient::TcpClient(uint16_t port, bool read_challenge) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port << ": " << std::strerror(errno);
    Close();
    return;
  }
  timeval tv{5, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (read_challenge) {
    auto f = ReadFrame();
    if (f.has_value() && f->first == wire::FrameType::kChallenge) {
      auto n = wire::DecodeChallenge(f->second);
      if (n.ok()) challenge_ = n.value();
    }
  }
}

bool TcpClient::Send(const Bytes& b) {
  size_t off = 0;
  while (off < b.size()) {
    ssize_t n = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool TcpClient::ReadExactly(uint8_t* p, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t got = ::recv(fd_, p + off, n - off, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    off += static_cast<size_t>(got);
  }
  return true;
}

std::optional<std::pair<wire::FrameType, Bytes>> TcpClient::ReadFrame() {
  uint8_t header[wire::kHeaderSize];
  if (!ReadExactly(header, sizeof header)) return std::nullopt;
  auto h = wire::DecodeHeader(header);
  if (!h.ok()) return std::nullopt;
  Bytes payload(h->payload_len);
  if (!ReadExactly(payload.data(), payload.size())) return std::nullopt;
  return std::make_pair(h->type, std::move(payload));
}

std::optional<wire::HelloAck> TcpClient::ReadAck() {
  uint8_t header[wire::kHeaderSize];
  if (!ReadExactly(header, sizeof header)) return std::nullopt;
  auto h = wire::DecodeHeader(header);
  if (!h.ok() || h->type != wire::FrameType::kHelloAck) return std::nullopt;
  Bytes payload(h->payload_len);
  if (!ReadExactly(payload.data(), payload.size())) return std::nullopt;
  auto ack = wire::DecodeHelloAck(payload);
  if (!ack.ok()) return std::nullopt;
  return ack.value();
}

bool TcpClient::WaitClosedByPeer() {
  uint8_t buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno != EAGAIN && errno != EWOULDBLOCK;  // a reset counts as closed, a timeout not
    }
  }
}

bool TcpClient::WaitClosedByPeerWithoutAnswer() {
  uint8_t buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n > 0) return false;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

void TcpClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::vector<commprof_event> ReadEvents(const ProfileReader& r, uint32_t rank, size_t* chunks) {
  std::vector<commprof_event> all;
  size_t n = 0;
  Status st = r.ForEachEventChunk(rank, [&](std::span<const commprof_event> c) {
    ++n;
    all.insert(all.end(), c.begin(), c.end());
  });
  EXPECT_TRUE(st.ok()) << st.message();
  if (chunks != nullptr) *chunks = n;
  return all;
}

void ExpectEventEq(const commprof_event& a, const commprof_event& b, size_t index) {
  SCOPED_TRACE("event " + std::to_string(index));
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.comm_id, b.comm_id);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.correlation, b.correlation);
  EXPECT_EQ(a.name_id, b.name_id);
  EXPECT_EQ(a.thread_id, b.thread_id);
  EXPECT_EQ(a.peer, b.peer);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.subtype, b.subtype);
  EXPECT_EQ(a.datatype, b.datatype);
  EXPECT_EQ(a.reduce_op, b.reduce_op);
  EXPECT_EQ(a.flags, b.flags);
}

Bytes PayloadOf(const Bytes& frame, wire::FrameType expected_type) {
  EXPECT_GE(frame.size(), wire::kHeaderSize);
  auto h = wire::DecodeHeader(std::span<const uint8_t>(frame.data(), wire::kHeaderSize));
  EXPECT_TRUE(h.ok()) << h.status().message();
  if (!h.ok()) return {};
  EXPECT_EQ(h->type, expected_type);
  EXPECT_EQ(h->payload_len, frame.size() - wire::kHeaderSize);
  return Bytes(frame.begin() + wire::kHeaderSize, frame.end());
}

std::unique_ptr<ProfileReader> WriteProfile(const std::string& path, const std::vector<RankData>& ranks,
                                            const ProfileOptions& options) {
  JobMeta meta;
  meta.job_id = options.job_id;
  meta.command_line = options.command_line;
  meta.world_size = static_cast<uint32_t>(ranks.size());
  meta.start_epoch_ns = options.start_epoch_ns;
  auto w = Hdf5Writer::Create(path, meta, WriterOptions{});
  EXPECT_TRUE(w.ok()) << w.status().message();
  if (!w.ok()) return nullptr;
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    RankDescription h;
    h.rank = r;
    h.world_size = static_cast<uint32_t>(ranks.size());
    h.pid = 100 + r;
    h.host = ranks[r].host.empty() ? "h" + std::to_string(r) : ranks[r].host;
    h.start_steady_ns = options.start_steady_ns;
    h.start_utc_ns = options.start_utc_ns;
    EXPECT_TRUE(w.value()->OpenRank(h).ok());
    if (!ranks[r].strings.empty()) {
      EXPECT_TRUE(w.value()->AppendStrings(r, StringBatch{0, ranks[r].strings}).ok());
    }
    EXPECT_TRUE(w.value()->AppendEvents(r, ranks[r].events).ok());
    if (!ranks[r].points.empty()) {
      ClockModel m(ranks[r].points);
      RankClock c;
      c.points = ranks[r].points;
      c.anchor_local_ns = 0;
      c.offset_ns = m.OffsetAt(0);
      c.drift_ppm = m.DriftPpm();
      c.error_bound_ns = m.ErrorBoundNs();
      c.method = r == 0 ? "mpi-reference" : "mpi-pingpong";
      EXPECT_TRUE(w.value()->SetClock(r, c).ok());
    }
    EXPECT_TRUE(w.value()->CloseRank(r, RankEnd::kComplete, options.counters, 0, "bye").ok());
  }
  Status fin = w.value()->Finalize();
  EXPECT_TRUE(fin.ok()) << fin.message();
  auto rd = ProfileReader::Open(path);
  EXPECT_TRUE(rd.ok()) << rd.status().message();
  return rd.ok() ? std::move(rd.value()) : nullptr;
}

namespace events {

commprof_event Collective(uint8_t op, uint64_t seq, uint64_t start, uint64_t end, const CollectiveFields& f) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_COLLECTIVE;
  e.subtype = op;
  e.comm_id = f.comm;
  e.seq = seq;
  e.start_ns = start;
  e.end_ns = end;
  e.peer = f.root;
  e.flags = f.flags;
  e.bytes = f.bytes;
  e.name_id = f.name;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

commprof_event NcclCollective(uint8_t op, uint64_t seq, uint64_t start, uint64_t end, uint64_t comm_hash,
                              uint64_t bytes) {
  commprof_event e = Collective(op, seq, start, end, {.comm = comm_hash, .bytes = bytes});
  e.kind = COMMPROF_KIND_NCCL_COLLECTIVE;
  e.device = 0;
  return e;
}

commprof_event P2p(uint8_t op, uint64_t start, uint64_t end, int32_t peer, uint32_t tag, uint64_t bytes, uint64_t comm,
                   uint16_t flags, uint32_t thread) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_P2P;
  e.subtype = op;
  e.start_ns = start;
  e.end_ns = end;
  e.peer = peer;
  e.correlation = tag;
  e.bytes = bytes;
  e.comm_id = comm;
  e.flags = flags;
  e.thread_id = thread;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

commprof_event Send(uint64_t start, uint64_t end, int32_t peer, uint32_t tag, uint64_t bytes, uint64_t comm) {
  return P2p(COMMPROF_OP_SEND, start, end, peer, tag, bytes, comm);
}

commprof_event Recv(uint64_t start, uint64_t end, int32_t peer, uint32_t tag, uint64_t bytes, uint64_t comm) {
  return P2p(COMMPROF_OP_RECV, start, end, peer, tag, bytes, comm);
}

commprof_event WaitCall(uint8_t op, uint64_t start, uint64_t end, uint32_t thread) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_WAIT;
  e.subtype = op;
  e.start_ns = start;
  e.end_ns = end;
  e.bytes = 1;
  e.peer = COMMPROF_NO_PEER;
  e.thread_id = thread;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

commprof_event CommCreated(uint64_t comm, int32_t rank_in_comm, uint64_t size) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_COMM;
  e.subtype = COMMPROF_OP_COMM_SPLIT;
  e.comm_id = comm;
  e.seq = COMMPROF_COMM_WORLD_ID;
  e.bytes = size;
  e.peer = rank_in_comm;
  e.start_ns = e.end_ns = 10;
  e.device = COMMPROF_HOST_DEVICE;
  return e;
}

}  // namespace events

}  // namespace commprof::test_support
