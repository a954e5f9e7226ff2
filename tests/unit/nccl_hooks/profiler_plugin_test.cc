// The NCCL profiler plugin's implementation driven in-process the way NCCL 2.28 drives it
// (docs/nccl-plugin.md §4): application-thread events, then KernelCh/ProxyOp events on a second thread; the
// records are captured by a sink with a test-controlled host clock.
#include "nccl_hooks/profiler_plugin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nccl_hooks/nccl_profiler_abi.h"

namespace commprof::nccl {
namespace {

class CaptureSink final : public RecordSink {
 public:
  void Record(const commprof_event& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
  }
  uint32_t Intern(const char* text) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = ids_.emplace(text, static_cast<uint32_t>(ids_.size() + 1));
    if (added) names_[it->second] = text;
    return it->second;
  }
  uint64_t Now() override { return now_.load(); }
  void AddCounter(const char* name, uint64_t delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    counters_[name] += delta;
  }

  // --stacks: the API events whose call site the plugin asked for (when `stacks` is set).
  bool CapturesStacks() override { return stacks; }
  void CallSite(const commprof_event& api) override {
    std::lock_guard<std::mutex> lock(mu_);
    call_sites.push_back(api);
  }
  bool stacks = false;
  std::vector<commprof_event> call_sites;

  // Hang diagnosis: the contexts registered as in-flight providers, called as the shipper would.
  void AddInflightProvider(InflightProvider provider, void* ctx) override {
    std::lock_guard<std::mutex> lock(mu_);
    providers_[ctx] = provider;
  }
  void RemoveInflightProvider(void* ctx) override {
    std::lock_guard<std::mutex> lock(mu_);
    providers_.erase(ctx);
  }
  size_t providers() {
    std::lock_guard<std::mutex> lock(mu_);
    return providers_.size();
  }
  std::vector<commprof_event> Inflight() {
    std::vector<commprof_event> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [ctx, provider] : providers_) {
      provider(
          ctx,
          [](void* arg, const commprof_event* e) { static_cast<std::vector<commprof_event>*>(arg)->push_back(*e); },
          &out);
    }
    return out;
  }

  void SetNow(uint64_t t) { now_.store(t); }
  std::vector<commprof_event> OfKind(uint8_t kind) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<commprof_event> out;
    for (const auto& e : events_)
      if (e.kind == kind) out.push_back(e);
    return out;
  }
  std::string Name(uint32_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return names_.count(id) != 0 ? names_[id] : "?";
  }
  uint64_t CounterOf(const std::string& n) {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_.count(n) != 0 ? counters_[n] : 0;
  }

 private:
  std::mutex mu_;
  std::vector<commprof_event> events_;
  std::map<std::string, uint32_t> ids_;
  std::map<uint32_t, std::string> names_;
  std::map<std::string, uint64_t> counters_;
  std::map<void*, InflightProvider> providers_;
  std::atomic<uint64_t> now_{1'000'000};
};

constexpr uint64_t kHash = 0xC0FFEE1234ull;

CommInfo Comm(int rank = 1, int nranks = 4) {
  CommInfo c;
  c.known = true;
  c.comm_hash = kHash;
  c.name = "tp";
  c.nnodes = 1;
  c.nranks = nranks;
  c.rank = rank;
  c.device = 3;
  return c;
}

EventDescr Descr(uint64_t type, void* parent = nullptr) {
  EventDescr d;
  d.type = type;
  d.parent = parent;
  return d;
}

void* Start(PluginContext* ctx, const EventDescr& d) {
  void* h = reinterpret_cast<void*>(0x1);  // NCCL may hand garbage; Start must overwrite it
  StartEvent(ctx, &h, d);
  return h;
}

// One kernel channel on the proxy thread: start with pTimer, state 22 with the stop pTimer, stop.
// The host clock at each callback is gpu + offset + lag (the callback is late by `lag`).
void KernelChannel(CaptureSink& sink, PluginContext* ctx, void* parent, uint8_t ch, uint64_t g0, uint64_t g1,
                   int64_t offset, uint64_t lag) {
  EventDescr d = Descr(kCpNcclKernelCh, parent);
  d.channel_id = ch;
  d.ptimer = g0;
  sink.SetNow(static_cast<uint64_t>(static_cast<int64_t>(g0) + offset) + lag);
  void* h = Start(ctx, d);
  ASSERT_NE(h, nullptr);
  sink.SetNow(static_cast<uint64_t>(static_cast<int64_t>(g1) + offset) + lag);
  RecordEventState(h, kCpNcclStateKernelChStop, g1, true);
  StopEvent(h);
}

TEST(NcclProfilerPlugin, ActivationMasks) {
  PluginOptions plain, proxy;
  proxy.proxy_detail = true;
  // v5: GroupApi 256 + CollApi 512 + P2pApi 1024 + KernelLaunch 2048 + Coll 2 + P2p 4 + KernelCh 64.
  EXPECT_EQ(ActivationMask(AbiVersion::kV5, plain), 3910);
  EXPECT_EQ(ActivationMask(AbiVersion::kV5, proxy), 3910 + 8 + 16);  // + ProxyOp + ProxyStep
  EXPECT_EQ(ActivationMask(AbiVersion::kV4, plain), 2 + 4 + 64);
  EXPECT_EQ(ActivationMask(AbiVersion::kV2, plain), 2 + 4 + 8);
  EXPECT_EQ(ActivationMask(AbiVersion::kV2, proxy), 2 + 4 + 8 + 16);
}

