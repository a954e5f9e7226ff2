// Wire codec: every frame round-trips, and every malformed header or payload is a Status.
#include "core/wire.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace commprof_test {
uint64_t LargeAllocationCount();
}

namespace commprof::wire {
namespace {

using Bytes = std::vector<uint8_t>;

commprof_event MakeEvent(uint64_t base, uint8_t kind) {
  commprof_event e{};
  e.start_ns = 1000 + base;
  e.end_ns = 2000 + base * 3;
  e.bytes = 4096 * (base + 1);
  e.comm_id = (uint64_t{3} << 32) | base;
  e.seq = 77 + base;
  e.correlation = static_cast<uint32_t>(0xC0000000u + base);
  e.name_id = static_cast<uint32_t>(5 + base);
  e.thread_id = static_cast<uint32_t>(base % 7);
  e.peer = base % 2 == 0 ? COMMPROF_NO_PEER : static_cast<int32_t>(base);
  e.device = base % 2 == 0 ? static_cast<uint16_t>(COMMPROF_HOST_DEVICE) : static_cast<uint16_t>(base);
  e.kind = kind;
  e.subtype = static_cast<uint8_t>(COMMPROF_OP_ALLREDUCE + base);
  e.datatype = COMMPROF_DT_FLOAT32;
  e.reduce_op = COMMPROF_RED_SUM;
  e.flags = static_cast<uint16_t>(base % 2 == 0 ? COMMPROF_FLAG_NONBLOCKING : COMMPROF_FLAG_INCOMPLETE);
  return e;
}

using test_support::ExpectEventEq;
using test_support::PayloadOf;

Hello MakeHello() {
  Hello h;
  h.rank = 3;
  h.world_size = 8;
  h.pid = 4242;
  h.start_steady_ns = 123456789012345ull;
  h.start_utc_ns = 1700000000123456789ull;
  h.host = "node-017";
  h.job_id = "job-42";
  return h;
}

Clock MakeClock() {
  Clock c;
  c.offset_ns = -123456789;
  c.drift_ppm = 1.25;
  c.error_bound_ns = 4500;
  c.anchor_local_ns = 999999999ull;
  c.method = "mpi-pingpong";
  c.points = {{1000, -123456789, 12}, {int64_t{1} << 42, -123400000, 4500}, {-5, INT64_MIN, INT64_MAX}};
  c.samples = {{10, 20, 30}, {40, 55, 70}, {1ull << 40, (1ull << 40) + 5, (1ull << 40) + 11}};
  return c;
}

Bytes ClockPingPayload() {
  Bytes frame;
  AppendClockPing(frame, 0x0123456789ABCDEFull);
  return PayloadOf(frame, FrameType::kClockPing);
}

Bytes ClockPongPayload() {
  Bytes frame;
  AppendClockPong(frame, ClockPong{0x0123456789ABCDEFull, ~uint64_t{0} - 1});
  return PayloadOf(frame, FrameType::kClockPong);
}

// Little-endian u64 at `at`.
uint64_t U64At(const Bytes& b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b.at(at + i)) << (8 * i);
  return v;
}

Bye MakeBye() {
  Bye b;
  b.counters = {{"events_recorded", 1000}, {"dropped_ring_full", 7}, {"spooled", 0}, {"big", ~uint64_t{0}}};
  return b;
}

Bytes HelloPayload(const std::string& secret) {
  Bytes frame;
  AppendHello(frame, MakeHello(), secret);
  return PayloadOf(frame, FrameType::kHello);
}

Bytes StringsPayload() {
  std::vector<std::string_view> s = {"MPI_Allreduce", "", "名前", "step"};
  Bytes frame;
  AppendStrings(frame, 5, s);
  return PayloadOf(frame, FrameType::kStrings);
}

Bytes EventsPayload(const std::vector<commprof_event>& events, uint64_t batch_seq = 9) {
  Bytes frame;
  AppendEvents(frame, batch_seq, events.data(), events.size());
  EXPECT_EQ(frame.size(), EventsFrameSize(events.size()));
  return PayloadOf(frame, FrameType::kEvents);
}

std::vector<commprof_event> ThreeEvents() {
  return {MakeEvent(0, COMMPROF_KIND_MPI_COLLECTIVE), MakeEvent(1, COMMPROF_KIND_MPI_P2P),
          MakeEvent(2, COMMPROF_KIND_NCCL_COLLECTIVE)};
}

Bytes HeaderBytes(uint32_t magic, uint16_t version, uint16_t type, uint32_t len, uint32_t reserved) {
  Bytes b;
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(magic >> (8 * i)));
  for (int i = 0; i < 2; ++i) b.push_back(static_cast<uint8_t>(version >> (8 * i)));
  for (int i = 0; i < 2; ++i) b.push_back(static_cast<uint8_t>(type >> (8 * i)));
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(len >> (8 * i)));
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(reserved >> (8 * i)));
  return b;
}

// ---- round trips ----

TEST(WireCodec, HelloRoundTripsEveryFieldAndCarriesTheHmacOfItsBody) {
  Bytes payload = HelloPayload("s3cret");
  auto h = DecodeHello(payload);
  ASSERT_TRUE(h.ok()) << h.status().message();
  Hello want = MakeHello();
  EXPECT_EQ(h->rank, want.rank);
  EXPECT_EQ(h->world_size, want.world_size);
  EXPECT_EQ(h->pid, want.pid);
  EXPECT_EQ(h->start_steady_ns, want.start_steady_ns);
  EXPECT_EQ(h->start_utc_ns, want.start_utc_ns);
  EXPECT_EQ(h->host, want.host);
  EXPECT_EQ(h->job_id, want.job_id);
  auto mac = HmacSha256("s3cret", std::span<const uint8_t>(payload.data(), payload.size() - kProofSize));
  EXPECT_EQ(h->proof, mac);
}

TEST(WireCodec, HelloAckRoundTripsAcceptanceAndReason) {
  for (bool accepted : {true, false}) {
    Bytes frame;
    AppendHelloAck(frame, HelloAck{accepted, accepted ? "" : "wrong HMAC proof"});
    auto a = DecodeHelloAck(PayloadOf(frame, FrameType::kHelloAck));
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(a->accepted, accepted);
    EXPECT_EQ(a->reason, accepted ? "" : "wrong HMAC proof");
  }
}

