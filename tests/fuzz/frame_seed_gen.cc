// Writes the seed corpus of frame_decoder_fuzz: valid frames of every type, encoded with the
// wire::Append* functions, so the seeds follow the encoder whenever the format changes.
//
//   frame_seed_gen OUTDIR
//
// For each frame type it writes the whole frame (`<name>.frame`) and its bare payload
// (`<name>.payload`, for the raw Decode* calls), plus `stream.frames`: a complete collector
// stream (hello, strings, events, clock ping/pong, clock, bye) like a spool file. Every frame written is decoded
// back before the program exits 0: a seed the decoder refuses would be a useless seed, so that
// is an error (exit 1), and so is an unwritable OUTDIR.
//
// tests/fuzz/corpus/ holds a checked-in copy of this output (regenerate it with this program).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire.h"

namespace {

namespace wire = commprof::wire;

constexpr std::string_view kSeedSecret = "commprof-fuzz-secret";  // same as frame_decoder_fuzz.cc
// The challenge nonce the TCP hello seed is signed over (same as frame_decoder_fuzz.cc).
constexpr wire::Nonce kSeedNonce = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

commprof_event MakeEvent(uint8_t kind, uint8_t subtype, uint64_t start, uint64_t dur, uint64_t bytes) {
  commprof_event e{};
  e.start_ns = start;
  e.end_ns = start + dur;
  e.bytes = bytes;
  e.comm_id = COMMPROF_COMM_WORLD_ID;
  e.seq = start / 1000;
  e.name_id = subtype;
  e.peer = COMMPROF_NO_PEER;
  e.device = COMMPROF_HOST_DEVICE;
  e.kind = kind;
  e.subtype = subtype;
  e.datatype = COMMPROF_DT_FLOAT32;
  e.reduce_op = COMMPROF_RED_SUM;
  return e;
}

struct Seed {
  std::string name;
  std::vector<uint8_t> frame;
};

bool DecodesCleanly(const std::vector<uint8_t>& bytes, std::string& why) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < wire::kHeaderSize) {
      why = "truncated header";
      return false;
    }
    auto h = wire::DecodeHeader(std::span<const uint8_t>(bytes).subspan(pos, wire::kHeaderSize));
    if (!h.ok()) {
      why = h.status().message();
      return false;
    }
    if (bytes.size() - pos - wire::kHeaderSize < h->payload_len) {
      why = "truncated payload";
      return false;
    }
    auto p = std::span<const uint8_t>(bytes).subspan(pos + wire::kHeaderSize, h->payload_len);
    commprof::Status st;
    switch (h->type) {
      case wire::FrameType::kHello:
        st = wire::DecodeHello(p).status();
        if (st.ok() && !wire::VerifyHelloProof(p, kSeedSecret) && !wire::VerifyHelloProof(p, kSeedSecret, kSeedNonce)) {
          st = commprof::Corrupt("hello proof does not verify");
        }
        break;
      case wire::FrameType::kHelloAck:
        st = wire::DecodeHelloAck(p).status();
        break;
      case wire::FrameType::kStrings:
        st = wire::DecodeStrings(p).status();
        break;
      case wire::FrameType::kEvents:
        st = wire::DecodeEvents(p).status();
        break;
      case wire::FrameType::kClock:
        st = wire::DecodeClock(p).status();
        break;
      case wire::FrameType::kBye:
        st = wire::DecodeBye(p).status();
        break;
      case wire::FrameType::kClockPing:
        st = wire::DecodeClockPing(p).status();
        break;
      case wire::FrameType::kClockPong:
        st = wire::DecodeClockPong(p).status();
        break;
      case wire::FrameType::kBatchAck:
        st = wire::DecodeBatchAck(p).status();
        break;
      case wire::FrameType::kChallenge:
        st = wire::DecodeChallenge(p).status();
        break;
      case wire::FrameType::kHangQuery:
        st = wire::DecodeHangQuery(p).status();
        break;
      case wire::FrameType::kHangState:
        st = wire::DecodeHangState(p).status();
        break;
      case wire::FrameType::kHangAbort:
        st = wire::DecodeHangAbort(p).status();
        break;
      case wire::FrameType::kRelayHello:
        st = wire::DecodeRelayHello(p).status();
        if (st.ok() && !wire::VerifyHelloProof(p, kSeedSecret, kSeedNonce)) {
          st = commprof::Corrupt("relay-hello proof does not verify");
        }
        break;
      case wire::FrameType::kRelayFinish:
        st = wire::DecodeRelayFinish(p).status();
        break;
      case wire::FrameType::kRelayDone:
        st = wire::DecodeRelayDone(p).status();
        break;
      case wire::FrameType::kRelayProgress:
        st = wire::DecodeRelayProgress(p).status();
        break;
    }
    if (!st.ok()) {
      why = st.message();
      return false;
    }
    pos += wire::kHeaderSize + h->payload_len;
  }
  return true;
}