TEST(NcclProfilerPlugin, EventsOutsideTheMaskGetNoHandle) {
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV4, Comm(), &sink, PluginOptions{});
  // v4 asks for Coll|P2p|KernelCh: ProxyOp/ProxyStep/ProxyCtrl/Group get NULL and write nothing.
  for (uint64_t t : {kCpNcclProxyOp, kCpNcclProxyStep, kCpNcclProxyCtrl, kCpNcclGroup, kCpNcclNetPlugin}) {
    EventDescr d = Descr(t);
    d.pid = static_cast<int>(::getpid());
    EXPECT_EQ(Start(ctx, d), nullptr) << t;
  }
  FinalizeContext(ctx);
  EXPECT_EQ(sink.OfKind(COMMPROF_KIND_NCCL_API).size() + sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE).size(), 0u);
}

TEST(NcclProfilerPlugin, AllReduceV5CompletesAtLastKernelChannelStop) {
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(), &sink, PluginOptions{});
  ASSERT_NE(ctx, nullptr);
  // Application thread, steps 1-8 of docs/nccl-plugin.md §4.
  sink.SetNow(2'000'000);
  EventDescr ga = Descr(kCpNcclGroupApi);
  ga.group_depth = 1;
  void* hGA = Start(ctx, ga);
  RecordEventState(hGA, kCpNcclStateGroupStartApiStop, 0, false);  // NULL args
  EventDescr ca = Descr(kCpNcclCollApi, hGA);
  ca.func = "AllReduce";
  ca.count = 1024;
  ca.datatype = "ncclFloat32";
  void* hCA = Start(ctx, ca);
  sink.SetNow(2'000'500);
  StopEvent(hCA);
  RecordEventState(hGA, kCpNcclStateGroupEndApiStart, 0, false);
  void* hKL = Start(ctx, Descr(kCpNcclKernelLaunch, hGA));
  StopEvent(hKL);
  void* hG = Start(ctx, Descr(kCpNcclGroup));  // legacy Group: not recorded
  EXPECT_EQ(hG, nullptr);
  EventDescr c = Descr(kCpNcclColl, hCA);
  c.func = "AllReduce";
  c.count = 1024;
  c.datatype = "ncclFloat32";
  c.seq_number = 7;
  c.n_channels = 2;
  c.algo = "RING";
  c.proto = "LL128";
  sink.SetNow(2'001'000);
  void* hC = Start(ctx, c);
  ASSERT_NE(hC, nullptr);
  StopEvent(hC);  // "enqueued" only
  StopEvent(hG);
  StopEvent(hGA);
  EXPECT_TRUE(sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE).empty()) << "the Coll stop must not complete it";

  // Proxy thread: two channels. GPU clock = host - 5e9 - lag, lag 2000 ns on every callback, so the
  // calibration is exact: ToHost(g) = g + 5'000'000'000 + 2000.
  constexpr int64_t kOffset = 5'000'000'000;
  constexpr uint64_t kG = 10'000'000;
  std::thread proxy([&] {
    KernelChannel(sink, ctx, hC, 0, kG + 100, kG + 900, kOffset, 2000);
    KernelChannel(sink, ctx, hC, 1, kG + 50, kG + 1200, kOffset, 2000);
  });
  proxy.join();

  auto coll = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(coll.size(), 1u);
  const commprof_event& e = coll[0];
  // Earliest start: channel 1 at kG + 50 -> kG + 50 + kOffset + 2000; latest stop: kG + 1200 -> ... + 2000.
  EXPECT_EQ(e.start_ns, kG + 50 + kOffset + 2000);
  EXPECT_EQ(e.end_ns, kG + 1200 + kOffset + 2000);
  EXPECT_EQ(e.comm_id, kHash);
  EXPECT_EQ(e.seq, 7u);
  EXPECT_EQ(e.subtype, COMMPROF_OP_ALLREDUCE);
  EXPECT_EQ(e.bytes, 4096u);  // 1024 x 4 (ncclFloat32)
  EXPECT_EQ(e.datatype, COMMPROF_DT_FLOAT32);
  EXPECT_EQ(e.peer, COMMPROF_NO_PEER);
  EXPECT_EQ(e.correlation, 2u);   // channels
  EXPECT_EQ(e.reduce_op, 0x22u);  // RING (2) | LL128 (2) << 4
  EXPECT_EQ(e.device, 3u);
  EXPECT_EQ(e.flags, 0u);
  EXPECT_EQ(sink.Name(e.name_id), "AllReduce");

  auto kernels = sink.OfKind(COMMPROF_KIND_COMM_KERNEL);
  ASSERT_EQ(kernels.size(), 2u);
  std::set<uint32_t> channels;
  for (const auto& k : kernels) {
    channels.insert(k.correlation);
    EXPECT_EQ(k.seq, 7u);
    EXPECT_EQ(k.comm_id, kHash);
    EXPECT_EQ(k.subtype, COMMPROF_OP_ALLREDUCE);
  }
  EXPECT_EQ(channels, (std::set<uint32_t>{0, 1}));
  // Channel 0: [kG + 100, kG + 900] + kOffset + 2000.
  const auto& k0 = kernels[0].correlation == 0 ? kernels[0] : kernels[1];
  EXPECT_EQ(k0.start_ns, kG + 100 + kOffset + 2000);
  EXPECT_EQ(k0.end_ns, kG + 900 + kOffset + 2000);

  auto api = sink.OfKind(COMMPROF_KIND_NCCL_API);
  ASSERT_EQ(api.size(), 3u);  // CollApi, KernelLaunch, GroupApi (in stop order)
  EXPECT_EQ(sink.Name(api[0].name_id), "ncclAllReduce");
  EXPECT_EQ(api[0].bytes, 4096u);
  EXPECT_EQ(api[0].start_ns, 2'000'000u);
  EXPECT_EQ(api[0].end_ns, 2'000'500u);
  EXPECT_EQ(sink.Name(api[1].name_id), "ncclKernelLaunch");
  EXPECT_EQ(sink.Name(api[2].name_id), "ncclGroup");
  EXPECT_EQ(api[2].seq, 1u);  // group depth

  FinalizeContext(ctx);
  auto init = sink.OfKind(COMMPROF_KIND_MPI_COMM);
  ASSERT_EQ(init.size(), 1u);
  EXPECT_EQ(init[0].subtype, COMMPROF_OP_NCCL_COMM_INIT);
  EXPECT_EQ(init[0].comm_id, kHash);
  EXPECT_EQ(init[0].peer, 1);
  EXPECT_EQ(init[0].bytes, 4u);
  EXPECT_EQ(sink.Name(init[0].name_id), "tp");
  EXPECT_EQ(sink.CounterOf("nccl_unfinished_at_finalize"), 0u);
  EXPECT_EQ(sink.CounterOf("nccl_calibration_pairs"), 4u);  // 2 starts + 2 stops (a young fit takes both)
}

