// The collector -> aggregator wire format (docs/wire-protocol.md is the user-facing contract).
//
// A stream is a sequence of frames. Every frame is a 16-byte little-endian header
//   u32 magic "CPWF" | u16 version | u16 type | u32 payload length | u32 reserved (0)
// followed by the payload. The same frames are written to spool files, so one decoder serves the
// network and `commprof merge`. Every read is bounds-checked: a decoder never trusts a length it
// has not checked against the bytes it holds, and a bad frame is a Status, never a crash.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commprof/event.h"
#include "core/clock_model.h"
#include "core/status.h"

namespace commprof::wire {

inline constexpr uint32_t kMagic = 0x46575043;  // bytes "CPWF" on the wire
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderSize = 16;
inline constexpr uint32_t kMaxPayload = 16u << 20;  // 16 MiB; larger lengths are rejected
inline constexpr size_t kProofSize = 32;            // HMAC-SHA256
inline constexpr size_t kMaxStringLen = 4096;
inline constexpr size_t kNonceSize = 32;  // the aggregator's per-connection challenge
// The largest world a hello may announce: readers and the aggregator size per-rank tables by it,
// so a bigger number is refused at decode rather than trusted (docs/wire-protocol.md).
inline constexpr uint32_t kMaxWorldSize = 1u << 20;
// The longest hello payload that can decode: rank, world_size, pid (3 x u32), the two start
// times (2 x u64), host and job_id (u32 length + at most kMaxStringLen bytes each), the proof.
// Before a connection is authenticated the aggregator reads no more than this.
inline constexpr size_t kMaxHelloPayload = 3 * 4 + 2 * 8 + 2 * (4 + kMaxStringLen) + 4 + kProofSize;  // + incarnation
static_assert(kMaxHelloPayload == 72 + 2 * kMaxStringLen);
// A relay hello: job_id, host and shard path (u32 length + at most kMaxStringLen bytes each), pid,
// the proof. The first frame of a connection may be this long at most.
inline constexpr size_t kMaxRelayHelloPayload = 3 * (4 + kMaxStringLen) + 4 + kProofSize;
inline constexpr size_t kMaxFirstPayload = std::max(kMaxHelloPayload, kMaxRelayHelloPayload);

using Nonce = std::array<uint8_t, kNonceSize>;

enum class FrameType : uint16_t {
  kHello = 1,
  kHelloAck = 2,
  kStrings = 3,
  kEvents = 4,
  kClock = 5,
  kBye = 6,
  kClockPing = 7,       // collector -> aggregator: TCP clock exchange for jobs without MPI
  kClockPong = 8,       // aggregator -> collector: the ping's send time echoed plus the reference time
  kChallenge = 9,       // aggregator -> collector, first on every connection: a fresh nonce to sign
  kBatchAck = 10,       // aggregator -> collector: every events batch below `durable_batches` is in the file
  kHangQuery = 11,      // aggregator -> collector: report what you are blocked in (docs/hangs.md)
  kHangState = 12,      // collector -> aggregator: the answer, from the shipper thread
  kHangAbort = 13,      // aggregator -> collector: a hang was found and the job is to end (--on-hang abort)
  kRelayHello = 14,     // relay -> parent, first on its control connection (docs/scale.md#relays)
  kRelayFinish = 15,    // parent -> relay: the job is over; finish the shard
  kRelayDone = 16,      // relay -> parent: the shard is finalized; what it holds
  kRelayProgress = 17,  // relay -> parent: how many of its ranks have said bye
};
inline constexpr FrameType kLastFrameType = FrameType::kRelayProgress;

struct FrameHeader {
  FrameType type{};
  uint32_t payload_len = 0;
};

struct Hello {
  uint32_t rank = 0;
  uint32_t world_size = 0;
  uint32_t pid = 0;
  uint64_t start_steady_ns = 0;  // the rank's steady clock ...
  uint64_t start_utc_ns = 0;     // ... and UTC, read together at collector start
  std::string host;
  std::string job_id;
  // Which incarnation of the rank this process is: 0 first, K after K elastic restarts of a torch
  // launcher's workers (TORCHELASTIC_RESTART_COUNT). On the wire only when above 0, after job_id.
  uint32_t incarnation = 0;
  // Spool files: HMAC-SHA256(secret, payload bytes before the proof). Over TCP:
  // HMAC-SHA256(secret, challenge nonce || payload bytes before the proof), so a hello seen once
  // (captured, or read from a spool file) cannot authenticate another connection.
  std::array<uint8_t, kProofSize> proof{};
};

struct HelloAck {
  bool accepted = false;
  std::string reason;
};

struct Strings {
  uint32_t first_id = 0;
  std::vector<std::string> strings;
};

struct Events {
  uint64_t batch_seq = 0;  // per connection, from 0, +1 per batch: gaps mean lost batches
  std::vector<commprof_event> events;
};

using ClockSample = commprof::ClockSample;  // core/clock_model.h
using ClockPoint = commprof::ClockPoint;

// The rank's clock model (core/clock_model.h): piecewise linear through `points`. The summary
// figures are what `commprof info` shows: offset at anchor_local_ns (the first sync epoch's local
// time; the rank's start while there is no epoch yet), drift of the line through the first and last
// points, and the error bound.
struct Clock {
  int64_t offset_ns = 0;
  double drift_ppm = 0.0;
  int64_t error_bound_ns = -1;  // -1: not measured
  uint64_t anchor_local_ns = 0;
  std::string method;  // "none", "mpi-pingpong", "tcp-pingpong", ... (docs/wire-protocol.md)
  std::vector<ClockPoint> points;
  // The samples taken since the previous clock frame (a frame stays small however long the run):
  // readers append them. `points` is always the whole model.
  std::vector<ClockSample> samples;
};

struct ClockPong {
  uint64_t local_send_ns = 0;  // echoed from the ping
  uint64_t reference_ns = 0;
};

// The delivery guarantee: the aggregator acknowledges events batches once the file holding them
// has been flushed, so a collector can forget them; anything not acknowledged is resent after a
// reconnect or written to the spool.
struct BatchAck {
  uint64_t durable_batches = 0;  // batches with batch_seq < this value are stored and flushed
  bool bye_stored = false;       // the bye (and so the whole stream) is stored and flushed
};

// Hang diagnosis (docs/hangs.md). The aggregator asks every rank for its in-flight state; the
// shipper thread answers (it never waits on an application thread, so a rank blocked in MPI or NCCL
// still answers).
struct HangQuery {
  uint64_t query_id = 0;  // echoed in the answer; from 1
  uint32_t history = 0;   // completed collectives wanted per communicator (0: the collector's default)
};

// An operation a rank has entered and not left: a blocking call on one of its threads, a non-blocking
// request not seen complete, an NCCL collective whose kernel has not finished. `event` is as it
// would be recorded, with end_ns == start_ns (the entry time, on the rank's clock).
struct InflightOp {
  commprof_event event{};
  uint32_t stack = 0;  // call-site stack id (--stacks), 0 for none; text in HangState::call_sites
};

// One communicator the rank belongs to: its size and the rank's place in it.
struct CommMembership {
  uint64_t comm_id = 0;
  uint32_t size = 0;
  uint32_t rank_in_comm = 0;
};

struct HangState {
  uint64_t query_id = 0;      // the query answered
  uint64_t local_now_ns = 0;  // the rank's clock when the snapshot was taken
  // The end of the rank's last completed communication call (any thread), on its clock; 0: none yet.
  uint64_t last_completion_ns = 0;
  std::vector<InflightOp> inflight;
  // The last completed collectives (MPI and NCCL) per communicator, oldest first within one.
  std::vector<commprof_event> recent;
  std::vector<CommMembership> comms;
  // Call-site text of the stacks the in-flight ops name: "frame <- caller <- ...".
  std::vector<std::pair<uint32_t, std::string>> call_sites;
};

struct HangAbort {
  std::string reason;  // one line: what was found
};

struct Bye {
  std::vector<std::pair<std::string, uint64_t>> counters;  // events_recorded, dropped_*, ...
};

// Relays (docs/scale.md#relays): an aggregator per node (or per N ranks of one) that takes its
// ranks' streams and writes them into a shard file, joined to the parent's file at the end. It
// introduces itself on a control connection with the same challenge as a rank, proving the job's
// secret over the nonce.
struct RelayHello {
  std::string job_id;
  std::string host;
  uint32_t pid = 0;
  std::string shard;  // the shard file's absolute path
  std::array<uint8_t, kProofSize> proof{};
};

struct RelayProgress {
  uint32_t ranks_open = 0;  // streams open now
  uint32_t ranks_done = 0;  // ranks whose bye is stored
};

struct RelayFinish {
  uint32_t grace_ms = 0;  // how long the relay waits for its ranks' last frames
};

// One rank the shard holds.
struct ShardRank {
  uint32_t rank = 0;
  uint64_t events = 0;
};

struct RelayDone {
  std::string status;  // "" when the shard was written whole, else why not
  uint32_t world_size = 0;
  std::vector<ShardRank> ranks;
};

// ---- encoding (appends whole frames to `out`) ----
// A hello with the spool proof (no nonce).
void AppendHello(std::vector<uint8_t>& out, const Hello& hello, std::string_view secret);
// A hello with the TCP proof over `nonce` (the connection's challenge).
void AppendHello(std::vector<uint8_t>& out, const Hello& hello, std::string_view secret, const Nonce& nonce);
// Appends `hello_frame` (one whole hello frame, any proof) with its proof replaced by the TCP
// proof over `nonce`. Pure computation (no OpenSSL, no global state): the collector's shipper
// thread calls it per connection, possibly while the process is exiting.
Status ResignHello(std::span<const uint8_t> hello_frame, std::string_view secret, const Nonce& nonce,
                   std::vector<uint8_t>& out);
void AppendChallenge(std::vector<uint8_t>& out, const Nonce& nonce);
void AppendHelloAck(std::vector<uint8_t>& out, const HelloAck& ack);
void AppendStrings(std::vector<uint8_t>& out, uint32_t first_id, std::span<const std::string_view> strings);
void AppendEvents(std::vector<uint8_t>& out, uint64_t batch_seq, const commprof_event* events, size_t count);
void AppendClock(std::vector<uint8_t>& out, const Clock& clock);
void AppendBye(std::vector<uint8_t>& out, const Bye& bye);
void AppendClockPing(std::vector<uint8_t>& out, uint64_t local_send_ns);
void AppendClockPong(std::vector<uint8_t>& out, const ClockPong& pong);
void AppendBatchAck(std::vector<uint8_t>& out, const BatchAck& ack);
void AppendHangQuery(std::vector<uint8_t>& out, const HangQuery& query);
void AppendHangState(std::vector<uint8_t>& out, const HangState& state);
void AppendHangAbort(std::vector<uint8_t>& out, const HangAbort& abort);
// The relay hello's proof is HMAC-SHA256(secret, nonce || payload before the proof), as a rank's.
void AppendRelayHello(std::vector<uint8_t>& out, const RelayHello& hello, std::string_view secret, const Nonce& nonce);
void AppendRelayFinish(std::vector<uint8_t>& out, const RelayFinish& finish);
void AppendRelayProgress(std::vector<uint8_t>& out, const RelayProgress& progress);
void AppendRelayDone(std::vector<uint8_t>& out, const RelayDone& done);

// Size of an events frame holding `count` events.
constexpr size_t EventsFrameSize(size_t count) { return kHeaderSize + 12 + count * sizeof(commprof_event); }

// ---- decoding ----
// `bytes` must hold exactly kHeaderSize bytes.
Result<FrameHeader> DecodeHeader(std::span<const uint8_t> bytes);
Result<Hello> DecodeHello(std::span<const uint8_t> payload);
Result<HelloAck> DecodeHelloAck(std::span<const uint8_t> payload);
Result<Strings> DecodeStrings(std::span<const uint8_t> payload);
Result<Events> DecodeEvents(std::span<const uint8_t> payload);
Result<Clock> DecodeClock(std::span<const uint8_t> payload);
Result<Bye> DecodeBye(std::span<const uint8_t> payload);
Result<uint64_t> DecodeClockPing(std::span<const uint8_t> payload);
Result<ClockPong> DecodeClockPong(std::span<const uint8_t> payload);
Result<BatchAck> DecodeBatchAck(std::span<const uint8_t> payload);
Result<Nonce> DecodeChallenge(std::span<const uint8_t> payload);
Result<HangQuery> DecodeHangQuery(std::span<const uint8_t> payload);
Result<HangState> DecodeHangState(std::span<const uint8_t> payload);
Result<HangAbort> DecodeHangAbort(std::span<const uint8_t> payload);
Result<RelayHello> DecodeRelayHello(std::span<const uint8_t> payload);
Result<RelayFinish> DecodeRelayFinish(std::span<const uint8_t> payload);
Result<RelayProgress> DecodeRelayProgress(std::span<const uint8_t> payload);
Result<RelayDone> DecodeRelayDone(std::span<const uint8_t> payload);

// True when hello.proof is the spool proof of this hello under `secret` (constant-time compare).
bool VerifyHelloProof(std::span<const uint8_t> hello_payload, std::string_view secret);
// True when hello.proof is the TCP proof of this hello under `secret` and `nonce`.
bool VerifyHelloProof(std::span<const uint8_t> hello_payload, std::string_view secret, const Nonce& nonce);

// HMAC-SHA256 (RFC 2104) of `prefix || data` under `key`. Implemented here, without OpenSSL:
// OpenSSL 3's HMAC() fetches its algorithm from a library context that OpenSSL frees in an
// atexit handler, and the collector signs on its shipper thread, which can still be connecting
// while a short program exits.
std::array<uint8_t, kProofSize> HmacSha256(std::string_view key, std::span<const uint8_t> data,
                                           std::span<const uint8_t> prefix = {});

// 32 bytes from the kernel's CSPRNG (getrandom(2)); an error if it cannot deliver.
Result<Nonce> RandomNonce();

const char* FrameTypeName(FrameType type);

// Reads the next whole frame from a spool file. Returns false at a clean end of file; a
// truncated frame is kIoError, an invalid one kCorrupt, both naming the byte offset.
Result<bool> ReadFrame(std::FILE* file, FrameHeader& header, std::vector<uint8_t>& payload);

}  // namespace commprof::wire
