// Single-producer / single-consumer event ring.
#include "collector/event_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
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

// The kernel's transparent huge page mode: "always", "madvise" or "never" (empty: unknown).
std::string ThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close > open ? line.substr(open + 1, close - open - 1) : "";
}

// kB of huge pages backing the mapping that holds `p`, from /proc/self/smaps (-1: not found).
long AnonHugeKbAt(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stol(line.substr(14));
    }
  }
  return -1;
}

// A ring of 2 MiB or more sits on 2 MiB boundaries and is offered for huge pages, so its recording
// thread takes 2 faults for 4 MiB instead of 1024 (collector/event_ring.h); a small one is plain.
TEST(EventRing, ARingOfTwoMebibytesOrMoreIsOnHugePagesWhereTheKernelOffersThem) {
  EventRing big(65536);  // 4 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.slots()) % (uintptr_t{2} << 20), 0u);
  for (uint64_t i = 0; i < big.capacity(); ++i) ASSERT_TRUE(big.Push(Ev(i)));
  std::vector<commprof_event> buf(1024);
  uint64_t next = 0;
  while (uint32_t n = big.Drain(buf.data(), 1024)) {
    for (uint32_t k = 0; k < n; ++k) ASSERT_EQ(buf[k].seq, next++);
  }
  EXPECT_EQ(next, 65536u);
  const std::string mode = ThpMode();
  if (mode != "always" && mode != "madvise") {
    GTEST_SKIP() << "transparent huge pages are '" << mode << "' here (/sys/kernel/mm/transparent_hugepage/enabled): "
                 << "only the alignment is checked";
  }
  // The kernel may still fall back to small pages when it has no free huge page; on a test
  // machine with memory to spare it has.
  EXPECT_GE(AnonHugeKbAt(big.slots()), 2048) << "the ring's memory is not on huge pages";
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