// docs/nccl-plugin.md "GPU clock calibration": while the fit is young each channel gives two pairs
// (start and stop); once 512 pairs have been seen, a channel with both pTimers gives one (its
// start) and its stop reads no clock, and its times are still converted exactly.
TEST(NcclProfilerPlugin, WarmCalibrationTakesOnlyTheStartPairAndStillConvertsExactly) {
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(), &sink, PluginOptions{});
  constexpr int64_t kOffset = 5'000'000'000;
  constexpr uint64_t kLag = 2000;
  constexpr int kCollectives = 400;  // 256 channels warm the fit (512 pairs), 144 more after
  uint64_t g = 10'000'000;
  for (int i = 0; i < kCollectives; ++i) {
    EventDescr c = Descr(kCpNcclColl);
    c.func = "AllReduce";
    c.count = 256;
    c.datatype = "ncclFloat32";
    c.seq_number = static_cast<uint64_t>(i);
    c.n_channels = 1;
    sink.SetNow(static_cast<uint64_t>(static_cast<int64_t>(g) + kOffset));
    void* hC = Start(ctx, c);
    ASSERT_NE(hC, nullptr);
    StopEvent(hC);
    KernelChannel(sink, ctx, hC, 0, g + 100, g + 700, kOffset, kLag);
    g += 10'000;
  }
  FinalizeContext(ctx);
  EXPECT_EQ(sink.CounterOf("nccl_calibration_pairs"), 512u + (kCollectives - 256u));
  auto kernels = sink.OfKind(COMMPROF_KIND_COMM_KERNEL);
  ASSERT_EQ(kernels.size(), static_cast<size_t>(kCollectives));
  for (const auto& k : kernels) {  // every pair lags by exactly kLag: the fit is exact
    const uint64_t g0 = 10'000'000 + k.seq * 10'000 + 100;
    EXPECT_EQ(k.start_ns, g0 + kOffset + kLag) << "collective " << k.seq;
    EXPECT_EQ(k.end_ns, g0 + 600 + kOffset + kLag) << "collective " << k.seq;
  }
}

// --stacks: one call site per API event (group, collective API, kernel launch), asked for at its
// start with the event's kind, start and communicator, so the CALL_SITE joins it; none for the
// Coll/P2p operations; none at all when the runtime captures no stacks.
TEST(NcclProfilerPlugin, CallSiteIsAskedAtEachApiStartWithItsJoinKey) {
  for (bool stacks : {true, false}) {
    CaptureSink sink;
    sink.stacks = stacks;
    PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(), &sink, PluginOptions{});
    ASSERT_NE(ctx, nullptr);
    sink.SetNow(2'000'000);
    void* hGA = Start(ctx, Descr(kCpNcclGroupApi));
    sink.SetNow(2'000'100);
    EventDescr ca = Descr(kCpNcclCollApi, hGA);
    ca.func = "AllReduce";
    ca.count = 16;
    ca.datatype = "ncclFloat32";
    void* hCA = Start(ctx, ca);
    sink.SetNow(2'000'500);
    StopEvent(hCA);
    sink.SetNow(2'000'600);
    StopEvent(Start(ctx, Descr(kCpNcclKernelLaunch, hGA)));
    EventDescr c = Descr(kCpNcclColl, hCA);
    c.func = "AllReduce";
    c.count = 16;
    c.datatype = "ncclFloat32";
    c.n_channels = 1;
    void* hC = Start(ctx, c);
    StopEvent(hC);
    StopEvent(hGA);
    const std::vector<commprof_event> api = sink.OfKind(COMMPROF_KIND_NCCL_API);
    ASSERT_EQ(api.size(), 3u);
    if (!stacks) {
      EXPECT_TRUE(sink.call_sites.empty());
    } else {
      ASSERT_EQ(sink.call_sites.size(), 3u);
      for (const commprof_event& e : api) {
        size_t joined = 0;
        for (const commprof_event& cs : sink.call_sites) {
          joined += cs.kind == e.kind && cs.start_ns == e.start_ns && cs.comm_id == e.comm_id ? 1 : 0;
        }
        EXPECT_EQ(joined, 1u) << "API event at " << e.start_ns;
      }
    }
    FinalizeContext(ctx);
  }
}

