// Call-site capture (collector/call_stacks.h): the per-thread cache's validation, the depth bound,
// the interning and the dropping of leading frames by module.
#include "collector/call_stacks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace commprof {
namespace {

volatile int g_sink = 0;

// The innermost frame considered is the caller of Capture: Leaf.
__attribute__((noinline)) uint32_t Leaf(CallStacks& s, StackCache& c) {
  const uint32_t id = s.Capture(c);
  g_sink = g_sink + 1;  // no tail call: Leaf stays on the stack
  return id;
}
// Two callers with the same frame layout: Leaf's key (return address, frame address) is the same
// from both, so only the cache's validation can tell the two stacks apart.
__attribute__((noinline)) uint32_t CallerA(CallStacks& s, StackCache& c) {
  const uint32_t id = Leaf(s, c);
  g_sink = g_sink + 1;
  return id;
}
__attribute__((noinline)) uint32_t CallerB(CallStacks& s, StackCache& c) {
  const uint32_t id = Leaf(s, c);
  g_sink = g_sink + 2;  // not CallerA's code: identical functions may be folded into one
  return id;
}
__attribute__((noinline)) uint32_t Recurse(CallStacks& s, StackCache& c, int n) {
  const uint32_t id = n == 0 ? Leaf(s, c) : Recurse(s, c, n - 1);
  g_sink = g_sink + 1;
  return id;
}

StackOptions TestOptions(uint32_t depth) {
  StackOptions o;
  o.depth = depth;
  o.skip_self = false;  // this test binary holds the code: keep its frames
  return o;
}

std::map<uint32_t, std::vector<uintptr_t>> Stacks(const CallStacks& s) {
  std::map<uint32_t, std::vector<uintptr_t>> out;
  s.ForEachStack([&](uint32_t id, std::span<const uintptr_t> pcs) { out[id].assign(pcs.begin(), pcs.end()); });
  return out;
}

std::string SelfPath() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

TEST(CallStacks, SameCallSiteThroughTwoCallerChainsGivesTwoStacks) {
  CallStacks stacks(TestOptions(16));
  auto cache = std::make_unique<StackCache>();
  // Alternating (each from one place here, so the stacks differ only in Leaf's caller): every call
  // gets its own chain's id, whatever the cache holds.
  std::vector<uint32_t> ids_a;
  std::vector<uint32_t> ids_b;
  for (int i = 0; i < 20; ++i) {
    ids_a.push_back(CallerA(stacks, *cache));
    ids_b.push_back(CallerB(stacks, *cache));
  }
  const uint32_t a = ids_a[0];
  const uint32_t b = ids_b[0];
  EXPECT_EQ(ids_a, std::vector<uint32_t>(20, a));
  EXPECT_EQ(ids_b, std::vector<uint32_t>(20, b));
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(stacks.unique(), 2u);
  // One cache entry for both (the same key): each call found the other chain's entry, failed its
  // validation and unwound.
  EXPECT_EQ(stacks.misses(), 40u);
  const auto all = Stacks(stacks);
  ASSERT_EQ(all.size(), 2u);
  // Depth 0 (Leaf's call of Capture) is the same pc; depth 1 (the caller) differs.
  EXPECT_EQ(all.at(a)[0], all.at(b)[0]);
  EXPECT_NE(all.at(a)[1], all.at(b)[1]);
}

TEST(CallStacks, RepeatedStackIsAnsweredFromTheThreadCacheWithoutUnwinding) {
  CallStacks stacks(TestOptions(16));
  auto cache = std::make_unique<StackCache>();
  std::vector<uint32_t> ids;
  for (int i = 0; i < 100; ++i) {
    ids.push_back(CallerA(stacks, *cache));
  }
  EXPECT_NE(ids[0], 0u);
  EXPECT_EQ(ids, std::vector<uint32_t>(100, ids[0]));
  EXPECT_EQ(stacks.misses(), 1u);  // the first call only
  EXPECT_EQ(stacks.unique(), 1u);
}

TEST(CallStacks, DepthBoundKeepsThatManyFramesFromTheCallSite) {
  CallStacks shallow(TestOptions(5));
  CallStacks deep(TestOptions(64));
  auto c1 = std::make_unique<StackCache>();
  auto c2 = std::make_unique<StackCache>();
  const uint32_t s = Recurse(shallow, *c1, 30);
  const uint32_t d = Recurse(deep, *c2, 30);
  const auto short_stack = Stacks(shallow).at(s);
  const auto long_stack = Stacks(deep).at(d);
  EXPECT_EQ(short_stack.size(), 5u);
  EXPECT_GT(long_stack.size(), 32u);  // Leaf, 31 Recurse frames, then the test's own
  // The kept frames are the innermost ones: the bounded stack is the deep one's prefix.
  EXPECT_TRUE(std::equal(short_stack.begin(), short_stack.end(), long_stack.begin()));
}

TEST(CallStacks, OneStackFromTwoThreadsHasOneId) {
  CallStacks stacks(TestOptions(3));  // Leaf, CallerA, the lambda: the same on both threads
  uint32_t ids[2] = {};
  auto work = [&stacks](uint32_t* out) {
    auto cache = std::make_unique<StackCache>();
    *out = CallerA(stacks, *cache);
  };
  std::thread t0(work, &ids[0]);
  t0.join();
  std::thread t1(work, &ids[1]);
  t1.join();
  EXPECT_NE(ids[0], 0u);
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_EQ(stacks.unique(), 1u);
}

TEST(CallStacks, LeadingFramesOfSkippedModulesAreDropped) {
  const std::string self = SelfPath();
  ASSERT_FALSE(self.empty());
  // Kept: depth 0 is Leaf, in this program.
  CallStacks kept(TestOptions(4));
  auto c1 = std::make_unique<StackCache>();
  const uint32_t k = CallerA(kept, *c1);
  const FrameOrigin leaf = ResolveFrame(Stacks(kept).at(k)[0]);
  EXPECT_EQ(leaf.module, self);
  EXPECT_GT(leaf.offset, 0u);
  // Skipping this program by name: every frame in it is dropped, so depth 0 is the C library's
  // frame that called main.
  StackOptions o = TestOptions(4);
  o.skip_prefixes = {self.substr(self.rfind('/') + 1)};
  CallStacks skipped(o);
  auto c2 = std::make_unique<StackCache>();
  const uint32_t id = CallerA(skipped, *c2);
  ASSERT_NE(id, 0u);
  const FrameOrigin outer = ResolveFrame(Stacks(skipped).at(id)[0]);
  EXPECT_NE(outer.module, self);
  EXPECT_NE(outer.module.find("libc"), std::string::npos) << outer.module;
}

TEST(CallStacks, CollectorOptionsSkipCommprofMpiAndNccl) {
  const StackOptions o = CollectorStackOptions(16);
  EXPECT_TRUE(o.skip_self);
  for (const char* lib : {"libcommprof", "libmpi", "libopen-pal", "libnccl"}) {
    EXPECT_NE(std::find(o.skip_prefixes.begin(), o.skip_prefixes.end(), lib), o.skip_prefixes.end()) << lib;
  }
}

TEST(CallStacks, FullTableDropsNewStacksAndCountsThem) {
  StackOptions o = TestOptions(16);
  o.max_stacks = 1;
  CallStacks stacks(o);
  auto cache = std::make_unique<StackCache>();
  EXPECT_NE(CallerA(stacks, *cache), 0u);
  EXPECT_EQ(CallerB(stacks, *cache), 0u);
  EXPECT_EQ(stacks.dropped(), 1u);
  EXPECT_EQ(stacks.unique(), 1u);
}

}  // namespace
}  // namespace commprof