TEST(WireCodec, StringsRoundTripFirstIdAndEveryStringInOrder) {
  auto s = DecodeStrings(StringsPayload());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->first_id, 5u);
  EXPECT_EQ(s->strings, (std::vector<std::string>{"MPI_Allreduce", "", "名前", "step"}));
}

TEST(WireCodec, EncoderCutsStringsAtTheLengthLimitSoTheDecoderAcceptsThem) {
  std::string long_name(kMaxStringLen + 100, 'x');
  std::vector<std::string_view> in = {long_name};
  Bytes frame;
  AppendStrings(frame, 0, in);
  auto s = DecodeStrings(PayloadOf(frame, FrameType::kStrings));
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->strings.size(), 1u);
  EXPECT_EQ(s->strings[0], std::string(kMaxStringLen, 'x'));
}

TEST(WireCodec, EventsRoundTripSeveralDistinctEventsFieldByField) {
  auto in = ThreeEvents();
  auto e = DecodeEvents(EventsPayload(in, 12345));
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->batch_seq, 12345u);
  ASSERT_EQ(e->events.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) ExpectEventEq(e->events[i], in[i], i);
}

TEST(WireCodec, EmptyEventsBatchRoundTrips) {
  auto e = DecodeEvents(EventsPayload({}, 3));
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->batch_seq, 3u);
  EXPECT_TRUE(e->events.empty());
}

TEST(WireCodec, ClockRoundTripsModelAndSamples) {
  Bytes frame;
  AppendClock(frame, MakeClock());
  auto c = DecodeClock(PayloadOf(frame, FrameType::kClock));
  ASSERT_TRUE(c.ok()) << c.status().message();
  Clock want = MakeClock();
  EXPECT_EQ(c->offset_ns, want.offset_ns);
  EXPECT_EQ(c->drift_ppm, want.drift_ppm);
  EXPECT_EQ(c->error_bound_ns, want.error_bound_ns);
  EXPECT_EQ(c->anchor_local_ns, want.anchor_local_ns);
  EXPECT_EQ(c->method, want.method);
  ASSERT_EQ(c->points.size(), want.points.size());
  for (size_t i = 0; i < want.points.size(); ++i) {
    EXPECT_EQ(c->points[i].local_ns, want.points[i].local_ns) << i;
    EXPECT_EQ(c->points[i].offset_ns, want.points[i].offset_ns) << i;
    EXPECT_EQ(c->points[i].half_rtt_ns, want.points[i].half_rtt_ns) << i;
  }
  ASSERT_EQ(c->samples.size(), want.samples.size());
  for (size_t i = 0; i < want.samples.size(); ++i) {
    EXPECT_EQ(c->samples[i].local_send_ns, want.samples[i].local_send_ns) << i;
    EXPECT_EQ(c->samples[i].reference_ns, want.samples[i].reference_ns) << i;
    EXPECT_EQ(c->samples[i].local_recv_ns, want.samples[i].local_recv_ns) << i;
  }
}

TEST(WireCodec, ClockPayloadHasTheDocumentedLayout) {
  // offset, drift, bound, anchor (4 x 8) | method str | u32 point_count | 24 x points |
  // u32 sample_count | 24 x samples (docs/wire-protocol.md)
  Clock c = MakeClock();
  Bytes frame;
  AppendClock(frame, c);
  Bytes p = PayloadOf(frame, FrameType::kClock);
  size_t method_end = 32 + 4 + c.method.size();
  ASSERT_EQ(p.size(), method_end + 4 + 24 * 3 + 4 + 24 * 3);
  EXPECT_EQ(U64At(p, 0), static_cast<uint64_t>(int64_t{-123456789}));
  double drift = 0;
  uint64_t bits = U64At(p, 8);
  std::memcpy(&drift, &bits, sizeof drift);
  EXPECT_EQ(drift, 1.25);
  EXPECT_EQ(U64At(p, 16), 4500u);
  EXPECT_EQ(U64At(p, 24), 999999999u);
  EXPECT_EQ(p[32], c.method.size());
  EXPECT_EQ(std::string(p.begin() + 36, p.begin() + static_cast<long>(method_end)), "mpi-pingpong");
  EXPECT_EQ(p[method_end], 3u) << "point_count";
  EXPECT_EQ(U64At(p, method_end + 4), 1000u) << "first point's local_ns";
  EXPECT_EQ(U64At(p, method_end + 4 + 8), static_cast<uint64_t>(int64_t{-123456789})) << "its offset_ns";
  EXPECT_EQ(U64At(p, method_end + 4 + 16), 12u) << "its half_rtt_ns";
  size_t samples_at = method_end + 4 + 24 * 3;
  EXPECT_EQ(p[samples_at], 3u) << "sample_count";
  EXPECT_EQ(U64At(p, samples_at + 4), 10u);
  EXPECT_EQ(U64At(p, samples_at + 4 + 8), 20u);
  EXPECT_EQ(U64At(p, samples_at + 4 + 16), 30u);
}

TEST(WireCodec, ClockWithoutPointsOrSamplesRoundTrips) {
  Clock in;
  in.method = "none";
  Bytes frame;
  AppendClock(frame, in);
  Bytes p = PayloadOf(frame, FrameType::kClock);
  EXPECT_EQ(p.size(), 32u + 4 + 4 + 4 + 4);
  auto c = DecodeClock(p);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->error_bound_ns, -1);
  EXPECT_EQ(c->method, "none");
  EXPECT_TRUE(c->points.empty());
  EXPECT_TRUE(c->samples.empty());
}

TEST(WireCodec, ClockPingRoundTripsItsSendTimeInAnEightBytePayload) {
  for (uint64_t t : {uint64_t{0}, uint64_t{0x0123456789ABCDEFull}, ~uint64_t{0}}) {
    Bytes frame;
    AppendClockPing(frame, t);
    ASSERT_EQ(frame.size(), kHeaderSize + 8);
    Bytes p = PayloadOf(frame, FrameType::kClockPing);
    EXPECT_EQ(U64At(p, 0), t);
    auto got = DecodeClockPing(p);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got.value(), t);
  }
}