TEST(NcclProfilerPlugin, BytesTrapsAndRoots) {
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(), &sink, PluginOptions{});
  // AllGather's Coll event carries bytes as ncclInt8 (count 4096 = 1024 floats); its CollApi keeps
  // the user's count/datatype (1024 x ncclFloat32 = 4096 bytes). Broadcast keeps its root.
  EventDescr ca = Descr(kCpNcclCollApi);
  ca.func = "AllGather";
  ca.count = 1024;
  ca.datatype = "ncclFloat32";
  StopEvent(Start(ctx, ca));
  EventDescr ag = Descr(kCpNcclColl);
  ag.func = "AllGather";
  ag.count = 4096;
  ag.datatype = "ncclInt8";
  ag.n_channels = 1;
  void* hAG = Start(ctx, ag);
  StopEvent(hAG);
  KernelChannel(sink, ctx, hAG, 0, 100, 200, 0, 0);
  EventDescr bc = Descr(kCpNcclColl);
  bc.func = "Broadcast";
  bc.count = 10;
  bc.datatype = "ncclInt8";
  bc.root = 2;
  bc.n_channels = 1;
  void* hB = Start(ctx, bc);
  StopEvent(hB);
  KernelChannel(sink, ctx, hB, 0, 300, 400, 0, 0);
  EventDescr u8 = Descr(kCpNcclCollApi);
  u8.func = "AllReduce";
  u8.count = 7;
  u8.datatype = "Unknown";  // ncclUint8 (the only type without a string in 2.28)
  StopEvent(Start(ctx, u8));
  auto api = sink.OfKind(COMMPROF_KIND_NCCL_API);
  ASSERT_EQ(api.size(), 2u);
  EXPECT_EQ(api[0].bytes, 4096u);
  EXPECT_EQ(api[1].bytes, 7u);
  EXPECT_EQ(api[1].datatype, COMMPROF_DT_UINT8);
  auto coll = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(coll.size(), 2u);
  EXPECT_EQ(coll[0].subtype, COMMPROF_OP_ALLGATHER);
  EXPECT_EQ(coll[0].bytes, 4096u);
  EXPECT_EQ(coll[0].peer, COMMPROF_NO_PEER);
  EXPECT_EQ(coll[1].subtype, COMMPROF_OP_BCAST);
  EXPECT_EQ(coll[1].bytes, 10u);
  EXPECT_EQ(coll[1].peer, 2);
  FinalizeContext(ctx);
}

TEST(NcclProfilerPlugin, PointToPointSequencePerPeerAndDirection) {
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(0, 4), &sink, PluginOptions{});
  struct Op {
    const char* func;
    int peer;
  };
  // Expected seq: Send->2 #0, Send->2 #1, Recv<-2 #0, Send->3 #0, Recv<-2 #1.
  const Op ops[] = {{"Send", 2}, {"Send", 2}, {"Recv", 2}, {"Send", 3}, {"Recv", 2}};
  const uint64_t want_seq[] = {0, 1, 0, 0, 1};
  std::vector<void*> handles;
  for (const Op& op : ops) {
    EventDescr p = Descr(kCpNcclP2p);
    p.func = op.func;
    p.peer = op.peer;
    p.count = 256;
    p.datatype = "ncclFloat64";
    p.n_channels = 1;
    void* h = Start(ctx, p);
    ASSERT_NE(h, nullptr);
    StopEvent(h);
    handles.push_back(h);
  }
  std::thread proxy([&] {
    for (size_t i = 0; i < handles.size(); ++i)
      KernelChannel(sink, ctx, handles[i], 0, 1000 * (i + 1), 1000 * (i + 1) + 10, 0, 0);
  });
  proxy.join();
  auto p2p = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(p2p.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(p2p[i].seq, want_seq[i]) << i;
    EXPECT_EQ(p2p[i].peer, ops[i].peer);
    EXPECT_EQ(p2p[i].subtype, std::string(ops[i].func) == "Send" ? COMMPROF_OP_SEND : COMMPROF_OP_RECV);
    EXPECT_EQ(p2p[i].bytes, 2048u);  // 256 x 8
    EXPECT_EQ(p2p[i].flags & COMMPROF_FLAG_NONBLOCKING, 0);
  }
  FinalizeContext(ctx);
}

TEST(NcclProfilerPlugin, NullContextNullHandlesAndStaleParentsAreHarmless) {
  void* h = reinterpret_cast<void*>(0x1);
  StartEvent(nullptr, &h, Descr(kCpNcclColl));  // context NULL after a failed init
  EXPECT_EQ(h, nullptr);
  StartEvent(nullptr, nullptr, Descr(kCpNcclColl));
  StopEvent(nullptr);
  RecordEventState(nullptr, kCpNcclStateKernelChStop, 5, true);
  FinalizeContext(nullptr);

  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(), &sink, PluginOptions{});
  EventDescr k = Descr(kCpNcclKernelCh, nullptr);  // parent NULL: the plugin gave NULL for it
  EXPECT_EQ(Start(ctx, k), nullptr);
  FinalizeContext(ctx);
  EXPECT_EQ(sink.CounterOf("nccl_stale_parent"), 1u);
  EXPECT_TRUE(sink.OfKind(COMMPROF_KIND_COMM_KERNEL).empty());
}

