// Fuzz target for the collector -> aggregator frame decoder (core/wire.h).
//
// The input is read two ways:
//   1. as a stream of frames, the way the aggregator and `commprof merge` read one: a 16-byte
//      header through DecodeHeader, then the payload to the Decode* function of its type
//      (hello, hello-ack, strings, events, clock, bye, clock-ping, clock-pong, challenge; and
//      VerifyHelloProof, spool and TCP proof, for a hello), frame after frame until the bytes or the valid headers end;
//      the same bytes also go through ReadFrame on a memory FILE*, the spool reader's path;
//   2. as one raw payload, handed to every Decode* function and VerifyHelloProof as it is.
// Besides "no crash, no sanitizer report", a frame that decodes must encode back to the very
// same bytes with the wire::Append* functions (the decoder accepts nothing the encoder would not
// write); a mismatch aborts with both byte strings.
//
// Built two ways from this one file (tests/fuzz/CMakeLists.txt):
//   - with clang and COMMPROF_BUILD_FUZZ=ON: a libFuzzer target (-fsanitize=fuzzer,...);
//   - otherwise with COMMPROF_FUZZ_REPLAY_MAIN defined: a plain program that replays the seed
//     corpus and a deterministic set of mutations of it, so every configuration runs the decoder
//     over hostile input:   frame_decoder_replay [--mutations N] [--seed S] DIR_OR_FILE...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/wire.h"