TEST(WireCodec, ClockPongRoundTripsTheEchoedSendTimeAndTheReferenceTime) {
  Bytes p = ClockPongPayload();
  ASSERT_EQ(p.size(), 16u);
  EXPECT_EQ(U64At(p, 0), 0x0123456789ABCDEFull) << "local_send_ns first";
  EXPECT_EQ(U64At(p, 8), ~uint64_t{0} - 1) << "reference_ns second";
  auto got = DecodeClockPong(p);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->local_send_ns, 0x0123456789ABCDEFull);
  EXPECT_EQ(got->reference_ns, ~uint64_t{0} - 1);
}

TEST(WireCodec, ByeRoundTripsCountersInOrder) {
  Bytes frame;
  AppendBye(frame, MakeBye());
  auto b = DecodeBye(PayloadOf(frame, FrameType::kBye));
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->counters, MakeBye().counters);
}

TEST(WireCodec, FrameTypeNamesAreTheDocumentedOnes) {
  EXPECT_STREQ(FrameTypeName(FrameType::kHello), "hello");
  EXPECT_STREQ(FrameTypeName(FrameType::kHelloAck), "hello-ack");
  EXPECT_STREQ(FrameTypeName(FrameType::kStrings), "strings");
  EXPECT_STREQ(FrameTypeName(FrameType::kEvents), "events");
  EXPECT_STREQ(FrameTypeName(FrameType::kClock), "clock");
  EXPECT_STREQ(FrameTypeName(FrameType::kBye), "bye");
  EXPECT_STREQ(FrameTypeName(FrameType::kClockPing), "clock-ping");
  EXPECT_STREQ(FrameTypeName(FrameType::kClockPong), "clock-pong");
  EXPECT_STREQ(FrameTypeName(FrameType::kChallenge), "challenge");
  EXPECT_STREQ(FrameTypeName(FrameType::kBatchAck), "batch-ack");
  EXPECT_STREQ(FrameTypeName(FrameType::kHangQuery), "hang-query");
  EXPECT_STREQ(FrameTypeName(FrameType::kHangState), "hang-state");
  EXPECT_STREQ(FrameTypeName(FrameType::kHangAbort), "hang-abort");
  EXPECT_STREQ(FrameTypeName(FrameType::kRelayHello), "relay-hello");
  EXPECT_STREQ(FrameTypeName(FrameType::kRelayFinish), "relay-finish");
  EXPECT_STREQ(FrameTypeName(FrameType::kRelayDone), "relay-done");
  EXPECT_STREQ(FrameTypeName(FrameType::kRelayProgress), "relay-progress");
  EXPECT_STREQ(FrameTypeName(static_cast<FrameType>(18)), "unknown");
  EXPECT_STREQ(FrameTypeName(static_cast<FrameType>(99)), "unknown");
}

// ---- header ----

TEST(WireCodec, DecodeHeaderAcceptsAWellFormedHeader) {
  auto h = DecodeHeader(HeaderBytes(kMagic, kVersion, 4, kMaxPayload, 0));
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->type, FrameType::kEvents);
  EXPECT_EQ(h->payload_len, kMaxPayload);
}

TEST(WireCodec, DecodeHeaderRejectsBadMagic) {
  auto h = DecodeHeader(HeaderBytes(0x46575044, kVersion, 1, 0, 0));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(h.status().message().find("magic"), std::string::npos) << h.status().message();
}

TEST(WireCodec, DecodeHeaderRejectsUnsupportedVersion) {
  auto h = DecodeHeader(HeaderBytes(kMagic, 2, 1, 0, 0));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("version 2"), std::string::npos) << h.status().message();
  EXPECT_FALSE(DecodeHeader(HeaderBytes(kMagic, 0, 1, 0, 0)).ok());
}

TEST(WireCodec, DecodeHeaderAcceptsEveryFrameTypeFromHelloToRelayProgress) {
  for (uint16_t type = 1; type <= 17; ++type) {
    auto h = DecodeHeader(HeaderBytes(kMagic, kVersion, type, 16, 0));
    ASSERT_TRUE(h.ok()) << type << ": " << h.status().message();
    EXPECT_EQ(static_cast<uint16_t>(h->type), type);
  }
}

TEST(WireCodec, DecodeHeaderRejectsUnknownFrameType) {
  for (uint16_t type : {uint16_t{0}, uint16_t{18}, uint16_t{0xFFFF}}) {
    auto h = DecodeHeader(HeaderBytes(kMagic, kVersion, type, 0, 0));
    ASSERT_FALSE(h.ok()) << type;
    EXPECT_NE(h.status().message().find("unknown frame type " + std::to_string(type)), std::string::npos)
        << h.status().message();
  }
}

TEST(WireCodec, DecodeHeaderRejectsPayloadLongerThanLimit) {
  for (uint32_t len : {kMaxPayload + 1, uint32_t{0xFFFFFFFF}}) {
    auto h = DecodeHeader(HeaderBytes(kMagic, kVersion, 4, len, 0));
    ASSERT_FALSE(h.ok()) << len;
    EXPECT_NE(h.status().message().find("exceeds the limit"), std::string::npos) << h.status().message();
  }
}

TEST(WireCodec, DecodeHeaderRejectsNonzeroReserved) {
  auto h = DecodeHeader(HeaderBytes(kMagic, kVersion, 1, 0, 1));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("reserved"), std::string::npos) << h.status().message();
}

TEST(WireCodec, DecodeHeaderRejectsAShortOrLongBuffer) {
  Bytes good = HeaderBytes(kMagic, kVersion, 1, 0, 0);
  EXPECT_FALSE(DecodeHeader(std::span<const uint8_t>(good.data(), kHeaderSize - 1)).ok());
  good.push_back(0);
  EXPECT_FALSE(DecodeHeader(good).ok());
}

// ---- truncation and trailing bytes ----

struct DecoderCase {
  const char* name;
  Bytes payload;
  std::function<Status(std::span<const uint8_t>)> decode;
};