TEST(NcclProfilerPlugin, UnfinishedCollectiveIsWrittenIncompleteAtFinalize) {
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV4, Comm(), &sink, PluginOptions{});
  EventDescr c = Descr(kCpNcclColl);
  c.func = "ReduceScatter";
  c.count = 8;
  c.datatype = "ncclBfloat16";
  c.seq_number = 3;
  c.n_channels = 2;
  void* hC = Start(ctx, c);
  StopEvent(hC);
  KernelChannel(sink, ctx, hC, 0, 500, 700, 0, 0);  // only one of two channels arrives
  EXPECT_TRUE(sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE).empty());
  FinalizeContext(ctx);
  auto coll = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(coll.size(), 1u);
  EXPECT_EQ(coll[0].flags, COMMPROF_FLAG_INCOMPLETE);
  EXPECT_EQ(coll[0].subtype, COMMPROF_OP_REDUCE_SCATTER);
  EXPECT_EQ(coll[0].bytes, 16u);  // 8 x 2
  EXPECT_EQ(sink.CounterOf("nccl_unfinished_at_finalize"), 1u);
}

TEST(NcclProfilerPlugin, V2CompletionFromProxyOpsAndCommHashFromDescriptor) {
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV2, CommInfo{}, &sink, PluginOptions{});
  EXPECT_EQ(ActivationMask(AbiVersion::kV2, PluginOptions{}),
            static_cast<int>(kCpNcclColl | kCpNcclP2p | kCpNcclProxyOp));
  EventDescr c = Descr(kCpNcclColl);
  c.func = "AllReduce";
  c.count = 100;
  c.datatype = "ncclInt32";
  c.seq_number = 0;
  c.n_channels = 4;  // nMaxChannels: no KernelCh in v2, so it does not hold references
  c.comm_hash = 0xABCDEFull;
  sink.SetNow(100);
  void* hC = Start(ctx, c);
  ASSERT_NE(hC, nullptr);
  std::thread proxy([&] {
    EventDescr op = Descr(kCpNcclProxyOp, hC);
    op.pid = static_cast<int>(::getpid());
    sink.SetNow(1000);
    void* a = Start(ctx, op);
    sink.SetNow(1500);
    void* b = Start(ctx, op);
    EventDescr foreign = op;
    foreign.pid = op.pid + 100000;  // PXN: another process's pointers
    EXPECT_EQ(Start(ctx, foreign), nullptr);
    sink.SetNow(4000);
    StopEvent(a);
    sink.SetNow(5000);
    StopEvent(b);
  });
  proxy.join();
  EXPECT_TRUE(sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE).empty());  // Coll not stopped yet
  StopEvent(hC);
  auto coll = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(coll.size(), 1u);
  EXPECT_EQ(coll[0].start_ns, 1000u);  // first proxy op start
  EXPECT_EQ(coll[0].end_ns, 5000u);    // last proxy op stop
  EXPECT_EQ(coll[0].comm_id, 0xABCDEFull);
  EXPECT_EQ(coll[0].bytes, 400u);
  EXPECT_TRUE(sink.OfKind(COMMPROF_KIND_MPI_COMM).empty());  // v2 init knows no communicator
  FinalizeContext(ctx);
  EXPECT_EQ(sink.CounterOf("nccl_foreign_proxy_op"), 1u);
}

// COMMPROF_NCCL_DETAIL=proxy under v5, driven as 2.28 does on the proxy thread (docs/nccl-plugin.md §4): per
// channel and direction a ProxyOp (start, state 19), per step a ProxyStep with transSize in each of
// its states (send 8, 20, 9; receive 10, 11, 12), step stops, then the op stop.
TEST(NcclProfilerPlugin, ProxyDetailRecordsEveryOpAndStepWithTheirParentsIdentity) {
  CaptureSink sink;
  PluginOptions detail;
  detail.proxy_detail = true;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(1, 4), &sink, detail);
  EventDescr c = Descr(kCpNcclColl);
  c.func = "AllReduce";
  c.count = 4096;
  c.datatype = "ncclFloat32";
  c.seq_number = 7;
  c.n_channels = 1;
  void* hC = Start(ctx, c);
  ASSERT_NE(hC, nullptr);
  StopEvent(hC);
  struct Dir {
    int is_send, peer;
    std::vector<int> states;
  };
  const Dir dirs[] = {{1, 2, {8, 20, 9}}, {0, 0, {10, 11, 12}}};
  uint64_t t = 10'000;
  for (const Dir& dir : dirs) {
    EventDescr op = Descr(kCpNcclProxyOp, hC);
    op.pid = static_cast<int>(::getpid());
    op.channel_id = 0;
    op.peer = dir.peer;
    op.is_send = dir.is_send;
    sink.SetNow(t);
    void* hO = Start(ctx, op);
    ASSERT_NE(hO, nullptr);
    RecordEventState(hO, kCpNcclStateProxyOpInProgress, 0, false);
    for (int step = 0; step < 2; ++step) {
      EventDescr st = Descr(kCpNcclProxyStep, hO);
      st.step = 40 + step;
      sink.SetNow(t + 100 + 1000 * static_cast<uint64_t>(step));
      void* hS = Start(ctx, st);
      ASSERT_NE(hS, nullptr);
      for (int state : dir.states) RecordEventState(hS, state, 8192, true);
      sink.SetNow(t + 600 + 1000 * static_cast<uint64_t>(step));
      StopEvent(hS);
    }
    sink.SetNow(t + 3000);
    StopEvent(hO);
    t += 5000;
  }
  KernelChannel(sink, ctx, hC, 0, 500'000, 700'000, 0, 0);
  FinalizeContext(ctx);

  auto ops = sink.OfKind(COMMPROF_KIND_NCCL_PROXY_OP);
  ASSERT_EQ(ops.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const commprof_event& e = ops[i];
    const uint64_t t0 = 10'000 + 5000 * i;
    EXPECT_EQ(e.comm_id, kHash);
    EXPECT_EQ(e.seq, 7u);
    EXPECT_EQ(e.subtype, COMMPROF_OP_ALLREDUCE);
    EXPECT_EQ(sink.Name(e.name_id), "AllReduce");
    EXPECT_EQ(e.peer, dirs[i].peer);
    EXPECT_EQ(e.correlation, 0u);                     // channel
    EXPECT_EQ(e.reduce_op, dirs[i].is_send ? 1 : 2);  // send 1, receive 2
    EXPECT_EQ(e.bytes, 2u * 8192u);                   // the sum of its steps' transSize
    EXPECT_EQ(e.start_ns, t0);
    EXPECT_EQ(e.end_ns, t0 + 3000);
    EXPECT_EQ(e.device, 3u);
  }
  auto steps = sink.OfKind(COMMPROF_KIND_NCCL_PROXY_STEP);
  ASSERT_EQ(steps.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const commprof_event& e = steps[i];
    const uint64_t step = i % 2;
    const uint64_t t0 = 10'000 + 5000 * (i / 2) + 100 + 1000 * step;
    EXPECT_EQ(e.correlation, static_cast<uint32_t>((40 + step) << 8)) << "step above, channel 0 below";
    EXPECT_EQ(e.bytes, 8192u);
    EXPECT_EQ(e.start_ns, t0);
    EXPECT_EQ(e.end_ns, t0 + 500);
    EXPECT_EQ(e.seq, 7u);
    EXPECT_EQ(e.peer, dirs[i / 2].peer);
    EXPECT_EQ(e.reduce_op, dirs[i / 2].is_send ? 1 : 2);
  }
  // The collective is still timed by its kernel channel, not by the proxy ops.
  auto coll = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(coll.size(), 1u);
  EXPECT_EQ(coll[0].flags, 0u);
  EXPECT_EQ(coll[0].end_ns - coll[0].start_ns, 200'000u);
}

