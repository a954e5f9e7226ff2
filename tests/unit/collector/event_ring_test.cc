// Single-producer / single-consumer event ring.
#include "collector/event_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace commprof {
namespace {

commprof_event Ev(uint64_t seq) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_USER_MARK;
  e.seq = seq;
  e.start_ns = seq * 10;
  e.end_ns = seq * 10 + 3;
  e.bytes = ~seq;
  return e;
}

TEST(EventRing, CapacityIsRoundedUpToAPowerOfTwoOfAtLeastSixteen) {
  EXPECT_EQ(EventRing(0).capacity(), 16u);
  EXPECT_EQ(EventRing(1).capacity(), 16u);
  EXPECT_EQ(EventRing(16).capacity(), 16u);
  EXPECT_EQ(EventRing(17).capacity(), 32u);
  EXPECT_EQ(EventRing(1000).capacity(), 1024u);
  EXPECT_EQ(EventRing(1024).capacity(), 1024u);
  EXPECT_EQ(EventRing(65537).capacity(), 131072u);
  EXPECT_EQ(EventRing::RoundedCapacity(0), 16u);
  EXPECT_EQ(EventRing::RoundedCapacity(1000), 1024u);
  // a request beyond the largest power of two stops there instead of wrapping to 0 (or looping)
  EXPECT_EQ(EventRing::RoundedCapacity((1u << 31) + 1), 1u << 31);
  EXPECT_EQ(EventRing::RoundedCapacity(0xFFFFFFFFu), 1u << 31);
}

TEST(EventRing, DrainsInFifoOrderWithWholeRecords) {
  EventRing r(64);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(r.Push(Ev(i)));
  commprof_event out[64];
  ASSERT_EQ(r.Drain(out, 64), 10u);
  for (uint64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(out[i].seq, i);
    EXPECT_EQ(out[i].start_ns, i * 10);
    EXPECT_EQ(out[i].end_ns, i * 10 + 3);
    EXPECT_EQ(out[i].bytes, ~i);
  }
  EXPECT_EQ(r.Drain(out, 64), 0u);
}

TEST(EventRing, DrainTakesAtMostMaxAndLeavesTheRestInOrder) {
  EventRing r(16);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(r.Push(Ev(i)));
  commprof_event out[16];
  ASSERT_EQ(r.Drain(out, 3), 3u);
  EXPECT_EQ(out[0].seq, 0u);
  EXPECT_EQ(out[2].seq, 2u);
  ASSERT_EQ(r.Drain(out, 16), 7u);
  EXPECT_EQ(out[0].seq, 3u);
  EXPECT_EQ(out[6].seq, 9u);
}

TEST(EventRing, FullRingDropsAndCountsExactly) {
  EventRing r(16);
  int accepted = 0, refused = 0;
  for (uint64_t i = 0; i < 20; ++i) (r.Push(Ev(i)) ? accepted : refused)++;
  EXPECT_EQ(accepted, 16);
  EXPECT_EQ(refused, 4);
  EXPECT_EQ(r.pushed(), 16u);
  EXPECT_EQ(r.dropped(), 4u);
  commprof_event out[16];
  ASSERT_EQ(r.Drain(out, 5), 5u);
  for (uint64_t i = 0; i < 5; ++i) EXPECT_TRUE(r.Push(Ev(100 + i)));
  EXPECT_FALSE(r.Push(Ev(999)));
  EXPECT_EQ(r.pushed(), 21u);
  EXPECT_EQ(r.dropped(), 5u);
  // The dropped events were never stored: the ring holds 5..15 then 100..104.
  ASSERT_EQ(r.Drain(out, 16), 16u);
  for (uint64_t i = 0; i < 11; ++i) EXPECT_EQ(out[i].seq, 5 + i);
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(out[11 + i].seq, 100 + i);
}

TEST(EventRing, WrapsAroundManyTimesWithoutLosingOrder) {
  EventRing r(16);
  commprof_event out[16];
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 1000; ++round) {
    for (int k = 0; k < 11; ++k) ASSERT_TRUE(r.Push(Ev(next_in++)));
    uint32_t n = r.Drain(out, 11);
    ASSERT_EQ(n, 11u);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i].seq, next_out++);
  }
  EXPECT_EQ(r.pushed(), 11000u);
  EXPECT_EQ(r.dropped(), 0u);
}

TEST(EventRing, ProducerAndConsumerThreadsMoveAMillionEventsInOrder) {
  constexpr uint64_t kCount = 1000000;
  EventRing r(1024);
  uint64_t producer_refusals = 0;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount; ++i) {
      while (!r.Push(Ev(i))) {
        ++producer_refusals;  // the consumer is behind: retry, as a lossless producer would
        std::this_thread::yield();
      }
    }
  });
  uint64_t received = 0;
  bool in_order = true;
  bool intact = true;
  std::vector<commprof_event> buf(256);
  while (received < kCount) {
    uint32_t n = r.Drain(buf.data(), static_cast<uint32_t>(buf.size()));
    for (uint32_t i = 0; i < n; ++i) {
      in_order = in_order && buf[i].seq == received;
      intact = intact && buf[i].start_ns == received * 10 && buf[i].bytes == ~received;
      ++received;
    }
    if (n == 0) std::this_thread::yield();
  }
  producer.join();
  EXPECT_EQ(received, kCount);
  EXPECT_TRUE(in_order);
  EXPECT_TRUE(intact);
  EXPECT_EQ(r.pushed(), kCount);
  EXPECT_EQ(r.dropped(), producer_refusals);  // every refused push counted, none lost silently
  EXPECT_EQ(r.Drain(buf.data(), 1), 0u);
}

}  // namespace
}  // namespace commprof