std::vector<DecoderCase> AllDecoders() {
  Bytes ack_frame;
  AppendHelloAck(ack_frame, HelloAck{false, "no"});
  Bytes clock_frame;
  AppendClock(clock_frame, MakeClock());
  Bytes bye_frame;
  AppendBye(bye_frame, MakeBye());
  return {
      {"hello", HelloPayload("k"), [](auto p) { return DecodeHello(p).status(); }},
      {"hello-ack", PayloadOf(ack_frame, FrameType::kHelloAck), [](auto p) { return DecodeHelloAck(p).status(); }},
      {"strings", StringsPayload(), [](auto p) { return DecodeStrings(p).status(); }},
      {"events", EventsPayload(ThreeEvents()), [](auto p) { return DecodeEvents(p).status(); }},
      {"clock", PayloadOf(clock_frame, FrameType::kClock), [](auto p) { return DecodeClock(p).status(); }},
      {"bye", PayloadOf(bye_frame, FrameType::kBye), [](auto p) { return DecodeBye(p).status(); }},
      {"clock-ping", ClockPingPayload(), [](auto p) { return DecodeClockPing(p).status(); }},
      {"clock-pong", ClockPongPayload(), [](auto p) { return DecodeClockPong(p).status(); }},
  };
}

TEST(WireCodec, EveryDecoderRejectsEveryTruncationOfAValidPayload) {
  for (const auto& c : AllDecoders()) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(c.decode(c.payload).ok()) << "the untruncated payload must decode";
    for (size_t len = 0; len < c.payload.size(); ++len) {
      Status st = c.decode(std::span<const uint8_t>(c.payload.data(), len));
      EXPECT_FALSE(st.ok()) << "prefix of " << len << " of " << c.payload.size() << " bytes accepted";
      EXPECT_EQ(st.code(), StatusCode::kCorrupt) << len;
    }
  }
}

TEST(WireCodec, EveryDecoderRejectsTrailingBytes) {
  for (auto& c : AllDecoders()) {
    SCOPED_TRACE(c.name);
    c.payload.push_back(0);
    Status st = c.decode(c.payload);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("trailing bytes"), std::string::npos) << st.message();
  }
}

// A count field claiming far more items than the payload holds: rejected before any allocation.
void ExpectCountRejected(const char* name, const Bytes& payload,
                         const std::function<Status(std::span<const uint8_t>)>& decode) {
  SCOPED_TRACE(name);
  uint64_t before = commprof_test::LargeAllocationCount();
  Status st = decode(payload);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("count exceeds the frame's remaining bytes"), std::string::npos) << st.message();
  EXPECT_EQ(commprof_test::LargeAllocationCount(), before) << "the decoder allocated for the claimed count";
}

// The probe the "without allocating" tests rely on does see a large allocation.
TEST(LargeAllocationProbe, CountsAllocationsOfSixteenMebibytesOrMore) {
  uint64_t before = commprof_test::LargeAllocationCount();
  void* small = ::operator new(kMaxPayload - 1);
  ::operator delete(small);
  EXPECT_EQ(commprof_test::LargeAllocationCount(), before);
  void* big = ::operator new(kMaxPayload);
  ::operator delete(big);
  EXPECT_EQ(commprof_test::LargeAllocationCount(), before + 1);
  std::vector<uint8_t> resized;
  resized.resize(kMaxPayload + 1);
  EXPECT_EQ(commprof_test::LargeAllocationCount(), before + 2);
}