TEST(NcclProfilerPlugin, WithoutProxyDetailProxyOpsTimeV2CollectivesButAreNotRecorded) {
  for (bool detail : {false, true}) {
    CaptureSink sink;
    PluginOptions o;
    o.proxy_detail = detail;
    PluginContext* ctx = CreateContext(AbiVersion::kV2, CommInfo{}, &sink, o);
    EventDescr c = Descr(kCpNcclColl);
    c.func = "Broadcast";
    c.count = 1 << 20;
    c.datatype = "ncclInt8";
    c.comm_hash = 0x77;
    void* hC = Start(ctx, c);
    EventDescr op = Descr(kCpNcclProxyOp, hC);
    op.pid = static_cast<int>(::getpid());
    op.is_send = 1;
    op.peer = 3;
    void* hO = Start(ctx, op);
    ASSERT_NE(hO, nullptr);
    // 2.24/2.25: the ProxyOp states carry {transSize, steps}; the last, largest counts.
    RecordEventState(hO, 0, 0, true);
    RecordEventState(hO, 2, 1 << 20, true);
    StopEvent(hO);
    StopEvent(hC);
    FinalizeContext(ctx);
    EXPECT_EQ(sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE).size(), 1u);
    auto ops = sink.OfKind(COMMPROF_KIND_NCCL_PROXY_OP);
    ASSERT_EQ(ops.size(), detail ? 1u : 0u);
    if (detail) {
      EXPECT_EQ(ops[0].bytes, 1u << 20);
      EXPECT_EQ(ops[0].comm_id, 0x77u);
      EXPECT_EQ(ops[0].peer, 3);
      EXPECT_EQ(ops[0].reduce_op, 1);
    }
    EXPECT_TRUE(sink.OfKind(COMMPROF_KIND_NCCL_PROXY_STEP).empty());
  }
}

TEST(NcclProfilerPlugin, ForeignProxyEventsNeverTouchTheirContext) {
  // PXN: another process's proxy thread passes that process's context pointer. Dereferencing it
  // would crash here (the address is unmapped), so this passes only if the descriptor alone decides.
  auto* foreign_ctx = reinterpret_cast<PluginContext*>(static_cast<uintptr_t>(0x10));
  EventDescr op = Descr(kCpNcclProxyOp, reinterpret_cast<void*>(static_cast<uintptr_t>(0x20)));
  op.pid = static_cast<int>(::getpid()) + 100000;
  EXPECT_EQ(Start(foreign_ctx, op), nullptr);
  EventDescr step = Descr(kCpNcclProxyStep, nullptr);  // the step of the op we turned away
  EXPECT_EQ(Start(foreign_ctx, step), nullptr);
  EXPECT_TRUE(ForeignProxyEvent(op));
  EventDescr own = op;
  own.pid = static_cast<int>(::getpid());
  EXPECT_FALSE(ForeignProxyEvent(own));
  // The count reaches the next communicator to finalize.
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(), &sink, PluginOptions{});
  FinalizeContext(ctx);
  EXPECT_EQ(sink.CounterOf("nccl_foreign_proxy_op"), 2u);  // the Start above and the direct call
}

