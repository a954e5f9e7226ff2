#include "core/wire.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace commprof::wire {
namespace {

// Little-endian primitives. The build targets little-endian hosts (checked in CMake), so the
// event records are copied as they are; scalar fields are still written byte by byte.
void PutU16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
void PutU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) {
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
}
void PutU64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
}
void PutRaw(std::vector<uint8_t>& out, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + n);
}
void PutStr(std::vector<uint8_t>& out, std::string_view s) {
  if (s.size() > kMaxStringLen) {
    s = s.substr(0, kMaxStringLen);
  }
  PutU32(out, static_cast<uint32_t>(s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

// Writes a header with a placeholder length; returns the offset of the payload.
size_t BeginFrame(std::vector<uint8_t>& out, FrameType type) {
  PutU32(out, kMagic);
  PutU16(out, kVersion);
  PutU16(out, static_cast<uint16_t>(type));
  PutU32(out, 0);
  PutU32(out, 0);
  return out.size();
}
void EndFrame(std::vector<uint8_t>& out, size_t payload_start) {
  uint32_t len = static_cast<uint32_t>(out.size() - payload_start);
  for (int i = 0; i < 4; ++i) {
    out[payload_start - 8 + i] = static_cast<uint8_t>(len >> (8 * i));
  }
}

// Bounds-checked cursor over a payload. Every getter fails (and stays failed) rather than read
// past the end; the first failure's field name goes into the error.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const char* frame) : b_(bytes), frame_(frame) {}

  bool U8(uint8_t& v, const char* field) { return Raw(&v, 1, field); }
  bool U32(uint32_t& v, const char* field) {
    uint8_t t[4] = {};
    if (!Raw(t, 4, field)) {
      return false;
    }
    v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= static_cast<uint32_t>(t[i]) << (8 * i);
    }
    return true;
  }
  bool U64(uint64_t& v, const char* field) {
    uint8_t t[8] = {};
    if (!Raw(t, 8, field)) {
      return false;
    }
    v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<uint64_t>(t[i]) << (8 * i);
    }
    return true;
  }
  bool I64(int64_t& v, const char* field) {
    uint64_t u;
    if (!U64(u, field)) {
      return false;
    }
    v = static_cast<int64_t>(u);
    return true;
  }
  bool F64(double& v, const char* field) {
    uint64_t u;
    if (!U64(u, field)) {
      return false;
    }
    std::memcpy(&v, &u, sizeof v);
    return true;
  }
  bool Str(std::string& s, const char* field) {
    uint32_t n;
    if (!U32(n, field)) {
      return false;
    }
    if (n > kMaxStringLen) {
      return Fail(field, "string longer than the 4096-byte limit");
    }
    if (n > Remaining()) {
      return Fail(field, "string runs past the end of the frame");
    }
    s.assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  // The next n bytes in place (no copy): for a caller that copies and checks them in one pass.
  bool Take(size_t n, const uint8_t*& at, const char* field) {
    if (!err_.empty()) {
      return false;
    }
    if (n > Remaining()) {
      return Fail(field, "truncated");
    }
    at = b_.data() + pos_;
    pos_ += n;
    return true;
  }
  bool Raw(void* dst, size_t n, const char* field) {
    if (!err_.empty()) {
      return false;
    }
    if (n > Remaining()) {
      return Fail(field, "truncated");
    }
    if (n == 0) {
      return true;  // dst may be null (an empty vector's data()): memcpy must not see it
    }
    std::memcpy(dst, b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  // A count of items of `item_size` bytes must fit in what is left: stops absurd allocations.
  bool CheckCount(uint64_t count, size_t item_size, const char* field) {
    if (!err_.empty()) {
      return false;
    }
    if (count > Remaining() / item_size) {
      return Fail(field, "count exceeds the frame's remaining bytes");
    }
    return true;
  }
  bool Fail(const char* field, const char* why) {
    if (err_.empty()) {
      err_ = std::string(frame_) + " frame, field '" + field + "': " + why;
    }
    return false;
  }
  size_t Remaining() const { return b_.size() - pos_; }
  size_t pos() const { return pos_; }
  Status Finish() {
    if (err_.empty() && Remaining() != 0) {
      Fail("(end)", "trailing bytes after the last field");
    }
    return err_.empty() ? Status::Ok() : Corrupt(err_);
  }

 private:
  std::span<const uint8_t> b_;
  const char* frame_;
  size_t pos_ = 0;
  std::string err_;
};

// SHA-256 (FIPS 180-4), the building block of HmacSha256 below. Self-contained on purpose: see
// HmacSha256 in wire.h. Checked against the FIPS and RFC 4231 vectors and OpenSSL in wire_test.
class Sha256 {
 public:
  void Update(const uint8_t* p, size_t n) {
    total_ += n;
    while (n > 0) {
      size_t take = std::min(n, sizeof buf_ - used_);
      std::memcpy(buf_ + used_, p, take);
      used_ += take;
      p += take;
      n -= take;
      if (used_ == sizeof buf_) {
        Block(buf_);
        used_ = 0;
      }
    }
  }
  std::array<uint8_t, 32> Final() {
    const uint64_t bits = total_ * 8;
    const uint8_t pad = 0x80;
    Update(&pad, 1);
    const uint8_t zero = 0;
    while (used_ != 56) {
      Update(&zero, 1);
    }
    uint8_t len[8];
    for (size_t i = 0; i < 8; ++i) {
      len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    }
    Update(len, 8);
    std::array<uint8_t, 32> out{};
    for (size_t i = 0; i < 8; ++i) {
      for (size_t j = 0; j < 4; ++j) {
        out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
      }
    }
    return out;
  }

 private:
  static uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void Block(const uint8_t* p) {
    static constexpr uint32_t kK[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (size_t i = 0; i < 16; ++i) {
      w[i] = (static_cast<uint32_t>(p[4 * i]) << 24) | (static_cast<uint32_t>(p[4 * i + 1]) << 16) |
             (static_cast<uint32_t>(p[4 * i + 2]) << 8) | static_cast<uint32_t>(p[4 * i + 3]);
    }
    for (size_t i = 16; i < 64; ++i) {
      uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (size_t i = 0; i < 64; ++i) {
      uint32_t s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + kK[i] + w[i];
      uint32_t s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t buf_[64] = {};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

// Constant time in the bytes compared (a proof check must not leak how many bytes matched).
bool EqualConstantTime(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  }
  return diff == 0;
}

void AppendHelloBody(std::vector<uint8_t>& out, const Hello& h) {
  PutU32(out, h.rank);
  PutU32(out, h.world_size);
  PutU32(out, h.pid);
  PutU64(out, h.start_steady_ns);
  PutU64(out, h.start_utc_ns);
  PutStr(out, h.host);
  PutStr(out, h.job_id);
  if (h.incarnation > 0) {  // the first incarnation's hello is the same bytes as before the field existed
    PutU32(out, h.incarnation);
  }
}

}  // namespace

std::array<uint8_t, kProofSize> HmacSha256(std::string_view key, std::span<const uint8_t> data,
                                           std::span<const uint8_t> prefix) {
  constexpr size_t kBlock = 64;
  uint8_t k0[kBlock] = {};
  if (key.size() > kBlock) {
    Sha256 kh;
    kh.Update(reinterpret_cast<const uint8_t*>(key.data()), key.size());
    auto d = kh.Final();
    std::memcpy(k0, d.data(), d.size());
  } else if (!key.empty()) {
    std::memcpy(k0, key.data(), key.size());
  }
  uint8_t ipad[kBlock], opad[kBlock];
  for (size_t i = 0; i < kBlock; ++i) {
    ipad[i] = static_cast<uint8_t>(k0[i] ^ 0x36);
    opad[i] = static_cast<uint8_t>(k0[i] ^ 0x5c);
  }
  Sha256 inner;
  inner.Update(ipad, kBlock);
  inner.Update(prefix.data(), prefix.size());
  inner.Update(data.data(), data.size());
  auto inner_digest = inner.Final();
  Sha256 outer;
  outer.Update(opad, kBlock);
  outer.Update(inner_digest.data(), inner_digest.size());
  return outer.Final();
}

void AppendHello(std::vector<uint8_t>& out, const Hello& hello, std::string_view secret) {
  size_t start = BeginFrame(out, FrameType::kHello);
  AppendHelloBody(out, hello);
  auto proof = HmacSha256(secret, std::span<const uint8_t>(out.data() + start, out.size() - start));
  out.insert(out.end(), proof.begin(), proof.end());
  EndFrame(out, start);
}

void AppendHello(std::vector<uint8_t>& out, const Hello& hello, std::string_view secret, const Nonce& nonce) {
  size_t start = BeginFrame(out, FrameType::kHello);
  AppendHelloBody(out, hello);
  auto proof = HmacSha256(secret, std::span<const uint8_t>(out.data() + start, out.size() - start), nonce);
  out.insert(out.end(), proof.begin(), proof.end());
  EndFrame(out, start);
}

Status ResignHello(std::span<const uint8_t> hello_frame, std::string_view secret, const Nonce& nonce,
                   std::vector<uint8_t>& out) {
  if (hello_frame.size() < kHeaderSize) {
    return InvalidArgument("hello frame shorter than a frame header");
  }
  auto h = DecodeHeader(hello_frame.first(kHeaderSize));
  if (!h.ok()) {
    return h.status();
  }
  if (h->type != FrameType::kHello || h->payload_len != hello_frame.size() - kHeaderSize ||
      h->payload_len < kProofSize) {
    return InvalidArgument("not one whole hello frame");
  }
  const size_t body = hello_frame.size() - kProofSize;
  out.insert(out.end(), hello_frame.begin(), hello_frame.begin() + static_cast<std::ptrdiff_t>(body));
  auto proof = HmacSha256(secret, hello_frame.subspan(kHeaderSize, body - kHeaderSize), nonce);
  out.insert(out.end(), proof.begin(), proof.end());
  return Status::Ok();
}

void AppendChallenge(std::vector<uint8_t>& out, const Nonce& nonce) {
  size_t start = BeginFrame(out, FrameType::kChallenge);
  out.insert(out.end(), nonce.begin(), nonce.end());
  EndFrame(out, start);
}

Result<Nonce> DecodeChallenge(std::span<const uint8_t> payload) {
  Cursor c(payload, "challenge");
  Nonce n{};
  c.Raw(n.data(), n.size(), "nonce");
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return n;
}

Result<Nonce> RandomNonce() {
  Nonce n{};
  size_t got = 0;
  while (got < n.size()) {
    ssize_t r = ::getrandom(n.data() + got, n.size() - got, 0);
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Unavailable(std::string("cannot draw a challenge nonce from getrandom(2): ") + std::strerror(errno));
    }
    got += static_cast<size_t>(r);
  }
  return n;
}

void AppendHelloAck(std::vector<uint8_t>& out, const HelloAck& ack) {
  size_t start = BeginFrame(out, FrameType::kHelloAck);
  out.push_back(ack.accepted ? 1 : 0);
  PutStr(out, ack.reason);
  EndFrame(out, start);
}

void AppendStrings(std::vector<uint8_t>& out, uint32_t first_id, std::span<const std::string_view> strings) {
  size_t start = BeginFrame(out, FrameType::kStrings);
  PutU32(out, first_id);
  PutU32(out, static_cast<uint32_t>(strings.size()));
  for (auto s : strings) {
    PutStr(out, s);
  }
  EndFrame(out, start);
}

void AppendEvents(std::vector<uint8_t>& out, uint64_t batch_seq, const commprof_event* events, size_t count) {
  size_t start = BeginFrame(out, FrameType::kEvents);
  PutU64(out, batch_seq);
  PutU32(out, static_cast<uint32_t>(count));
  const auto* p = reinterpret_cast<const uint8_t*>(events);
  out.insert(out.end(), p, p + count * sizeof(commprof_event));
  EndFrame(out, start);
}

void AppendClock(std::vector<uint8_t>& out, const Clock& c) {
  size_t start = BeginFrame(out, FrameType::kClock);
  PutU64(out, static_cast<uint64_t>(c.offset_ns));
  uint64_t drift_bits;
  std::memcpy(&drift_bits, &c.drift_ppm, sizeof drift_bits);
  PutU64(out, drift_bits);
  PutU64(out, static_cast<uint64_t>(c.error_bound_ns));
  PutU64(out, c.anchor_local_ns);
  PutStr(out, c.method);
  PutU32(out, static_cast<uint32_t>(c.points.size()));
  for (const auto& p : c.points) {
    PutU64(out, static_cast<uint64_t>(p.local_ns));
    PutU64(out, static_cast<uint64_t>(p.offset_ns));
    PutU64(out, static_cast<uint64_t>(p.half_rtt_ns));
  }
  PutU32(out, static_cast<uint32_t>(c.samples.size()));
  for (const auto& s : c.samples) {
    PutU64(out, s.local_send_ns);
    PutU64(out, s.reference_ns);
    PutU64(out, s.local_recv_ns);
  }
  EndFrame(out, start);
}

void AppendBye(std::vector<uint8_t>& out, const Bye& bye) {
  size_t start = BeginFrame(out, FrameType::kBye);
  PutU32(out, static_cast<uint32_t>(bye.counters.size()));
  for (const auto& [name, value] : bye.counters) {
    PutStr(out, name);
    PutU64(out, value);
  }
  EndFrame(out, start);
}

const char* FrameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kHello:
      return "hello";
    case FrameType::kHelloAck:
      return "hello-ack";
    case FrameType::kStrings:
      return "strings";
    case FrameType::kEvents:
      return "events";
    case FrameType::kClock:
      return "clock";
    case FrameType::kBye:
      return "bye";
    case FrameType::kClockPing:
      return "clock-ping";
    case FrameType::kClockPong:
      return "clock-pong";
    case FrameType::kBatchAck:
      return "batch-ack";
    case FrameType::kChallenge:
      return "challenge";
    case FrameType::kHangQuery:
      return "hang-query";
    case FrameType::kHangState:
      return "hang-state";
    case FrameType::kRelayHello:
      return "relay-hello";
    case FrameType::kRelayFinish:
      return "relay-finish";
    case FrameType::kRelayDone:
      return "relay-done";
    case FrameType::kRelayProgress:
      return "relay-progress";
    case FrameType::kHangAbort:
      return "hang-abort";
  }
  return "unknown";
}

Result<FrameHeader> DecodeHeader(std::span<const uint8_t> bytes) {
  Cursor c(bytes, "header");
  uint32_t magic = 0, len = 0, reserved = 0;
  uint8_t v[2] = {}, t[2] = {};
  if (!c.U32(magic, "magic") || !c.Raw(v, 2, "version") || !c.Raw(t, 2, "type") || !c.U32(len, "length") ||
      !c.U32(reserved, "reserved")) {
    return c.Finish();
  }
  if (magic != kMagic) {
    return Corrupt("header: bad magic (not a commprof frame)");
  }
  uint16_t version = static_cast<uint16_t>(v[0] | (v[1] << 8));
  if (version != kVersion) {
    return Corrupt("header: unsupported protocol version " + std::to_string(version) + " (this build speaks " +
                   std::to_string(kVersion) + ")");
  }
  uint16_t type = static_cast<uint16_t>(t[0] | (t[1] << 8));
  if (type < static_cast<uint16_t>(FrameType::kHello) || type > static_cast<uint16_t>(kLastFrameType)) {
    return Corrupt("header: unknown frame type " + std::to_string(type));
  }
  if (len > kMaxPayload) {
    return Corrupt("header: payload length " + std::to_string(len) + " exceeds the limit of " +
                   std::to_string(kMaxPayload));
  }
  if (reserved != 0) {
    return Corrupt("header: reserved field is not zero");
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return FrameHeader{static_cast<FrameType>(type), len};
}

Result<Hello> DecodeHello(std::span<const uint8_t> payload) {
  Cursor c(payload, "hello");
  Hello h;
  if (c.U32(h.rank, "rank") && c.U32(h.world_size, "world_size") && c.U32(h.pid, "pid") &&
      c.U64(h.start_steady_ns, "start_steady_ns") && c.U64(h.start_utc_ns, "start_utc_ns") && c.Str(h.host, "host") &&
      c.Str(h.job_id, "job_id")) {
    // `incarnation` is there only when above 0: then 4 bytes stand before the proof.
    if (c.Remaining() == kProofSize + 4) {
      c.U32(h.incarnation, "incarnation");
      if (h.incarnation == 0) {
        return Corrupt("hello frame, field 'incarnation': 0 is written by leaving the field out");
      }
    }
    c.Raw(h.proof.data(), h.proof.size(), "proof");
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  if (h.world_size > kMaxWorldSize) {
    return Corrupt("hello frame, field 'world_size': " + std::to_string(h.world_size) + " ranks exceeds the limit of " +
                   std::to_string(kMaxWorldSize));
  }
  if (h.world_size == 0 || h.rank >= h.world_size) {
    return Corrupt("hello frame, field 'rank': rank " + std::to_string(h.rank) + " outside world size " +
                   std::to_string(h.world_size));
  }
  return h;
}

bool VerifyHelloProof(std::span<const uint8_t> hello_payload, std::string_view secret) {
  if (hello_payload.size() < kProofSize) {
    return false;
  }
  size_t body = hello_payload.size() - kProofSize;
  auto expect = HmacSha256(secret, hello_payload.first(body));
  return EqualConstantTime(expect.data(), hello_payload.data() + body, kProofSize);
}

bool VerifyHelloProof(std::span<const uint8_t> hello_payload, std::string_view secret, const Nonce& nonce) {
  if (hello_payload.size() < kProofSize) {
    return false;
  }
  size_t body = hello_payload.size() - kProofSize;
  auto expect = HmacSha256(secret, hello_payload.first(body), nonce);
  return EqualConstantTime(expect.data(), hello_payload.data() + body, kProofSize);
}

Result<HelloAck> DecodeHelloAck(std::span<const uint8_t> payload) {
  Cursor c(payload, "hello-ack");
  HelloAck a;
  uint8_t accepted = 0;
  if (c.U8(accepted, "accepted")) {
    c.Str(a.reason, "reason");
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  a.accepted = accepted != 0;
  return a;
}

Result<Strings> DecodeStrings(std::span<const uint8_t> payload) {
  Cursor c(payload, "strings");
  Strings s;
  uint32_t count = 0;
  if (c.U32(s.first_id, "first_id") && c.U32(count, "count") && c.CheckCount(count, 4, "count")) {
    s.strings.resize(count);
    for (uint32_t i = 0; i < count; ++i) {
      if (!c.Str(s.strings[i], "string")) {
        break;
      }
    }
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return s;
}

Result<Events> DecodeEvents(std::span<const uint8_t> payload) {
  Cursor c(payload, "events");
  Events e;
  uint32_t count = 0;
  const uint8_t* raw = nullptr;
  if (c.U64(e.batch_seq, "batch_seq") && c.U32(count, "count") &&
      c.CheckCount(count, sizeof(commprof_event), "count") &&
      c.Take(size_t{count} * sizeof(commprof_event), raw, "events")) {
    // Copied and checked in one pass, into a vector that is reserved rather than resized: a
    // resize would zero every event first, a tenth of the aggregator's receiving CPU.
    e.events.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      commprof_event ev;
      std::memcpy(&ev, raw + size_t{i} * sizeof ev, sizeof ev);
      if (ev.kind == COMMPROF_KIND_NONE || ev.kind >= COMMPROF_KIND_COUNT_) {
        return Corrupt("events frame, event " + std::to_string(i) + ", field 'kind': unknown kind " +
                       std::to_string(ev.kind));
      }
      if (ev.end_ns < ev.start_ns) {
        return Corrupt("events frame, event " + std::to_string(i) + ", field 'end_ns': ends before it starts");
      }
      e.events.push_back(ev);
    }
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return e;
}

Result<Clock> DecodeClock(std::span<const uint8_t> payload) {
  Cursor c(payload, "clock");
  Clock k;
  uint32_t n = 0, np = 0;
  if (c.I64(k.offset_ns, "offset_ns") && c.F64(k.drift_ppm, "drift_ppm") && c.I64(k.error_bound_ns, "error_bound_ns") &&
      c.U64(k.anchor_local_ns, "anchor_local_ns") && c.Str(k.method, "method") && c.U32(np, "point_count") &&
      c.CheckCount(np, 24, "point_count")) {
    k.points.resize(np);
    for (auto& p : k.points) {
      if (!c.I64(p.local_ns, "point_local_ns") || !c.I64(p.offset_ns, "point_offset_ns") ||
          !c.I64(p.half_rtt_ns, "point_half_rtt_ns")) {
        break;
      }
    }
  }
  if (c.U32(n, "sample_count") && c.CheckCount(n, 24, "sample_count")) {
    k.samples.resize(n);
    for (auto& s : k.samples) {
      if (!c.U64(s.local_send_ns, "local_send_ns") || !c.U64(s.reference_ns, "reference_ns") ||
          !c.U64(s.local_recv_ns, "local_recv_ns")) {
        break;
      }
    }
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return k;
}

Result<Bye> DecodeBye(std::span<const uint8_t> payload) {
  Cursor c(payload, "bye");
  Bye b;
  uint32_t n = 0;
  if (c.U32(n, "counter_count") && c.CheckCount(n, 12, "counter_count")) {
    b.counters.resize(n);
    for (auto& [name, value] : b.counters) {
      if (!c.Str(name, "counter_name") || !c.U64(value, "counter_value")) {
        break;
      }
    }
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return b;
}

void AppendClockPing(std::vector<uint8_t>& out, uint64_t local_send_ns) {
  size_t start = BeginFrame(out, FrameType::kClockPing);
  PutU64(out, local_send_ns);
  EndFrame(out, start);
}

void AppendClockPong(std::vector<uint8_t>& out, const ClockPong& pong) {
  size_t start = BeginFrame(out, FrameType::kClockPong);
  PutU64(out, pong.local_send_ns);
  PutU64(out, pong.reference_ns);
  EndFrame(out, start);
}

Result<uint64_t> DecodeClockPing(std::span<const uint8_t> payload) {
  Cursor c(payload, "clock-ping");
  uint64_t t = 0;
  c.U64(t, "local_send_ns");
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return t;
}

Result<ClockPong> DecodeClockPong(std::span<const uint8_t> payload) {
  Cursor c(payload, "clock-pong");
  ClockPong p;
  if (c.U64(p.local_send_ns, "local_send_ns")) {
    c.U64(p.reference_ns, "reference_ns");
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return p;
}

void AppendBatchAck(std::vector<uint8_t>& out, const BatchAck& ack) {
  size_t start = BeginFrame(out, FrameType::kBatchAck);
  PutU64(out, ack.durable_batches);
  out.push_back(ack.bye_stored ? 1 : 0);
  EndFrame(out, start);
}

Result<BatchAck> DecodeBatchAck(std::span<const uint8_t> payload) {
  Cursor c(payload, "batch-ack");
  BatchAck a;
  uint8_t flags = 0;
  if (c.U64(a.durable_batches, "durable_batches")) {
    c.U8(flags, "bye_stored");
  }
  a.bye_stored = flags != 0;
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return a;
}

void AppendHangQuery(std::vector<uint8_t>& out, const HangQuery& query) {
  size_t start = BeginFrame(out, FrameType::kHangQuery);
  PutU64(out, query.query_id);
  PutU32(out, query.history);
  EndFrame(out, start);
}

Result<HangQuery> DecodeHangQuery(std::span<const uint8_t> payload) {
  Cursor c(payload, "hang-query");
  HangQuery q;
  if (c.U64(q.query_id, "query_id")) {
    c.U32(q.history, "history");
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return q;
}

void AppendHangState(std::vector<uint8_t>& out, const HangState& state) {
  size_t start = BeginFrame(out, FrameType::kHangState);
  PutU64(out, state.query_id);
  PutU64(out, state.local_now_ns);
  PutU64(out, state.last_completion_ns);
  PutU32(out, static_cast<uint32_t>(state.inflight.size()));
  for (const auto& op : state.inflight) {
    PutRaw(out, &op.event, sizeof op.event);
    PutU32(out, op.stack);
  }
  PutU32(out, static_cast<uint32_t>(state.recent.size()));
  PutRaw(out, state.recent.data(), state.recent.size() * sizeof(commprof_event));
  PutU32(out, static_cast<uint32_t>(state.comms.size()));
  for (const auto& m : state.comms) {
    PutU64(out, m.comm_id);
    PutU32(out, m.size);
    PutU32(out, m.rank_in_comm);
  }
  PutU32(out, static_cast<uint32_t>(state.call_sites.size()));
  for (const auto& [stack, text] : state.call_sites) {
    PutU32(out, stack);
    PutStr(out, text);
  }
  EndFrame(out, start);
}

namespace {
// An event carried by a hang-state frame: a kind this build defines and no end before its start.
Status CheckStateEvent(const commprof_event& ev, const char* list, size_t i) {
  if (ev.kind == COMMPROF_KIND_NONE || ev.kind >= COMMPROF_KIND_COUNT_) {
    return Corrupt(std::string("hang-state frame, ") + list + " " + std::to_string(i) +
                   ", field 'kind': unknown kind " + std::to_string(ev.kind));
  }
  if (ev.end_ns < ev.start_ns) {
    return Corrupt(std::string("hang-state frame, ") + list + " " + std::to_string(i) +
                   ", field 'end_ns': ends before it starts");
  }
  return Status::Ok();
}
}  // namespace

Result<HangState> DecodeHangState(std::span<const uint8_t> payload) {
  Cursor c(payload, "hang-state");
  HangState s;
  uint32_t n = 0;
  if (c.U64(s.query_id, "query_id") && c.U64(s.local_now_ns, "local_now_ns") &&
      c.U64(s.last_completion_ns, "last_completion_ns") && c.U32(n, "inflight_count") &&
      c.CheckCount(n, sizeof(commprof_event) + 4, "inflight_count")) {
    s.inflight.resize(n);
    for (auto& op : s.inflight) {
      if (!c.Raw(&op.event, sizeof op.event, "inflight") || !c.U32(op.stack, "stack")) {
        break;
      }
    }
  }
  if (c.U32(n, "recent_count") && c.CheckCount(n, sizeof(commprof_event), "recent_count")) {
    s.recent.resize(n);
    c.Raw(s.recent.data(), n * sizeof(commprof_event), "recent");
  }
  if (c.U32(n, "comm_count") && c.CheckCount(n, 16, "comm_count")) {
    s.comms.resize(n);
    for (auto& m : s.comms) {
      if (!c.U64(m.comm_id, "comm_id") || !c.U32(m.size, "size") || !c.U32(m.rank_in_comm, "rank_in_comm")) {
        break;
      }
    }
  }
  if (c.U32(n, "call_site_count") && c.CheckCount(n, 8, "call_site_count")) {
    s.call_sites.resize(n);
    for (auto& [stack, text] : s.call_sites) {
      if (!c.U32(stack, "call_site_stack") || !c.Str(text, "call_site_text")) {
        break;
      }
    }
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  for (size_t i = 0; i < s.inflight.size(); ++i) {
    COMMPROF_RETURN_IF_ERROR(CheckStateEvent(s.inflight[i].event, "inflight op", i));
  }
  for (size_t i = 0; i < s.recent.size(); ++i) {
    COMMPROF_RETURN_IF_ERROR(CheckStateEvent(s.recent[i], "recent op", i));
  }
  for (const auto& m : s.comms) {
    if (m.size == 0 || m.rank_in_comm >= m.size) {
      return Corrupt("hang-state frame, field 'rank_in_comm': " + std::to_string(m.rank_in_comm) +
                     " is not below the communicator's size " + std::to_string(m.size));
    }
  }
  return s;
}

void AppendHangAbort(std::vector<uint8_t>& out, const HangAbort& abort) {
  size_t start = BeginFrame(out, FrameType::kHangAbort);
  PutStr(out, abort.reason);
  EndFrame(out, start);
}

Result<HangAbort> DecodeHangAbort(std::span<const uint8_t> payload) {
  Cursor c(payload, "hang-abort");
  HangAbort a;
  c.Str(a.reason, "reason");
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return a;
}

void AppendRelayHello(std::vector<uint8_t>& out, const RelayHello& hello, std::string_view secret, const Nonce& nonce) {
  size_t start = BeginFrame(out, FrameType::kRelayHello);
  PutStr(out, hello.job_id);
  PutStr(out, hello.host);
  PutU32(out, hello.pid);
  PutStr(out, hello.shard);
  auto proof = HmacSha256(secret, std::span<const uint8_t>(out.data() + start, out.size() - start), nonce);
  PutRaw(out, proof.data(), proof.size());
  EndFrame(out, start);
}

Result<RelayHello> DecodeRelayHello(std::span<const uint8_t> payload) {
  Cursor c(payload, "relay-hello");
  RelayHello h;
  c.Str(h.job_id, "job_id");
  c.Str(h.host, "host");
  c.U32(h.pid, "pid");
  c.Str(h.shard, "shard");
  c.Raw(h.proof.data(), h.proof.size(), "proof");
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return h;
}

void AppendRelayFinish(std::vector<uint8_t>& out, const RelayFinish& finish) {
  size_t start = BeginFrame(out, FrameType::kRelayFinish);
  PutU32(out, finish.grace_ms);
  EndFrame(out, start);
}

Result<RelayFinish> DecodeRelayFinish(std::span<const uint8_t> payload) {
  Cursor c(payload, "relay-finish");
  RelayFinish f;
  c.U32(f.grace_ms, "grace_ms");
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return f;
}

void AppendRelayProgress(std::vector<uint8_t>& out, const RelayProgress& progress) {
  size_t start = BeginFrame(out, FrameType::kRelayProgress);
  PutU32(out, progress.ranks_open);
  PutU32(out, progress.ranks_done);
  EndFrame(out, start);
}

Result<RelayProgress> DecodeRelayProgress(std::span<const uint8_t> payload) {
  Cursor c(payload, "relay-progress");
  RelayProgress p;
  c.U32(p.ranks_open, "ranks_open");
  c.U32(p.ranks_done, "ranks_done");
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  return p;
}

void AppendRelayDone(std::vector<uint8_t>& out, const RelayDone& done) {
  size_t start = BeginFrame(out, FrameType::kRelayDone);
  PutStr(out, done.status);
  PutU32(out, done.world_size);
  PutU32(out, static_cast<uint32_t>(done.ranks.size()));
  for (const ShardRank& r : done.ranks) {
    PutU32(out, r.rank);
    PutU64(out, r.events);
  }
  EndFrame(out, start);
}

Result<RelayDone> DecodeRelayDone(std::span<const uint8_t> payload) {
  Cursor c(payload, "relay-done");
  RelayDone d;
  uint32_t n = 0;
  c.Str(d.status, "status");
  c.U32(d.world_size, "world_size");
  if (c.U32(n, "rank count") && c.CheckCount(n, 12, "rank count")) {
    d.ranks.resize(n);
    for (ShardRank& r : d.ranks) {
      c.U32(r.rank, "rank");
      c.U64(r.events, "events");
    }
  }
  COMMPROF_RETURN_IF_ERROR(c.Finish());
  if (d.world_size > kMaxWorldSize) {
    return Corrupt("relay-done: world_size " + std::to_string(d.world_size) + " is above " +
                   std::to_string(kMaxWorldSize));
  }
  return d;
}

Result<bool> ReadFrame(std::FILE* file, FrameHeader& header, std::vector<uint8_t>& payload) {
  long offset = std::ftell(file);
  uint8_t raw[kHeaderSize];
  size_t got = std::fread(raw, 1, kHeaderSize, file);
  if (got == 0 && std::feof(file)) {
    return false;
  }
  // Truncation is an I/O-level end (a writer killed mid-frame), reported as kIoError; a frame that
  // is whole but wrong is kCorrupt.
  if (got != kHeaderSize) {
    return IoError("truncated frame header at byte " + std::to_string(offset));
  }
  auto h = DecodeHeader(raw);
  if (!h.ok()) {
    return Corrupt(h.status().message() + " at byte " + std::to_string(offset));
  }
  header = h.value();
  payload.resize(header.payload_len);
  if (std::fread(payload.data(), 1, payload.size(), file) != payload.size()) {
    return IoError(std::string("truncated ") + FrameTypeName(header.type) + " frame at byte " + std::to_string(offset));
  }
  return true;
}

}  // namespace commprof::wire