TEST(WireCodec, HugeItemCountsAreRejectedWithoutAllocating) {
  // strings: first_id, count = 0xFFFFFFFF, one short string
  Bytes strings = {0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0, 'x'};
  ExpectCountRejected("strings", strings, [](auto p) { return DecodeStrings(p).status(); });
  // events: batch_seq, count = 0xFFFFFFFF, one event's worth of bytes
  Bytes events(8, 0);
  events.insert(events.end(), {0xFF, 0xFF, 0xFF, 0xFF});
  events.resize(events.size() + sizeof(commprof_event), 0);
  ExpectCountRejected("events", events, [](auto p) { return DecodeEvents(p).status(); });
  // events: a count just one more than the bytes hold
  Bytes events2 = EventsPayload(ThreeEvents());
  events2[8] = 4;
  ExpectCountRejected("events+1", events2, [](auto p) { return DecodeEvents(p).status(); });
  // bye: counter_count = 0xFFFFFFFF
  Bytes bye = {0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  ExpectCountRejected("bye", bye, [](auto p) { return DecodeBye(p).status(); });
  // clock: point_count = 0xFFFFFFFF after an empty method string
  Bytes clock(32, 0);
  clock.insert(clock.end(), {0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF});
  clock.resize(clock.size() + 24, 0);
  ExpectCountRejected("clock points", clock, [](auto p) { return DecodeClock(p).status(); });
  // clock: no points, then sample_count = 0xFFFFFFFF
  Bytes clock2(32, 0);
  clock2.insert(clock2.end(), {0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF});
  clock2.resize(clock2.size() + 24, 0);
  ExpectCountRejected("clock samples", clock2, [](auto p) { return DecodeClock(p).status(); });
}

TEST(WireCodec, ClockPointCountOneTooLargeIsCaughtByTheFieldsAfterIt) {
  // a point_count one more than the points that follow (3 claimed as 4)
  Bytes frame;
  AppendClock(frame, MakeClock());
  Bytes clock3 = PayloadOf(frame, FrameType::kClock);
  size_t point_count_at = 32 + 4 + MakeClock().method.size();
  ASSERT_EQ(clock3[point_count_at], 3u);
  // 4 x 24 bytes fit in what is left, so the count check passes; the fourth "point" eats the
  // sample_count and 20 bytes of sample 0, the next u32 (the high half of that sample's
  // local_recv_ns, 0) reads as sample_count 0, and the two samples left over are trailing bytes.
  clock3[point_count_at] = 4;
  auto d3 = DecodeClock(clock3);
  ASSERT_FALSE(d3.ok());
  EXPECT_EQ(d3.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(d3.status().message().find("trailing bytes"), std::string::npos) << d3.status().message();
}

TEST(WireCodec, StringLongerThanLimitIsRejected) {
  // strings frame with one string whose length field says 4097
  Bytes p = {0, 0, 0, 0, 1, 0, 0, 0, 0x01, 0x10, 0, 0};
  p.resize(p.size() + kMaxStringLen + 1, 'a');
  auto s = DecodeStrings(p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("4096-byte limit"), std::string::npos) << s.status().message();
}

TEST(WireCodec, EventWithUnknownKindIsRejectedNamingTheEventIndex) {
  for (uint8_t bad : {uint8_t{COMMPROF_KIND_NONE}, uint8_t{COMMPROF_KIND_COUNT_}, uint8_t{200}}) {
    auto in = ThreeEvents();
    in[2].kind = bad;
    auto e = DecodeEvents(EventsPayload(in));
    ASSERT_FALSE(e.ok()) << int{bad};
    const std::string& m = e.status().message();
    EXPECT_NE(m.find("event 2"), std::string::npos) << m;
    EXPECT_NE(m.find("'kind'"), std::string::npos) << m;
    EXPECT_NE(m.find("unknown kind " + std::to_string(bad)), std::string::npos) << m;
  }
}

TEST(WireCodec, EventEndingBeforeItStartsIsRejectedNamingTheEventIndex) {
  auto in = ThreeEvents();
  in[1].end_ns = in[1].start_ns - 1;
  auto e = DecodeEvents(EventsPayload(in));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("event 1"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("end_ns"), std::string::npos) << e.status().message();
  // an instantaneous event (end == start) is fine
  in[1].end_ns = in[1].start_ns;
  EXPECT_TRUE(DecodeEvents(EventsPayload(in)).ok());
}

TEST(WireCodec, HelloWithRankOutsideWorldIsRejected) {
  const std::vector<std::pair<uint32_t, uint32_t>> cases = {{8, 8}, {0, 0}, {9, 8}};
  for (auto [rank, world] : cases) {
    Hello h = MakeHello();
    h.rank = rank;
    h.world_size = world;
    Bytes frame;
    AppendHello(frame, h, "k");
    auto d = DecodeHello(PayloadOf(frame, FrameType::kHello));
    ASSERT_FALSE(d.ok()) << rank << "/" << world;
    EXPECT_NE(d.status().message().find("outside world size"), std::string::npos) << d.status().message();
  }
}

// ---- HMAC ----

TEST(WireCodec, VerifyHelloProofAcceptsTheRightSecret) {
  EXPECT_TRUE(VerifyHelloProof(HelloPayload("job secret"), "job secret"));
}

TEST(WireCodec, VerifyHelloProofRejectsAWrongOrEmptySecret) {
  Bytes p = HelloPayload("job secret");
  EXPECT_FALSE(VerifyHelloProof(p, "job secreT"));
  EXPECT_FALSE(VerifyHelloProof(p, "job secret "));
  EXPECT_FALSE(VerifyHelloProof(p, ""));
  // and a hello made with the empty secret does not pass for a real one
  EXPECT_FALSE(VerifyHelloProof(HelloPayload(""), "job secret"));
}

TEST(WireCodec, VerifyHelloProofRejectsAPayloadWithAnyOneByteFlipped) {
  Bytes p = HelloPayload("job secret");
  for (size_t i = 0; i < p.size(); ++i) {
    Bytes q = p;
    q[i] ^= 0x01;
    EXPECT_FALSE(VerifyHelloProof(q, "job secret")) << "flipped byte " << i;
  }
}

TEST(WireCodec, VerifyHelloProofRejectsAPayloadShorterThanTheProof) {
  Bytes p(kProofSize - 1, 0);
  EXPECT_FALSE(VerifyHelloProof(p, ""));
}

TEST(WireCodec, HmacSha256MatchesRfc4231TestCase2) {
  std::string data = "what do ya want for nothing?";
  auto mac = HmacSha256("Jefe", std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  const uint8_t want[kProofSize] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                    0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                    0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_EQ(std::memcmp(mac.data(), want, kProofSize), 0);
}

TEST(WireCodec, HelloWithAWorldAboveTheCapIsRejectedNamingTheField) {
  for (uint32_t world : {kMaxWorldSize + 1, uint32_t{4000000000u}}) {
    Hello h = MakeHello();
    h.rank = 0;
    h.world_size = world;
    Bytes frame;
    AppendHello(frame, h, "k");
    auto d = DecodeHello(PayloadOf(frame, FrameType::kHello));
    ASSERT_FALSE(d.ok()) << world;
    EXPECT_EQ(d.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(
        d.status().message().find("'world_size': " + std::to_string(world) + " ranks exceeds the limit of 1048576"),
        std::string::npos)
        << d.status().message();
  }
  // the cap itself is a valid world, its last rank a valid rank
  Hello h = MakeHello();
  h.world_size = kMaxWorldSize;
  h.rank = kMaxWorldSize - 1;
  Bytes frame;
  AppendHello(frame, h, "k");
  auto d = DecodeHello(PayloadOf(frame, FrameType::kHello));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->rank, kMaxWorldSize - 1);
}

TEST(WireCodec, LongestHelloIsExactlyKMaxHelloPayloadAndDecodes) {
  Hello h = MakeHello();
  h.host = std::string(kMaxStringLen + 100, 'h');  // the encoder cuts strings at the limit
  h.job_id = std::string(kMaxStringLen, 'j');
  h.incarnation = 7;
  Bytes frame;
  AppendHello(frame, h, "k");
  EXPECT_EQ(frame.size() - kHeaderSize, kMaxHelloPayload);
  EXPECT_EQ(kMaxHelloPayload, 72u + 2 * 4096u);
  EXPECT_TRUE(DecodeHello(PayloadOf(frame, FrameType::kHello)).ok());
}

// An elastic restart's incarnation (docs/wire-protocol.md, hello): on the wire only when above 0,
// so a first incarnation's hello is the bytes of a collector from before the field; the proof
// covers it.
TEST(WireCodec, HelloIncarnationIsWrittenOnlyAboveZeroAndCoveredByTheProof) {
  Hello h = MakeHello();
  Bytes first, restarted;
  AppendHello(first, h, "k");
  h.incarnation = 2;
  AppendHello(restarted, h, "k");
  ASSERT_EQ(restarted.size(), first.size() + 4);
  auto a = DecodeHello(PayloadOf(first, FrameType::kHello));
  auto b = DecodeHello(PayloadOf(restarted, FrameType::kHello));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << b.status().message();
  EXPECT_EQ(a->incarnation, 0u);
  EXPECT_EQ(b->incarnation, 2u);
  EXPECT_TRUE(VerifyHelloProof(PayloadOf(restarted, FrameType::kHello), "k"));
  // The incarnation changed after signing: the proof no longer holds.
  Bytes tampered = restarted;
  const size_t at = tampered.size() - kProofSize - 4;
  tampered[at] = 3;
  EXPECT_FALSE(VerifyHelloProof(PayloadOf(tampered, FrameType::kHello), "k"));
  // Written as 0: refused, naming the field.
  Bytes zero;
  h.incarnation = 0;
  AppendHello(zero, h, "k");
  const auto zero_payload = PayloadOf(zero, FrameType::kHello);
  std::vector<uint8_t> payload(zero_payload.begin(), zero_payload.end());
  payload.insert(payload.end() - kProofSize, 4, 0);
  auto z = DecodeHello(payload);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("incarnation"), std::string::npos) << z.status().message();
}

// ---- challenge and the TCP proof ----

Nonce TestNonce(uint8_t seed) {
  Nonce n{};
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(seed + 7 * i);
  return n;
}

TEST(WireCodec, ChallengeRoundTripsItsNonceAndRejectsAnyOtherLength) {
  Bytes frame;
  AppendChallenge(frame, TestNonce(3));
  EXPECT_EQ(frame.size(), kHeaderSize + kNonceSize);
  auto n = DecodeChallenge(PayloadOf(frame, FrameType::kChallenge));
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n.value(), TestNonce(3));
  Bytes p = PayloadOf(frame, FrameType::kChallenge);
  Bytes shorter(p.begin(), p.end() - 1), longer = p;
  longer.push_back(0);
  auto s = DecodeChallenge(shorter);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("challenge frame, field 'nonce': truncated"), std::string::npos)
      << s.status().message();
  EXPECT_FALSE(DecodeChallenge(longer).ok());
}