TEST(NcclProfilerPlugin, V2ProxyOpsAfterTheCollStopStillTimeTheCollective) {
  // The harness order: the application thread finishes (Coll stop) before the proxy thread appends
  // the proxy ops. A second collective never gets a proxy op (intra-node): INCOMPLETE at finalize.
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV2, CommInfo{}, &sink, PluginOptions{});
  EventDescr c = Descr(kCpNcclColl);
  c.func = "Broadcast";
  c.count = 64;
  c.datatype = "ncclInt8";
  c.root = 3;
  c.comm_hash = 0x77ull;
  sink.SetNow(100);
  void* h1 = Start(ctx, c);
  StopEvent(h1);
  c.seq_number = 1;
  void* h2 = Start(ctx, c);
  StopEvent(h2);
  EXPECT_TRUE(sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE).empty());
  std::thread proxy([&] {
    EventDescr op = Descr(kCpNcclProxyOp, h1);
    op.pid = static_cast<int>(::getpid());
    sink.SetNow(2000);
    void* a = Start(ctx, op);
    sink.SetNow(3000);
    StopEvent(a);
  });
  proxy.join();
  auto coll = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(coll.size(), 1u);
  EXPECT_EQ(coll[0].start_ns, 2000u);
  EXPECT_EQ(coll[0].end_ns, 3000u);
  EXPECT_EQ(coll[0].seq, 0u);
  EXPECT_EQ(coll[0].peer, 3);
  EXPECT_EQ(coll[0].flags, 0u);
  FinalizeContext(ctx);
  coll = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(coll.size(), 2u);
  EXPECT_EQ(coll[1].seq, 1u);
  EXPECT_EQ(coll[1].flags, COMMPROF_FLAG_INCOMPLETE);
  EXPECT_EQ(coll[1].start_ns, 100u);  // no span observed: start = end = the Coll start
  EXPECT_EQ(coll[1].end_ns, 100u);
  EXPECT_EQ(sink.CounterOf("nccl_coll_no_timing"), 1u);
  EXPECT_EQ(sink.CounterOf("nccl_unfinished_at_finalize"), 1u);
}

TEST(NcclProfilerPlugin, ConcurrentCollStopsAndKernelChannelsWriteEachCollectiveOnce) {
  // 3000 collectives with 4 channels each; the proxy thread may finish all channels before or after
  // the application thread's Coll stop. Every seq must be written exactly once, nothing left over.
  CaptureSink sink;
  PluginOptions options;
  options.pool_events = 512;  // far fewer than 3000 x 5 events: slots must be recycled
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(), &sink, options);
  constexpr int kColls = 3000;
  std::mutex mu;
  std::deque<void*> queue;
  std::atomic<bool> done{false};
  std::thread proxy([&] {
    for (;;) {
      void* h = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!queue.empty()) {
          h = queue.front();
          queue.pop_front();
        }
      }
      if (h == nullptr) {
        if (done.load()) return;
        std::this_thread::yield();
        continue;
      }
      for (uint8_t ch = 0; ch < 4; ++ch) {
        EventDescr d = Descr(kCpNcclKernelCh, h);
        d.channel_id = ch;
        d.ptimer = 1000 + ch;
        void* k = Start(ctx, d);
        RecordEventState(k, kCpNcclStateKernelChStop, 2000 + ch, true);
        StopEvent(k);
      }
    }
  });
  for (int i = 0; i < kColls; ++i) {
    EventDescr c = Descr(kCpNcclColl);
    c.func = "AllReduce";
    c.count = 1;
    c.datatype = "ncclFloat32";
    c.seq_number = static_cast<uint64_t>(i);
    c.n_channels = 4;
    void* h = nullptr;
    while ((h = Start(ctx, c)) == nullptr) std::this_thread::yield();  // pool full: wait for completions
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(h);
    }
    StopEvent(h);
  }
  done.store(true);
  proxy.join();
  auto coll = sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE);
  ASSERT_EQ(coll.size(), static_cast<size_t>(kColls));
  std::set<uint64_t> seqs;
  for (const auto& e : coll) {
    seqs.insert(e.seq);
    EXPECT_EQ(e.flags, 0u);
  }
  EXPECT_EQ(seqs.size(), static_cast<size_t>(kColls));
  EXPECT_EQ(sink.OfKind(COMMPROF_KIND_COMM_KERNEL).size(), static_cast<size_t>(4 * kColls));
  FinalizeContext(ctx);
  EXPECT_EQ(sink.CounterOf("nccl_unfinished_at_finalize"), 0u);
  EXPECT_EQ(sink.CounterOf("nccl_stale_parent"), 0u);
}

}  // namespace