bool WriteFile(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: frame_seed_gen OUTDIR\n");
    return 2;
  }
  std::filesystem::path dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "frame_seed_gen: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }

  std::vector<Seed> seeds;
  auto add = [&](std::string name, auto&& append) {
    Seed s{std::move(name), {}};
    append(s.frame);
    seeds.push_back(std::move(s));
  };

  wire::Hello hello;
  hello.rank = 1;
  hello.world_size = 4;
  hello.pid = 4242;
  hello.start_steady_ns = 123456789;
  hello.start_utc_ns = 1700000000000000000ull;
  hello.host = "node001";
  hello.job_id = "20240101-120000-4242";
  add("hello", [&](auto& out) { wire::AppendHello(out, hello, kSeedSecret); });
  wire::Hello hello_min;  // rank 0 of 1, empty strings
  hello_min.world_size = 1;
  add("hello_min", [&](auto& out) { wire::AppendHello(out, hello_min, kSeedSecret); });

  // Over TCP: the aggregator's challenge, and a hello signed over it.
  add("challenge", [&](auto& out) { wire::AppendChallenge(out, kSeedNonce); });
  add("hello_tcp", [&](auto& out) { wire::AppendHello(out, hello, kSeedSecret, kSeedNonce); });

  add("hello_ack_ok", [&](auto& out) { wire::AppendHelloAck(out, wire::HelloAck{true, ""}); });
  add("hello_ack_refused", [&](auto& out) {
    wire::AppendHelloAck(out, wire::HelloAck{false, "bad proof: not a member of this job"});
  });

  std::vector<std::string_view> names = {"MPI_Allreduce", "MPI_Barrier", "", "MPI_Isend", "user range: step"};
  add("strings", [&](auto& out) { wire::AppendStrings(out, 0, names); });
  std::string longest(wire::kMaxStringLen, 'x');
  std::vector<std::string_view> long_names = {longest};
  add("strings_longest", [&](auto& out) { wire::AppendStrings(out, 5, long_names); });
  add("strings_empty", [&](auto& out) { wire::AppendStrings(out, 7, {}); });

  std::vector<commprof_event> events = {
      MakeEvent(COMMPROF_KIND_MPI_INIT, COMMPROF_OP_NONE, 1000, 50000, 0),
      MakeEvent(COMMPROF_KIND_MPI_COLLECTIVE, COMMPROF_OP_ALLREDUCE, 100000, 2500, 8),
      MakeEvent(COMMPROF_KIND_MPI_P2P, COMMPROF_OP_SEND, 200000, 900, 4096),
      MakeEvent(COMMPROF_KIND_USER_MARK, COMMPROF_OP_NONE, 300000, 0, 0),
  };
  events[2].peer = 3;
  events[2].flags = COMMPROF_FLAG_NONBLOCKING;
  events[2].correlation = 77;
  add("events", [&](auto& out) { wire::AppendEvents(out, 0, events.data(), events.size()); });
  add("events_empty", [&](auto& out) { wire::AppendEvents(out, 9, nullptr, 0); });

  wire::Clock clock;
  clock.offset_ns = -123456;
  clock.drift_ppm = 1.5;
  clock.error_bound_ns = 800;
  clock.anchor_local_ns = 1000;
  clock.method = "mpi-pingpong";
  clock.points = {{1000, -123456, 400}, {9000000, -123440, 350}};
  clock.samples = {{1000, 2000, 3000}, {4000, 5000, 6100}, {7000, 8000, 9050}};
  add("clock", [&](auto& out) { wire::AppendClock(out, clock); });
  wire::Clock clock_none;
  clock_none.method = "none";
  add("clock_none", [&](auto& out) { wire::AppendClock(out, clock_none); });

  wire::Bye bye;
  bye.counters = {{"events_recorded", 4}, {"dropped_ring_full", 0}, {"events_shipped", 4}, {"spooled", 1}};
  add("bye", [&](auto& out) { wire::AppendBye(out, bye); });

  add("clock_ping", [&](auto& out) { wire::AppendClockPing(out, 5000000); });
  add("clock_pong", [&](auto& out) { wire::AppendClockPong(out, wire::ClockPong{5000000, 1700000000005000000ull}); });
  add("batch_ack", [&](auto& out) { wire::AppendBatchAck(out, wire::BatchAck{42, true}); });

  // A relay's control connection (docs/scale.md#relays).
  wire::RelayHello relay_hello{"20240101-120000-4242", "node001", 777, "/scratch/job.h5.shards/node001-0-4242.h5", {}};
  add("relay_hello", [&](auto& out) { wire::AppendRelayHello(out, relay_hello, kSeedSecret, kSeedNonce); });
  add("relay_progress", [&](auto& out) { wire::AppendRelayProgress(out, wire::RelayProgress{3, 5}); });
  add("relay_finish", [&](auto& out) { wire::AppendRelayFinish(out, wire::RelayFinish{10000}); });
  add("relay_done", [&](auto& out) {
    wire::AppendRelayDone(out, wire::RelayDone{"", 8, {{0, 55}, {1, 55}, {7, 1u << 20}}});
  });
  add("relay_done_failed", [&](auto& out) {
    wire::AppendRelayDone(out, wire::RelayDone{"writing x.h5: No space left on device", 0, {}});
  });

  std::vector<uint8_t> stream;
  wire::AppendHello(stream, hello, kSeedSecret);
  wire::AppendStrings(stream, 0, names);
  wire::AppendEvents(stream, 0, events.data(), events.size());
  wire::AppendEvents(stream, 1, events.data() + 1, 2);
  wire::AppendClockPing(stream, 5000000);
  wire::AppendClockPong(stream, wire::ClockPong{5000000, 1700000000005000000ull});
  wire::AppendClock(stream, clock);
  wire::AppendBye(stream, bye);

  // A TCP handshake as the two directions interleave it: challenge, hello, hello-ack.
  std::vector<uint8_t> handshake;
  wire::AppendChallenge(handshake, kSeedNonce);
  wire::AppendHello(handshake, hello, kSeedSecret, kSeedNonce);
  wire::AppendHelloAck(handshake, wire::HelloAck{true, ""});

  int written = 0;
  for (const auto& s : seeds) {
    std::string why;
    if (!DecodesCleanly(s.frame, why)) {
      std::fprintf(stderr, "frame_seed_gen: seed '%s' does not decode: %s\n", s.name.c_str(), why.c_str());
      return 1;
    }
    std::vector<uint8_t> payload(s.frame.begin() + wire::kHeaderSize, s.frame.end());
    if (!WriteFile(dir / (s.name + ".frame"), s.frame) || !WriteFile(dir / (s.name + ".payload"), payload)) {
      std::fprintf(stderr, "frame_seed_gen: cannot write seeds into %s\n", dir.c_str());
      return 1;
    }
    written += 2;
  }
  std::string why;
  if (!DecodesCleanly(stream, why)) {
    std::fprintf(stderr, "frame_seed_gen: the stream seed does not decode: %s\n", why.c_str());
    return 1;
  }
  if (!WriteFile(dir / "stream.frames", stream)) {
    std::fprintf(stderr, "frame_seed_gen: cannot write seeds into %s\n", dir.c_str());
    return 1;
  }
  ++written;
  if (!DecodesCleanly(handshake, why)) {
    std::fprintf(stderr, "frame_seed_gen: the handshake seed does not decode: %s\n", why.c_str());
    return 1;
  }
  if (!WriteFile(dir / "handshake.frames", handshake)) {
    std::fprintf(stderr, "frame_seed_gen: cannot write seeds into %s\n", dir.c_str());
    return 1;
  }
  ++written;
  std::printf("frame_seed_gen: wrote %d seed files into %s\n", written, dir.c_str());
  return 0;
}