namespace {

namespace wire = commprof::wire;

// The secret the seed generator signs its hello frames with, so the accepted-proof path is hit.
constexpr std::string_view kSeedSecret = "commprof-fuzz-secret";
// The challenge nonce the seed generator signs its TCP hello over (frame_seed_gen.cc): bytes 0..31.
constexpr wire::Nonce kSeedNonce = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

// How far the inputs got (the replay driver prints them: a mutation set that never gets past the
// header would test nothing).
uint64_t g_headers_accepted = 0;
uint64_t g_payloads_decoded = 0;

[[noreturn]] void RoundTripMismatch(const char* what, std::span<const uint8_t> original,
                                    const std::vector<uint8_t>& reencoded) {
  std::fprintf(stderr, "frame_decoder_fuzz: %s frame decoded but does not re-encode to the same bytes\n", what);
  std::fprintf(stderr, "  original  (%zu bytes):", original.size());
  for (uint8_t b : original) std::fprintf(stderr, " %02x", b);
  std::fprintf(stderr, "\n  re-encoded (%zu bytes):", reencoded.size());
  for (uint8_t b : reencoded) std::fprintf(stderr, " %02x", b);
  std::fprintf(stderr, "\n");
  std::abort();
}

void CheckSame(const char* what, std::span<const uint8_t> frame, const std::vector<uint8_t>& reencoded) {
  if (reencoded.size() != frame.size() || std::memcmp(reencoded.data(), frame.data(), frame.size()) != 0) {
    RoundTripMismatch(what, frame, reencoded);
  }
}

// Decodes one payload of a known type. `frame` is header + payload when the caller has the
// whole frame (then the round trip is checked), empty otherwise.
void DecodeTyped(wire::FrameType type, std::span<const uint8_t> payload, std::span<const uint8_t> frame) {
  std::vector<uint8_t> out;
  auto count = [](const auto& result) {
    if (result.ok()) ++g_payloads_decoded;
    return result.ok();
  };
  switch (type) {
    case wire::FrameType::kHello: {
      bool proof_ok = wire::VerifyHelloProof(payload, kSeedSecret);
      bool tcp_proof_ok = wire::VerifyHelloProof(payload, kSeedSecret, kSeedNonce);
      (void)wire::VerifyHelloProof(payload, "");
      auto h = wire::DecodeHello(payload);
      // The proof covers exactly the bytes the encoder writes, so only a verified hello must
      // re-encode identically (another secret gives another proof).
      if (count(h) && proof_ok && !frame.empty()) {
        wire::AppendHello(out, h.value(), kSeedSecret);
        CheckSame("hello", frame, out);
      }
      if (h.ok() && tcp_proof_ok && !frame.empty()) {
        out.clear();
        wire::AppendHello(out, h.value(), kSeedSecret, kSeedNonce);
        CheckSame("hello (TCP proof)", frame, out);
        // Re-signing the frame over the same nonce is the identity.
        out.clear();
        if (wire::ResignHello(frame, kSeedSecret, kSeedNonce, out).ok()) CheckSame("re-signed hello", frame, out);
      }
      break;
    }
    case wire::FrameType::kHelloAck: {
      auto a = wire::DecodeHelloAck(payload);
      // `accepted` is any non-zero byte on decode and 1 on encode.
      if (count(a) && !frame.empty() && payload[0] <= 1) {
        wire::AppendHelloAck(out, a.value());
        CheckSame("hello-ack", frame, out);
      }
      break;
    }
    case wire::FrameType::kStrings: {
      auto s = wire::DecodeStrings(payload);
      if (count(s) && !frame.empty()) {
        std::vector<std::string_view> views(s->strings.begin(), s->strings.end());
        wire::AppendStrings(out, s->first_id, views);
        CheckSame("strings", frame, out);
      }
      break;
    }
    case wire::FrameType::kEvents: {
      auto e = wire::DecodeEvents(payload);
      if (count(e) && !frame.empty()) {
        wire::AppendEvents(out, e->batch_seq, e->events.data(), e->events.size());
        CheckSame("events", frame, out);
      }
      break;
    }
    case wire::FrameType::kClock: {
      auto c = wire::DecodeClock(payload);
      if (count(c) && !frame.empty()) {
        wire::AppendClock(out, c.value());
        CheckSame("clock", frame, out);
      }
      break;
    }
    case wire::FrameType::kBye: {
      auto b = wire::DecodeBye(payload);
      if (count(b) && !frame.empty()) {
        wire::AppendBye(out, b.value());
        CheckSame("bye", frame, out);
      }
      break;
    }
    case wire::FrameType::kClockPing: {
      auto t = wire::DecodeClockPing(payload);
      if (count(t) && !frame.empty()) {
        wire::AppendClockPing(out, t.value());
        CheckSame("clock-ping", frame, out);
      }
      break;
    }
    case wire::FrameType::kClockPong: {
      auto p = wire::DecodeClockPong(payload);
      if (count(p) && !frame.empty()) {
        wire::AppendClockPong(out, p.value());
        CheckSame("clock-pong", frame, out);
      }
      break;
    }
    case wire::FrameType::kBatchAck: {
      auto a = wire::DecodeBatchAck(payload);
      // `bye_stored` is any non-zero byte on decode and 1 on encode.
      if (count(a) && !frame.empty() && payload.size() == 9 && payload[8] <= 1) {
        wire::AppendBatchAck(out, a.value());
        CheckSame("batch-ack", frame, out);
      }
      break;
    }
    case wire::FrameType::kChallenge: {
      auto n = wire::DecodeChallenge(payload);
      if (count(n) && !frame.empty()) {
        wire::AppendChallenge(out, n.value());
        CheckSame("challenge", frame, out);
      }
      break;
    }
    case wire::FrameType::kHangQuery: {
      auto q = wire::DecodeHangQuery(payload);
      if (count(q) && !frame.empty()) {
        wire::AppendHangQuery(out, q.value());
        CheckSame("hang-query", frame, out);
      }
      break;
    }
    case wire::FrameType::kHangState: {
      auto st = wire::DecodeHangState(payload);
      if (count(st) && !frame.empty()) {
        wire::AppendHangState(out, st.value());
        CheckSame("hang-state", frame, out);
      }
      break;
    }
    case wire::FrameType::kHangAbort: {
      auto a = wire::DecodeHangAbort(payload);
      if (count(a) && !frame.empty()) {
        wire::AppendHangAbort(out, a.value());
        CheckSame("hang-abort", frame, out);
      }
      break;
    }
    case wire::FrameType::kRelayHello: {
      // Re-encoding signs afresh: only a frame whose proof verifies under the seeds' secret and
      // nonce must come back byte for byte.
      auto h = wire::DecodeRelayHello(payload);
      if (count(h) && !frame.empty() && wire::VerifyHelloProof(payload, kSeedSecret, kSeedNonce)) {
        wire::AppendRelayHello(out, h.value(), kSeedSecret, kSeedNonce);
        CheckSame("relay-hello", frame, out);
      }
      break;
    }
    case wire::FrameType::kRelayFinish: {
      auto f = wire::DecodeRelayFinish(payload);
      if (count(f) && !frame.empty()) {
        wire::AppendRelayFinish(out, f.value());
        CheckSame("relay-finish", frame, out);
      }
      break;
    }
    case wire::FrameType::kRelayProgress: {
      auto p = wire::DecodeRelayProgress(payload);
      if (count(p) && !frame.empty()) {
        wire::AppendRelayProgress(out, p.value());
        CheckSame("relay-progress", frame, out);
      }
      break;
    }
    case wire::FrameType::kRelayDone: {
      auto d = wire::DecodeRelayDone(payload);
      if (count(d) && !frame.empty()) {
        wire::AppendRelayDone(out, d.value());
        CheckSame("relay-done", frame, out);
      }
      break;
    }
  }
}

void DecodeAsStream(std::span<const uint8_t> in) {
  size_t pos = 0;
  while (in.size() - pos >= wire::kHeaderSize) {
    auto h = wire::DecodeHeader(in.subspan(pos, wire::kHeaderSize));
    if (!h.ok()) return;  // a reader stops at the first bad header
    ++g_headers_accepted;
    size_t avail = in.size() - pos - wire::kHeaderSize;
    if (h->payload_len > avail) {
      // A reader would wait for more bytes; the decoder must still survive the short payload.
      DecodeTyped(h->type, in.subspan(pos + wire::kHeaderSize), {});
      return;
    }
    auto frame = in.subspan(pos, wire::kHeaderSize + h->payload_len);
    DecodeTyped(h->type, frame.subspan(wire::kHeaderSize), frame);
    pos += frame.size();
  }
}

void DecodeThroughReadFrame(std::span<const uint8_t> in) {
  if (in.empty()) return;
  std::FILE* f = fmemopen(const_cast<uint8_t*>(in.data()), in.size(), "rb");
  if (f == nullptr) return;
  wire::FrameHeader header;
  std::vector<uint8_t> payload;
  for (;;) {
    auto r = wire::ReadFrame(f, header, payload);
    if (!r.ok() || !r.value()) break;
    DecodeTyped(header.type, payload, {});
  }
  std::fclose(f);
}

void DecodeAsRawPayload(std::span<const uint8_t> in) {
  if (in.size() >= wire::kHeaderSize) (void)wire::DecodeHeader(in.first(wire::kHeaderSize));
  (void)wire::DecodeHello(in);
  (void)wire::VerifyHelloProof(in, kSeedSecret);
  (void)wire::DecodeHelloAck(in);
  (void)wire::DecodeStrings(in);
  (void)wire::DecodeEvents(in);
  (void)wire::DecodeClock(in);
  (void)wire::DecodeBye(in);
  (void)wire::DecodeClockPing(in);
  (void)wire::DecodeClockPong(in);
  (void)wire::DecodeChallenge(in);
  (void)wire::VerifyHelloProof(in, kSeedSecret, kSeedNonce);
  std::vector<uint8_t> resigned;
  (void)wire::ResignHello(in, kSeedSecret, kSeedNonce, resigned);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libFuzzer may pass (nullptr, 0); a span over it is still a valid empty span.
  std::span<const uint8_t> in(size == 0 ? reinterpret_cast<const uint8_t*>("") : data, size);
  DecodeAsStream(in);
  DecodeThroughReadFrame(in);
  DecodeAsRawPayload(in);
  return 0;
}

#ifdef COMMPROF_FUZZ_REPLAY_MAIN
#include "fuzz_replay.h"
// ---- plain replay driver (no libFuzzer) ----

namespace {

using commprof::fuzz::Rng;
using commprof::fuzz::Seeds;

// Values that sit on the decoder's limits: lengths, counts, the string and payload caps.
constexpr uint32_t kInteresting[] = {0,
                                     1,
                                     2,
                                     3,
                                     4,
                                     11,
                                     12,
                                     15,
                                     16,
                                     17,
                                     63,
                                     64,
                                     65,
                                     127,
                                     128,
                                     255,
                                     256,
                                     4095,
                                     4096,
                                     4097,
                                     65535,
                                     65536,
                                     0x00FFFFFF,
                                     wire::kMaxPayload,
                                     wire::kMaxPayload + 1,
                                     0x7FFFFFFF,
                                     0x80000000,
                                     0xFFFFFFFE,
                                     0xFFFFFFFF};

void PutU32At(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4 && at + i < b.size(); ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// One random edit of the kinds that matter to a length-prefixed format.
void MutateOnce(std::vector<uint8_t>& b, const Seeds& seeds, Rng& rng) {
  switch (rng.Below(10)) {
    case 0:  // flip one bit
      if (!b.empty()) b[rng.Below(b.size())] ^= static_cast<uint8_t>(1u << rng.Below(8));
      break;
    case 1:  // set one byte to an edge value or a random one
      if (!b.empty()) {
        static const uint8_t kBytes[] = {0x00, 0x01, 0x7F, 0x80, 0xFF};
        b[rng.Below(b.size())] = rng.Below(2) ? kBytes[rng.Below(5)] : static_cast<uint8_t>(rng.Next());
      }
      break;
    case 2:  // overwrite a u32 (a length or a count, most likely) with an interesting value
      if (b.size() >= 4) {
        size_t at = rng.Below(b.size() - 3);
        if (rng.Below(2)) at &= ~size_t{3};  // fields sit on 4-byte boundaries more often than not
        PutU32At(b, at, kInteresting[rng.Below(std::size(kInteresting))]);
      }
      break;
    case 3:  // truncate
      b.resize(rng.Below(b.size() + 1));
      break;
    case 4: {  // erase a range
      if (b.empty()) break;
      size_t at = rng.Below(b.size());
      size_t n = 1 + rng.Below(std::min<size_t>(64, b.size() - at));
      b.erase(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
      break;
    }
    case 5: {  // insert random bytes
      size_t at = rng.Below(b.size() + 1);
      size_t n = 1 + rng.Below(32);
      std::vector<uint8_t> ins(n);
      for (auto& x : ins) x = static_cast<uint8_t>(rng.Next());
      b.insert(b.begin() + static_cast<ptrdiff_t>(at), ins.begin(), ins.end());
      break;
    }
    case 6: {  // duplicate a chunk (repeated frames, repeated fields)
      if (b.empty()) break;
      size_t at = rng.Below(b.size());
      size_t n = 1 + rng.Below(std::min<size_t>(256, b.size() - at));
      std::vector<uint8_t> chunk(b.begin() + static_cast<ptrdiff_t>(at), b.begin() + static_cast<ptrdiff_t>(at + n));
      size_t to = rng.Below(b.size() + 1);
      b.insert(b.begin() + static_cast<ptrdiff_t>(to), chunk.begin(), chunk.end());
      break;
    }
    case 7: {  // splice: append (part of) another seed, as a following frame
      const auto& other = seeds[rng.Below(seeds.size())];
      size_t n = rng.Below(other.size() + 1);
      b.insert(b.end(), other.begin(), other.begin() + static_cast<ptrdiff_t>(n));
      break;
    }
    case 8:  // make the first header's length agree with what follows it (gets past the header)
      if (b.size() >= wire::kHeaderSize) PutU32At(b, 8, static_cast<uint32_t>(b.size() - wire::kHeaderSize));
      break;
    case 9:  // drop the 16-byte header: a bare payload for the raw Decode* calls
      if (b.size() >= wire::kHeaderSize) b.erase(b.begin(), b.begin() + wire::kHeaderSize);
      break;
  }
}

void Summary(const char* name, size_t seeds, uint64_t mutations, size_t bytes) {
  std::printf(
      "%s: %zu seed file(s) and %llu mutated input(s) (%zu bytes): %llu frame headers accepted, %llu payloads "
      "decoded, no failure\n",
      name, seeds, static_cast<unsigned long long>(mutations), bytes,
      static_cast<unsigned long long>(g_headers_accepted), static_cast<unsigned long long>(g_payloads_decoded));
}

}  // namespace

int main(int argc, char** argv) {
  return commprof::fuzz::ReplayMain(argc, argv, {"frame_decoder_replay", 20000, 6, MutateOnce, Summary});
}
#endif  // COMMPROF_FUZZ_REPLAY_MAIN