// Hang diagnosis: a collective is in flight from its Coll start until its record is written (its
// kernel channels finished), whatever its "enqueued" stop says.
TEST(NcclProfilerPlugin, InflightOpsAreExactlyTheStartedCollectivesWhoseKernelsHaveNotFinished) {
  CaptureSink sink;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(1, 4), &sink, PluginOptions{});
  ASSERT_NE(ctx, nullptr);
  ASSERT_EQ(sink.providers(), 1u) << "the context registers itself at creation";
  EXPECT_TRUE(sink.Inflight().empty());

  auto coll = [&](const char* func, uint64_t seq, size_t count, const char* dt, int root, uint64_t at) {
    EventDescr c = Descr(kCpNcclColl);
    c.func = func;
    c.count = count;
    c.datatype = dt;
    c.seq_number = seq;
    c.root = root;
    c.n_channels = 1;
    sink.SetNow(at);
    void* h = Start(ctx, c);
    EXPECT_NE(h, nullptr);
    StopEvent(h);  // enqueued: still in flight
    return h;
  };
  void* done = coll("AllReduce", 10, 256, "ncclFloat32", 0, 5'000);
  coll("Broadcast", 4, 4096, "ncclInt8", 2, 6'000);
  coll("AllReduce", 11, 128, "ncclFloat64", 0, 7'000);
  EventDescr p = Descr(kCpNcclP2p);
  p.func = "Send";
  p.count = 64;
  p.datatype = "ncclInt32";
  p.peer = 3;
  sink.SetNow(8'000);
  void* hp = Start(ctx, p);
  ASSERT_NE(hp, nullptr);
  StopEvent(hp);
  KernelChannel(sink, ctx, done, 0, 100'000, 101'000, -90'000, 0);  // allreduce 10 finishes
  ASSERT_EQ(sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE).size(), 1u);

  auto ops = sink.Inflight();
  ASSERT_EQ(ops.size(), 3u);
  std::map<std::pair<uint8_t, uint64_t>, commprof_event> by;
  for (const auto& e : ops) {
    EXPECT_EQ(e.kind, COMMPROF_KIND_NCCL_COLLECTIVE);
    EXPECT_EQ(e.comm_id, kHash);
    EXPECT_EQ(e.end_ns, e.start_ns);
    EXPECT_EQ(e.flags, 0u);
    by[{e.subtype, e.seq}] = e;
  }
  ASSERT_TRUE(by.contains({COMMPROF_OP_BCAST, 4}));
  EXPECT_EQ((by[{COMMPROF_OP_BCAST, 4}].bytes), 4096u);
  EXPECT_EQ((by[{COMMPROF_OP_BCAST, 4}].peer), 2) << "the root";
  EXPECT_EQ((by[{COMMPROF_OP_BCAST, 4}].start_ns), 6'000u);
  ASSERT_TRUE(by.contains({COMMPROF_OP_ALLREDUCE, 11}));
  EXPECT_EQ((by[{COMMPROF_OP_ALLREDUCE, 11}].bytes), 1024u);
  EXPECT_EQ((by[{COMMPROF_OP_ALLREDUCE, 11}].datatype), COMMPROF_DT_FLOAT64);
  EXPECT_EQ((by[{COMMPROF_OP_ALLREDUCE, 11}].start_ns), 7'000u);
  ASSERT_TRUE(by.contains({COMMPROF_OP_SEND, 0}));
  EXPECT_EQ((by[{COMMPROF_OP_SEND, 0}].peer), 3);
  EXPECT_EQ((by[{COMMPROF_OP_SEND, 0}].bytes), 256u);
  EXPECT_FALSE(by.contains({COMMPROF_OP_ALLREDUCE, 10})) << "finished: recorded, not in flight";

  FinalizeContext(ctx);  // the rest is written INCOMPLETE, and the context is no provider any more
  EXPECT_EQ(sink.providers(), 0u);
  EXPECT_EQ(sink.OfKind(COMMPROF_KIND_NCCL_COLLECTIVE).size(), 4u);
}

// The shipper enumerates while NCCL's threads start and finish collectives: every operation it is
// given is whole (one collective's fields, never two mixed), and TSan sees no race.
TEST(NcclProfilerPlugin, InflightOpsReadConcurrentlyWithNcclThreadsAreNeverTorn) {
  CaptureSink sink;
  PluginOptions options;
  options.pool_events = 256;
  PluginContext* ctx = CreateContext(AbiVersion::kV5, Comm(), &sink, options);
  constexpr int kColls = 1000;  // a few seconds under TSan
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> seen{0}, bad{0};
  std::thread shipper([&] {
    while (!stop.load()) {
      for (const auto& e : sink.Inflight()) {
        seen.fetch_add(1);
        // Collective i moves i elements of float32 and has seq i.
        if (e.kind != COMMPROF_KIND_NCCL_COLLECTIVE || e.bytes != e.seq * 4 || e.seq >= kColls ||
            e.start_ns != 1'000'000 + e.seq) {
          bad.fetch_add(1);
        }
      }
      std::this_thread::yield();  // let the NCCL thread (and TSan) make progress between looks
    }
  });
  for (int i = 0; i < kColls; ++i) {
    EventDescr c = Descr(kCpNcclColl);
    c.func = "AllReduce";
    c.count = static_cast<size_t>(i);
    c.datatype = "ncclFloat32";
    c.seq_number = static_cast<uint64_t>(i);
    c.n_channels = 1;
    sink.SetNow(1'000'000 + static_cast<uint64_t>(i));
    void* h = Start(ctx, c);
    ASSERT_NE(h, nullptr);
    StopEvent(h);
    EventDescr d = Descr(kCpNcclKernelCh, h);
    d.ptimer = 10;
    void* k = Start(ctx, d);
    RecordEventState(k, kCpNcclStateKernelChStop, 20, true);
    StopEvent(k);
  }
  stop.store(true);
  shipper.join();
  EXPECT_EQ(bad.load(), 0u) << seen.load() << " in-flight operations seen";
  EXPECT_TRUE(sink.Inflight().empty());
  FinalizeContext(ctx);
}

TEST(NcclPluginCodes, AlgorithmAndProtocolShareOneByte) {
  EXPECT_EQ(AlgoProtoCode("TREE", "LL"), 0x11);
  EXPECT_EQ(AlgoProtoCode("PAT", "SIMPLE"), 0x37);
  EXPECT_EQ(AlgoProtoCode("NVLS_TREE", "LL128"), 0x26);
  EXPECT_EQ(AlgoProtoCode("SOMETHING_NEW", nullptr), 0x0F);
  EXPECT_EQ(AlgoProtoCode(nullptr, "LL9"), 0xF0);
  EXPECT_EQ(AlgoProtoCode(nullptr, nullptr), 0);
}

}  // namespace commprof::nccl
