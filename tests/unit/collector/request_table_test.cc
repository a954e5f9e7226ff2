// Lock-free table of in-flight non-blocking requests.
#include "collector/request_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

namespace commprof {
namespace {

commprof_event Ev(uint64_t seq) {
  commprof_event e{};
  e.kind = COMMPROF_KIND_MPI_COLLECTIVE;
  e.subtype = COMMPROF_OP_ALLREDUCE;
  e.flags = COMMPROF_FLAG_NONBLOCKING;
  e.seq = seq;
  e.start_ns = seq + 1;
  e.bytes = seq * 8;
  return e;
}

// The table's slot index for a key: a copy of RequestTable::Hash (Fibonacci hashing, >> 20),
// reduced by the table's mask. Used to build keys whose probe windows coincide.
uint64_t SlotOf(uintptr_t key, uint64_t mask) {
  return ((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> 20) & mask;
}

std::vector<uintptr_t> CollidingKeys(size_t count, uint64_t mask) {
  std::vector<uintptr_t> keys;
  uint64_t want = SlotOf(0x1000, mask);
  for (uintptr_t k = 0x1000; keys.size() < count; k += 8) {
    if (SlotOf(k, mask) == want) keys.push_back(k);
  }
  return keys;
}

TEST(RequestTable, InsertThenTakeReturnsTheStoredEvent) {
  RequestTable t(1024);
  ASSERT_TRUE(t.Insert(0x7f0000001230, Ev(42)));
  commprof_event out{};
  ASSERT_TRUE(t.Take(0x7f0000001230, out));
  EXPECT_EQ(out.seq, 42u);
  EXPECT_EQ(out.start_ns, 43u);
  EXPECT_EQ(out.bytes, 336u);
  EXPECT_EQ(out.kind, COMMPROF_KIND_MPI_COLLECTIVE);
  EXPECT_EQ(out.subtype, COMMPROF_OP_ALLREDUCE);
  EXPECT_EQ(out.flags, COMMPROF_FLAG_NONBLOCKING);
  // taken once only
  EXPECT_FALSE(t.Take(0x7f0000001230, out));
  EXPECT_EQ(t.overflow(), 0u);
}

TEST(RequestTable, TakeOfAnUnknownKeyIsFalseAndLeavesOutUntouched) {
  RequestTable t(64);
  ASSERT_TRUE(t.Insert(0x5000, Ev(1)));
  commprof_event out = Ev(777);
  EXPECT_FALSE(t.Take(0x5008, out));
  EXPECT_EQ(out.seq, 777u);
  EXPECT_TRUE(t.Take(0x5000, out));
  EXPECT_EQ(out.seq, 1u);
}

// The slots start as zeroed memory never written: every reader sees an empty table, and the first
// requests of several threads at once are all kept.
TEST(RequestTable, AFreshTableIsEmptyAndConcurrentFirstInsertsAreAllKept) {
  RequestTable t(4096);
  commprof_event out = Ev(5);
  EXPECT_FALSE(t.Take(0x5000, out));
  EXPECT_EQ(out.seq, 5u);
  int seen = 0;
  t.ForEachPending([&](const commprof_event&, uint32_t) { ++seen; });
  t.TakeAll([&](const commprof_event&) { ++seen; });
  EXPECT_EQ(seen, 0);

  constexpr int kThreads = 8;
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      start.arrive_and_wait();
      EXPECT_TRUE(t.Insert(0x10000 + 0x40 * static_cast<uintptr_t>(k), Ev(static_cast<uint64_t>(k))));
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  std::vector<bool> found(kThreads, false);
  t.ForEachPending([&](const commprof_event& e, uint32_t) { found.at(e.seq) = true; });
  for (int k = 0; k < kThreads; ++k) {
    EXPECT_TRUE(found[k]) << "request of thread " << k;
    ASSERT_TRUE(t.Take(0x10000 + 0x40 * static_cast<uintptr_t>(k), out));
    EXPECT_EQ(out.seq, static_cast<uint64_t>(k));
  }
}

TEST(RequestTable, ReservedKeysZeroAndOneAreNeverTracked) {
  RequestTable t(64);
  commprof_event out{};
  EXPECT_FALSE(t.Insert(0, Ev(1)));
  EXPECT_FALSE(t.Insert(1, Ev(1)));
  EXPECT_FALSE(t.Take(0, out));
  EXPECT_FALSE(t.Take(1, out));
  EXPECT_EQ(t.overflow(), 0u);  // refused, not an overflow
}

TEST(RequestTable, ManyKeysEachGetTheirOwnEvent) {
  RequestTable t(4096);
  std::vector<uintptr_t> keys;
  for (uintptr_t i = 0; i < 1000; ++i) keys.push_back(0x7f1200000000 + i * 16);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(t.Insert(keys[i], Ev(i))) << i;
  for (size_t i = keys.size(); i-- > 0;) {
    commprof_event out{};
    ASSERT_TRUE(t.Take(keys[i], out)) << i;
    EXPECT_EQ(out.seq, i);
  }
  EXPECT_EQ(t.overflow(), 0u);
}

TEST(RequestTable, OverflowIsCountedWhenAProbeWindowIsFull) {
  RequestTable t(1);  // rounded up to 64 slots
  constexpr uint64_t kMask = 63;
  constexpr size_t kProbe = 16;
  auto keys = CollidingKeys(kProbe + 2, kMask);
  for (size_t i = 0; i < kProbe; ++i) ASSERT_TRUE(t.Insert(keys[i], Ev(i))) << i;
  EXPECT_EQ(t.overflow(), 0u);
  // the 17th key hashing to the same slot finds its whole window taken
  EXPECT_FALSE(t.Insert(keys[kProbe], Ev(kProbe)));
  EXPECT_EQ(t.overflow(), 1u);
  EXPECT_FALSE(t.Insert(keys[kProbe + 1], Ev(kProbe + 1)));
  EXPECT_EQ(t.overflow(), 2u);
  commprof_event out{};
  EXPECT_FALSE(t.Take(keys[kProbe], out)) << "an overflowed request must not be found";
  // freeing one slot of the window makes room again
  ASSERT_TRUE(t.Take(keys[3], out));
  EXPECT_EQ(out.seq, 3u);
  EXPECT_TRUE(t.Insert(keys[kProbe], Ev(kProbe)));
  EXPECT_EQ(t.overflow(), 2u);
  for (size_t i = 0; i <= kProbe; ++i) {
    if (i == 3) continue;
    ASSERT_TRUE(t.Take(keys[i], out)) << i;
    EXPECT_EQ(out.seq, i);
  }
}

TEST(RequestTable, ConcurrentInsertAndTakeFromSeveralThreads) {
  constexpr int kThreads = 4;
  constexpr uintptr_t kPerThread = 320 * 64;  // whole batches
  constexpr uintptr_t kBatch = 64;            // requests in flight per thread at a time
  RequestTable t(4096);
  std::atomic<uint64_t> inserted{0}, refused{0}, taken{0}, wrong{0}, missing{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      uintptr_t base = (static_cast<uintptr_t>(w) + 1) << 32;
      for (uintptr_t b = 0; b < kPerThread; b += kBatch) {
        std::vector<bool> ok(kBatch);
        for (uintptr_t i = 0; i < kBatch; ++i) {
          uintptr_t key = base + (b + i) * 16;
          ok[i] = t.Insert(key, Ev(key));
          (ok[i] ? inserted : refused)++;
        }
        for (uintptr_t i = 0; i < kBatch; ++i) {
          uintptr_t key = base + (b + i) * 16;
          commprof_event out{};
          bool got = t.Take(key, out);
          if (got != ok[i]) missing++;
          if (got) {
            taken++;
            if (out.seq != key) wrong++;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(inserted + refused, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(refused.load(), t.overflow());
  EXPECT_EQ(taken.load(), inserted.load());
  EXPECT_EQ(missing.load(), 0u);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(inserted.load(), uint64_t{kThreads} * kPerThread * 9 / 10);  // 256 of 4096 slots used at most
}

TEST(RequestTable, RequestsInsertedOnOneThreadAreTakenOnAnother) {
  constexpr int kThreads = 4;
  constexpr uintptr_t kPerThread = 500;
  RequestTable t(8192);
  std::barrier sync(kThreads);
  std::atomic<uint64_t> inserted{0}, taken{0}, wrong{0};
  std::vector<std::thread> threads;
  auto key_of = [](int w, uintptr_t i) { return ((static_cast<uintptr_t>(w) + 1) << 36) + i * 24; };
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      for (uintptr_t i = 0; i < kPerThread; ++i) {
        if (t.Insert(key_of(w, i), Ev(key_of(w, i)))) inserted++;
      }
      sync.arrive_and_wait();
      int other = (w + 1) % kThreads;  // complete a neighbour's requests
      for (uintptr_t i = 0; i < kPerThread; ++i) {
        commprof_event out{};
        if (t.Take(key_of(other, i), out)) {
          taken++;
          if (out.seq != key_of(other, i)) wrong++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(inserted.load() + t.overflow(), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(taken.load(), inserted.load());
  EXPECT_EQ(wrong.load(), 0u);
}

}  // namespace
}  // namespace commprof