TEST(WireCodec, TcpProofIsTheHmacOfNonceThenBodyAndVerifiesOnlyWithThatNonce) {
  Bytes frame;
  AppendHello(frame, MakeHello(), "s3cret", TestNonce(1));
  Bytes payload = PayloadOf(frame, FrameType::kHello);
  const Nonce nonce = TestNonce(1);
  Bytes message(nonce.begin(), nonce.end());
  message.insert(message.end(), payload.begin(), payload.end() - kProofSize);
  auto want = HmacSha256("s3cret", message);
  EXPECT_EQ(0, std::memcmp(want.data(), payload.data() + payload.size() - kProofSize, kProofSize));
  EXPECT_TRUE(VerifyHelloProof(payload, "s3cret", TestNonce(1)));
  EXPECT_FALSE(VerifyHelloProof(payload, "s3cret", TestNonce(2))) << "another connection's nonce";
  EXPECT_FALSE(VerifyHelloProof(payload, "s3cret")) << "a TCP proof is not a spool proof";
  EXPECT_FALSE(VerifyHelloProof(payload, "wrong", TestNonce(1)));
  EXPECT_FALSE(VerifyHelloProof(HelloPayload("s3cret"), "s3cret", TestNonce(1))) << "a spool proof is not a TCP one";
}

TEST(WireCodec, ResignHelloReplacesTheSpoolProofWithTheTcpProofAndKeepsTheBody) {
  Bytes spool;
  AppendHello(spool, MakeHello(), "s3cret");
  Bytes resigned;
  ASSERT_TRUE(ResignHello(spool, "s3cret", TestNonce(5), resigned).ok());
  Bytes direct;
  AppendHello(direct, MakeHello(), "s3cret", TestNonce(5));
  EXPECT_EQ(resigned, direct);
  Bytes out;
  EXPECT_FALSE(ResignHello(std::span<const uint8_t>(spool).first(kHeaderSize - 1), "s3cret", TestNonce(5), out).ok());
  EXPECT_FALSE(ResignHello(std::span<const uint8_t>(spool).first(spool.size() - 1), "s3cret", TestNonce(5), out).ok())
      << "a frame cut short";
  Bytes bye;
  AppendBye(bye, MakeBye());
  auto st = ResignHello(bye, "s3cret", TestNonce(5), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not one whole hello frame"), std::string::npos) << st.message();
  EXPECT_TRUE(out.empty()) << "nothing appended on failure";
}

TEST(WireCodec, RandomNonceDrawsDistinctNonces) {
  auto a = RandomNonce(), b = RandomNonce();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a.value(), b.value());
  EXPECT_NE(a.value(), Nonce{});
}

