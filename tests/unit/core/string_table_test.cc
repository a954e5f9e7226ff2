// String interning: dense ids in first-seen order, shared across threads, bounded.
#include "core/string_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace commprof {
namespace {

// Ids 0 ("", no name) and 1 ("<overflow>") are reserved; interned names start after them.
constexpr uint32_t kFirst = 2;

TEST(StringTable, StartsWithOnlyTheReservedNames) {
  StringTable t;
  EXPECT_EQ(t.size(), kFirst);
  EXPECT_EQ(t.View(StringTable::kNoNameId), "");
  EXPECT_EQ(t.View(StringTable::kOverflowId), "<overflow>");
  EXPECT_EQ(t.Intern(""), StringTable::kNoNameId);
  EXPECT_EQ(t.Intern("<overflow>"), StringTable::kOverflowId);
  EXPECT_EQ(t.size(), kFirst);
  EXPECT_EQ(t.overflow_count(), 0u);
}

TEST(StringTable, IdsAreDenseInFirstSeenOrderAndStableForTheSameText) {
  StringTable t;
  EXPECT_EQ(t.Intern("MPI_Allreduce"), kFirst);
  EXPECT_EQ(t.Intern("MPI_Bcast"), kFirst + 1);
  EXPECT_EQ(t.Intern("MPI_Allreduce"), kFirst);
  EXPECT_EQ(t.Intern("mpi_allreduce"), kFirst + 2);  // case matters
  EXPECT_EQ(t.Intern("MPI_Bcast"), kFirst + 1);
  EXPECT_EQ(t.Intern("step"), kFirst + 3);
  EXPECT_EQ(t.size(), kFirst + 4);
}

TEST(StringTable, InternCopiesTheText) {
  StringTable t;
  std::string s = "transient";
  uint32_t id = t.Intern(s);
  s = "overwritten";
  EXPECT_EQ(t.View(id), "transient");
  EXPECT_EQ(t.Intern("transient"), id);
}

TEST(StringTable, ViewReturnsTheStoredTextOrEmptyForUnknownIds) {
  StringTable t;
  uint32_t a = t.Intern("alpha");
  uint32_t b = t.Intern("beta");
  EXPECT_EQ(t.View(a), "alpha");
  EXPECT_EQ(t.View(b), "beta");
  EXPECT_TRUE(t.View(b + 1).empty());
  EXPECT_TRUE(t.View(0xFFFFFFFFu).empty());
}

TEST(StringTable, SinceReturnsTheStringsFromAnIdOnwardInIdOrder) {
  StringTable t;
  t.Intern("a");
  t.Intern("b");
  t.Intern("c");
  auto all = t.Since(0);
  EXPECT_EQ(std::vector<std::string>(all.begin(), all.end()),
            (std::vector<std::string>{"", "<overflow>", "a", "b", "c"}));
  auto tail = t.Since(kFirst + 1);
  EXPECT_EQ(std::vector<std::string>(tail.begin(), tail.end()), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(t.Since(kFirst + 3).empty());
  EXPECT_TRUE(t.Since(100).empty());
}

TEST(StringTable, ViewsStayValidWhileTheTableGrows) {
  StringTable t;
  uint32_t id = t.Intern("first");
  std::string_view v = t.View(id);
  for (int i = 0; i < 10000; ++i) t.Intern("name-" + std::to_string(i));
  EXPECT_EQ(v, "first");
  EXPECT_EQ(t.View(id).data(), v.data());
}

TEST(StringTable, ConcurrentInterningOfOverlappingNamesFromEightThreadsIsConsistent) {
  StringTable t;
  constexpr int kThreads = 8;
  constexpr int kNames = 300;
  std::vector<std::map<std::string, uint32_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      StringCache cache;  // half the threads go through a per-thread cache, as the runtime does
      for (int round = 0; round < 3; ++round) {
        for (int k = 0; k < kNames; ++k) {
          // every thread visits all names, from its own start, half of them backwards
          int i = (w % 2 == 0 ? k : kNames - 1 - k) + w * 37;
          i %= kNames;
          std::string name = "name-" + std::to_string(i);
          uint32_t id = w % 2 == 0 ? t.Intern(name) : cache.Intern(t, name);
          auto [it, fresh] = seen[w].emplace(name, id);
          if (!fresh) {
            EXPECT_EQ(it->second, id) << "thread " << w << " got two ids for " << name;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), static_cast<uint32_t>(kNames) + kFirst);
  ASSERT_EQ(seen[0].size(), static_cast<size_t>(kNames));
  for (int w = 1; w < kThreads; ++w) EXPECT_EQ(seen[w], seen[0]) << "thread " << w << " disagrees with thread 0";
  std::set<uint32_t> ids;
  for (const auto& [name, id] : seen[0]) {
    EXPECT_EQ(t.View(id), name);
    ids.insert(id);
  }
  // dense: exactly kFirst .. kFirst + kNames - 1
  ASSERT_EQ(ids.size(), static_cast<size_t>(kNames));
  EXPECT_EQ(*ids.begin(), kFirst);
  EXPECT_EQ(*ids.rbegin(), kFirst + static_cast<uint32_t>(kNames) - 1);
}

TEST(StringCache, ReturnsTheSameIdsAsTheTable) {
  StringTable t;
  StringCache cache;
  uint32_t a = cache.Intern(t, "alpha");
  uint32_t b = t.Intern("beta");
  EXPECT_EQ(a, t.Intern("alpha"));
  EXPECT_EQ(cache.Intern(t, "beta"), b);
  EXPECT_EQ(cache.Intern(t, "alpha"), a);  // a cache hit
  EXPECT_EQ(cache.Intern(t, "gamma"), kFirst + 2);
  EXPECT_EQ(t.View(kFirst + 2), "gamma");
  EXPECT_EQ(t.size(), kFirst + 3);
  EXPECT_EQ(cache.Intern(t, ""), StringTable::kNoNameId);
}

TEST(StringCache, KeepsTablesApart) {
  StringTable t1, t2;
  StringCache cache;
  t2.Intern("filler");
  uint32_t in1 = cache.Intern(t1, "shared");
  uint32_t in2 = cache.Intern(t2, "shared");  // same text, same slot, other table
  EXPECT_EQ(in1, kFirst);
  EXPECT_EQ(in2, kFirst + 1);
  EXPECT_EQ(cache.Intern(t1, "shared"), kFirst);
  EXPECT_EQ(cache.Intern(t2, "shared"), kFirst + 1);
  EXPECT_EQ(t1.size(), kFirst + 1);
  EXPECT_EQ(t2.size(), kFirst + 2);
}

TEST(StringCache, HandlesTextsThatShareACacheSlot) {
  StringTable t;
  StringCache cache;
  // Find two names landing in the same of the 256 slots.
  std::string first = "n0", second;
  for (int i = 1; second.empty(); ++i) {
    std::string c = "n" + std::to_string(i);
    if ((HashText(c) & 255) == (HashText(first) & 255)) second = c;
  }
  uint32_t a = cache.Intern(t, first);
  uint32_t b = cache.Intern(t, second);
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.Intern(t, first), a);
  EXPECT_EQ(cache.Intern(t, second), b);
  EXPECT_EQ(t.View(a), first);
  EXPECT_EQ(t.View(b), second);
}

TEST(StringTable, OverflowReturnsTheOverflowIdAndCountsEveryOverflowingIntern) {
  StringTable t;
  // Fill the table to its limit (names short enough to stay in the small-string buffer).
  char buf[16] = {'s'};
  auto name_of = [&buf](uint32_t i) {
    auto end = std::to_chars(buf + 1, buf + sizeof buf, i).ptr;
    return std::string_view(buf, static_cast<size_t>(end - buf));
  };
  uint32_t wrong_ids = 0;
  for (uint32_t i = kFirst; i < StringTable::kMaxStrings; ++i) wrong_ids += t.Intern(name_of(i)) != i;
  ASSERT_EQ(wrong_ids, 0u);
  ASSERT_EQ(t.size(), StringTable::kMaxStrings);
  EXPECT_EQ(t.overflow_count(), 0u);
  EXPECT_EQ(t.Intern("one too many"), StringTable::kOverflowId);
  EXPECT_EQ(t.Intern("one too many"), StringTable::kOverflowId);
  EXPECT_EQ(t.overflow_count(), 2u);
  EXPECT_EQ(t.size(), StringTable::kMaxStrings);
  // known names keep their ids
  EXPECT_EQ(t.Intern(name_of(kFirst)), kFirst);
  EXPECT_EQ(t.Intern(name_of(StringTable::kMaxStrings - 1)), StringTable::kMaxStrings - 1);
  // the cache does not remember an overflow, so each attempt is counted
  StringCache cache;
  EXPECT_EQ(cache.Intern(t, "cached overflow"), StringTable::kOverflowId);
  EXPECT_EQ(cache.Intern(t, "cached overflow"), StringTable::kOverflowId);
  EXPECT_EQ(t.overflow_count(), 4u);
}

}  // namespace
}  // namespace commprof