// Independent vectors for the self-contained SHA-256 behind HmacSha256 (RFC 4231 cases 1, 6, 7:
// a 20-byte key, and keys longer than the 64-byte block, which are hashed first).
std::string Hex(const std::array<uint8_t, kProofSize>& mac) {
  std::string s;
  char b[3];
  for (uint8_t v : mac) {
    std::snprintf(b, sizeof b, "%02x", v);
    s += b;
  }
  return s;
}
std::span<const uint8_t> AsBytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(WireCodec, HmacSha256MatchesRfc4231TestCases1And6And7) {
  EXPECT_EQ(Hex(HmacSha256(std::string(20, '\x0b'), AsBytes("Hi There"))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const std::string big_key(131, '\xaa');
  EXPECT_EQ(Hex(HmacSha256(big_key, AsBytes("Test Using Larger Than Block-Size Key - Hash Key First"))),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(Hex(HmacSha256(big_key, AsBytes("This is a test using a larger than block-size key and a larger than "
                                            "block-size data. The key needs to be hashed before being used by the "
                                            "HMAC algorithm."))),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(WireCodec, HmacSha256WithAPrefixEqualsItOverTheConcatenationAtEveryLengthAcrossBlockEdges) {
  // Lengths around the 64-byte block and the 56-byte padding edge, split at every point.
  Bytes data(130);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 1);
  for (size_t n : {0u, 1u, 55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 128u, 130u}) {
    std::span<const uint8_t> all(data.data(), n);
    auto whole = HmacSha256("key", all);
    for (size_t cut = 0; cut <= n; ++cut) {
      ASSERT_EQ(HmacSha256("key", all.subspan(cut), all.first(cut)), whole) << n << " split at " << cut;
    }
  }
}

// ---- ReadFrame ----

struct TmpFile {
  std::FILE* f = std::tmpfile();
  ~TmpFile() {
    if (f != nullptr) std::fclose(f);
  }
  void Write(const Bytes& b) {
    ASSERT_EQ(std::fwrite(b.data(), 1, b.size(), f), b.size());
    std::fflush(f);
    std::rewind(f);
  }
};

Bytes TwoFrames() {
  Bytes b;
  AppendHello(b, MakeHello(), "k");
  auto ev = ThreeEvents();
  AppendEvents(b, 0, ev.data(), ev.size());
  return b;
}

TEST(WireReadFrame, ReadsWholeFramesThenReportsCleanEndOfFile) {
  TmpFile t;
  ASSERT_NE(t.f, nullptr);
  t.Write(TwoFrames());
  FrameHeader h;
  Bytes payload;
  auto r1 = ReadFrame(t.f, h, payload);
  ASSERT_TRUE(r1.ok()) << r1.status().message();
  EXPECT_TRUE(r1.value());
  EXPECT_EQ(h.type, FrameType::kHello);
  EXPECT_TRUE(DecodeHello(payload).ok());
  auto r2 = ReadFrame(t.f, h, payload);
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_TRUE(r2.value());
  EXPECT_EQ(h.type, FrameType::kEvents);
  auto e = DecodeEvents(payload);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->events.size(), 3u);
  auto r3 = ReadFrame(t.f, h, payload);
  ASSERT_TRUE(r3.ok()) << r3.status().message();
  EXPECT_FALSE(r3.value());
}

TEST(WireReadFrame, EmptyFileIsACleanEnd) {
  TmpFile t;
  ASSERT_NE(t.f, nullptr);
  FrameHeader h;
  Bytes payload;
  auto r = ReadFrame(t.f, h, payload);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r.value());
}

TEST(WireReadFrame, TruncatedHeaderNamesTheByteOffset) {
  Bytes b = TwoFrames();
  Bytes first;
  AppendHello(first, MakeHello(), "k");
  size_t second_at = first.size();
  b.resize(second_at + 5);  // 5 bytes of the second header
  TmpFile t;
  ASSERT_NE(t.f, nullptr);
  t.Write(b);
  FrameHeader h;
  Bytes payload;
  ASSERT_TRUE(ReadFrame(t.f, h, payload).ok());
  auto r = ReadFrame(t.f, h, payload);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError) << "truncation is an I/O-level end";
  EXPECT_NE(r.status().message().find("truncated frame header at byte " + std::to_string(second_at)), std::string::npos)
      << r.status().message();
}

TEST(WireReadFrame, TruncatedPayloadNamesTheFrameAndByteOffset) {
  Bytes b = TwoFrames();
  Bytes first;
  AppendHello(first, MakeHello(), "k");
  size_t second_at = first.size();
  b.pop_back();  // one byte short of the events frame
  TmpFile t;
  ASSERT_NE(t.f, nullptr);
  t.Write(b);
  FrameHeader h;
  Bytes payload;
  ASSERT_TRUE(ReadFrame(t.f, h, payload).ok());
  auto r = ReadFrame(t.f, h, payload);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError) << "truncation is an I/O-level end";
  EXPECT_NE(r.status().message().find("truncated events frame at byte " + std::to_string(second_at)), std::string::npos)
      << r.status().message();
}

TEST(WireReadFrame, InvalidHeaderNamesTheByteOffset) {
  Bytes b;
  AppendHello(b, MakeHello(), "k");
  size_t second_at = b.size();
  Bytes bad = HeaderBytes(kMagic, 2, 4, 0, 0);
  b.insert(b.end(), bad.begin(), bad.end());
  TmpFile t;
  ASSERT_NE(t.f, nullptr);
  t.Write(b);
  FrameHeader h;
  Bytes payload;
  ASSERT_TRUE(ReadFrame(t.f, h, payload).ok());
  auto r = ReadFrame(t.f, h, payload);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << "a whole but invalid frame is corrupt";
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("at byte " + std::to_string(second_at)), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace commprof::wire

namespace commprof::wire {
namespace {

TEST(WireCodec, BatchAckRoundTripsAndRejectsTruncationAndTrailingBytes) {
  std::vector<uint8_t> frame;
  AppendBatchAck(frame, BatchAck{123456789012ull, true});
  ASSERT_EQ(frame.size(), kHeaderSize + 9);
  auto h = DecodeHeader(std::span<const uint8_t>(frame.data(), kHeaderSize));
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->type, FrameType::kBatchAck);
  std::span<const uint8_t> payload(frame.data() + kHeaderSize, 9);
  auto a = DecodeBatchAck(payload);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->durable_batches, 123456789012ull);
  EXPECT_TRUE(a->bye_stored);
  EXPECT_FALSE(DecodeBatchAck(payload.first(8)).ok()) << "bye_stored missing";
  std::vector<uint8_t> longer(payload.begin(), payload.end());
  longer.push_back(0);
  EXPECT_FALSE(DecodeBatchAck(longer).ok()) << "trailing byte";
}

// A hang-state frame carries every list intact (in-flight ops with their stacks, recent
// collectives, memberships, call-site text), and each list's damage is named.
TEST(WireCodec, HangFramesRoundTripAndNameTheFieldAtFault) {
  HangState st;
  st.query_id = 7;
  st.local_now_ns = 5'000'000'000ull;
  st.last_completion_ns = 4'000'000'000ull;
  InflightOp op;
  op.event.kind = COMMPROF_KIND_MPI_COLLECTIVE;
  op.event.subtype = COMMPROF_OP_ALLREDUCE;
  op.event.comm_id = COMMPROF_COMM_WORLD_ID;
  op.event.seq = 41;
  op.event.bytes = 4096;
  op.event.start_ns = op.event.end_ns = 3'000'000'000ull;
  op.stack = 3;
  st.inflight.push_back(op);
  commprof_event done = op.event;
  done.seq = 40;
  done.end_ns = done.start_ns + 10;
  st.recent = {done, done};
  st.recent[1].seq = 39;
  st.comms = {{COMMPROF_COMM_WORLD_ID, 4, 2}, {(3ull << 32) | 1, 2, 1}};
  st.call_sites = {{3, "train_step <- main"}};
  std::vector<uint8_t> frame;
  AppendHangState(frame, st);
  auto h = DecodeHeader(std::span<const uint8_t>(frame.data(), kHeaderSize));
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->type, FrameType::kHangState);
  std::span<const uint8_t> payload(frame.data() + kHeaderSize, frame.size() - kHeaderSize);
  auto back = DecodeHangState(payload);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->query_id, 7u);
  EXPECT_EQ(back->local_now_ns, st.local_now_ns);
  EXPECT_EQ(back->last_completion_ns, st.last_completion_ns);
  ASSERT_EQ(back->inflight.size(), 1u);
  EXPECT_EQ(back->inflight[0].event.seq, 41u);
  EXPECT_EQ(back->inflight[0].stack, 3u);
  ASSERT_EQ(back->recent.size(), 2u);
  EXPECT_EQ(back->recent[1].seq, 39u);
  ASSERT_EQ(back->comms.size(), 2u);
  EXPECT_EQ(back->comms[1].comm_id, (3ull << 32) | 1);
  EXPECT_EQ(back->comms[1].rank_in_comm, 1u);
  ASSERT_EQ(back->call_sites.size(), 1u);
  EXPECT_EQ(back->call_sites[0].second, "train_step <- main");
  EXPECT_FALSE(DecodeHangState(payload.first(payload.size() - 1)).ok()) << "truncated";

  HangState bad = st;
  bad.comms[0].rank_in_comm = 4;
  frame.clear();
  AppendHangState(frame, bad);
  auto r = DecodeHangState(std::span<const uint8_t>(frame.data() + kHeaderSize, frame.size() - kHeaderSize));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rank_in_comm"), std::string::npos) << r.status().message();
  bad = st;
  bad.inflight[0].event.kind = COMMPROF_KIND_COUNT_;
  frame.clear();
  AppendHangState(frame, bad);
  r = DecodeHangState(std::span<const uint8_t>(frame.data() + kHeaderSize, frame.size() - kHeaderSize));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("inflight op 0, field 'kind'"), std::string::npos) << r.status().message();

  frame.clear();
  AppendHangQuery(frame, HangQuery{9, 16});
  auto q = DecodeHangQuery(std::span<const uint8_t>(frame.data() + kHeaderSize, frame.size() - kHeaderSize));
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->query_id, 9u);
  EXPECT_EQ(q->history, 16u);
  frame.clear();
  AppendHangAbort(frame, HangAbort{"rank 2 never entered MPI_Allreduce #41"});
  auto a = DecodeHangAbort(std::span<const uint8_t>(frame.data() + kHeaderSize, frame.size() - kHeaderSize));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->reason, "rank 2 never entered MPI_Allreduce #41");
}

// ---- relays (docs/scale.md#relays) ----

std::span<const uint8_t> PayloadOf(const std::vector<uint8_t>& frame) {
  return std::span<const uint8_t>(frame.data() + kHeaderSize, frame.size() - kHeaderSize);
}

TEST(WireCodec, RelayHelloRoundTripsAndIsProvenOverTheChallengeLikeAHello) {
  Nonce nonce{};
  for (size_t i = 0; i < nonce.size(); ++i) {
    nonce[i] = static_cast<uint8_t>(3 * i + 1);
  }
  RelayHello in{"job-7", "node017", 4242, "/lustre/run/job.h5.shards/node017-0-4242.h5", {}};
  std::vector<uint8_t> frame;
  AppendRelayHello(frame, in, "s3cret", nonce);
  auto h = DecodeHeader(std::span<const uint8_t>(frame.data(), kHeaderSize));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->type, FrameType::kRelayHello);
  auto out = DecodeRelayHello(PayloadOf(frame));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->job_id, "job-7");
  EXPECT_EQ(out->host, "node017");
  EXPECT_EQ(out->pid, 4242u);
  EXPECT_EQ(out->shard, in.shard);
  EXPECT_TRUE(VerifyHelloProof(PayloadOf(frame), "s3cret", nonce));
  EXPECT_FALSE(VerifyHelloProof(PayloadOf(frame), "other", nonce));
  Nonce other = nonce;
  other[0] ^= 1;
  EXPECT_FALSE(VerifyHelloProof(PayloadOf(frame), "s3cret", other)) << "a proof over another challenge passed";
  EXPECT_LE(PayloadOf(frame).size(), kMaxRelayHelloPayload);
  // Every truncation is refused, naming the field it ran out in.
  for (size_t n = 0; n < PayloadOf(frame).size(); ++n) {
    auto cut = DecodeRelayHello(PayloadOf(frame).first(n));
    ASSERT_FALSE(cut.ok()) << n;
  }
}

TEST(WireCodec, RelayProgressFinishAndDoneRoundTrip) {
  std::vector<uint8_t> frame;
  AppendRelayProgress(frame, RelayProgress{3, 29});
  auto p = DecodeRelayProgress(PayloadOf(frame));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ranks_open, 3u);
  EXPECT_EQ(p->ranks_done, 29u);
  frame.clear();
  AppendRelayFinish(frame, RelayFinish{12500});
  auto f = DecodeRelayFinish(PayloadOf(frame));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->grace_ms, 12500u);
  frame.clear();
  RelayDone done{"", 1024, {{0, 7}, {31, 1ull << 40}, {1023, 0}}};
  AppendRelayDone(frame, done);
  auto d = DecodeRelayDone(PayloadOf(frame));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->status, "");
  EXPECT_EQ(d->world_size, 1024u);
  ASSERT_EQ(d->ranks.size(), 3u);
  EXPECT_EQ(d->ranks[1].rank, 31u);
  EXPECT_EQ(d->ranks[1].events, 1ull << 40);
  EXPECT_EQ(d->ranks[2].rank, 1023u);
}

TEST(WireCodec, RelayDoneRefusesACountBeyondItsBytesAndAWorldBeyondTheLimit) {
  std::vector<uint8_t> frame;
  AppendRelayDone(frame, RelayDone{"ok", 4, {{0, 1}, {1, 2}}});
  std::vector<uint8_t> payload(frame.begin() + kHeaderSize, frame.end());
  // The rank count sits after the status (4 + 2 bytes) and the world size (4 bytes).
  payload[10] = 0xff;
  payload[11] = 0xff;
  auto d = DecodeRelayDone(payload);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("rank count"), std::string::npos) << d.status().message();
  frame.clear();
  AppendRelayDone(frame, RelayDone{"", kMaxWorldSize + 1, {}});
  d = DecodeRelayDone(PayloadOf(frame));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("world_size"), std::string::npos) << d.status().message();
}

}  // namespace
}  // namespace commprof::wire
