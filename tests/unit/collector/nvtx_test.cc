// The NVTX injection (collector/nvtx_*): handlers installed through module tables laid out as the
// nvtx3 loader lays them out (t[0] unused, t[size] a NULL sentinel,
// one table per module, InitializeInjectionNvtx2 once per module), the events they record into a
// never-started Runtime (drained in-process), NCCL payload decoding with the values of
// the real libnccl, and the dedupe against the NCCL profiler plugin.
//
// Tests that call the handlers share the calling thread's NVTX stack; each leaves it balanced.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

#include "collector/internal_api.h"
#include "collector/nvtx_abi.h"
#include "collector/nvtx_injection.h"
#include "collector/nvtx_nccl.h"
#include "collector/nvtx_tool.h"
#include "collector/runtime.h"
#include "support/test_support.h"

// Load step 4 of the real nvtx3 loader (nvtx_real_loader_test.cc): these strong definitions win
// over the headers' weak ones. They live here, in a file that does not include the nvtx3 headers,
// because in C++ the headers' weak declaration is itself a definition.
extern "C" {
int (*InitializeInjectionNvtx2_fnptr)(commprof::nvtx_abi::GetExportTableFunc) = &InitializeInjectionNvtx2;
int (*InitializeInjectionNvtxExtension_fnptr)(commprof::nvtx_abi::ExtModuleInfo*) = &InitializeInjectionNvtxExtension;
}

namespace commprof {
namespace {

namespace na = nvtx_abi;

Config TestConfig(uint32_t activities = kActivityAll) {
  Config c;
  c.job_id = "job-nvtx";
  c.spool_dir = "/nonexistent-unused";
  c.buffer_events = 1 << 14;
  c.memory_mb = 64;
  c.flush_ms = 5;
  c.request_slots = 16;
  c.activities = activities;
  return c;
}

Identity TestIdentity() {
  Identity id;
  id.pid = static_cast<uint32_t>(::getpid());
  id.host = "nvtx-test";
  return id;
}

std::vector<commprof_event> Drain(Runtime& rt) {
  std::vector<commprof_event> out;
  commprof_event scratch[256];
  rt.DrainAll(scratch, 256, [&](const commprof_event* ev, uint32_t n) { out.insert(out.end(), ev, ev + n); });
  return out;
}

std::string NameOf(Runtime& rt, uint32_t id) { return std::string(rt.strings().View(id)); }

std::map<std::string, uint64_t> CountersOf(Runtime& rt) {
  std::map<std::string, uint64_t> c;
  for (const auto& [k, v] : rt.Counters().counters) c[k] = v;
  return c;
}

// ---- a module as the nvtx3 headers build it: its slots, and the tables pointing at them

constexpr unsigned kTableSize = 16;  // NVTX_CBID_CORE_SIZE / NVTX_CBID_CORE2_SIZE

struct FakeModule {
  na::FunctionPointer core_slots[kTableSize] = {};
  na::FunctionPointer core2_slots[kTableSize] = {};
  na::FunctionPointer* core_table[kTableSize + 1] = {};
  na::FunctionPointer* core2_table[kTableSize + 1] = {};
  uint32_t version_set = 0;
  FakeModule() {
    for (unsigned i = 1; i < kTableSize; ++i) {  // t[0] unused; t[kTableSize] the NULL sentinel
      core_table[i] = &core_slots[i];
      core2_table[i] = &core2_slots[i];
    }
  }
};

FakeModule* g_module = nullptr;  // the module whose export table the loader is handing out

int GetModuleFunctionTable(int module, na::FunctionTable* out_table, unsigned* out_size) {
  if (module == na::kModuleCore) {
    *out_table = g_module->core_table;
  } else if (module == na::kModuleCore2) {
    *out_table = g_module->core2_table;
  } else {
    return 0;
  }
  *out_size = kTableSize;
  return 1;
}
void SetVersion(uint32_t v) { g_module->version_set = v; }
const na::ExportTableCallbacks kCallbacks{sizeof(na::ExportTableCallbacks), &GetModuleFunctionTable};
const na::ExportTableVersionInfo kVersionInfo{sizeof(na::ExportTableVersionInfo), 3, 0, &SetVersion};
const void* GetExportTable(uint32_t id) {
  if (id == na::kEtidCallbacks) return &kCallbacks;
  if (id == na::kEtidVersionInfo) return &kVersionInfo;
  return nullptr;
}

// What the loader does on a module's first NVTX call.
int AttachModule(FakeModule& m) {
  g_module = &m;
  return InitializeInjectionNvtx2(&GetExportTable);
}

template <typename F>
F Slot(na::FunctionPointer p) {
  return reinterpret_cast<F>(p);
}

using PushA = int (*)(const char*);
using Pop = int (*)();
using PushEx = int (*)(const na::EventAttributes*);
using MarkA = void (*)(const char*);
using StartA = uint64_t (*)(const char*);
using End = void (*)(uint64_t);
using DomainCreateA = void* (*)(const char*);
using RegisterStringA = const void* (*)(const void*, const char*);
using DomainPushEx = int (*)(const void*, const na::EventAttributes*);
using DomainPop = int (*)(const void*);

na::EventAttributes Attributes() {
  na::EventAttributes a{};
  a.version = 2;
  a.size = sizeof(na::EventAttributes);
  return a;
}

TEST(NvtxInjection, FillsEveryCoreAndCore2SlotOfEachModuleAndNothingElse) {
  FakeModule app, nccl;
  ASSERT_EQ(AttachModule(app), 1);
  ASSERT_EQ(AttachModule(nccl), 1);  // the second module's first NVTX call
  for (FakeModule* m : {&app, &nccl}) {
    EXPECT_EQ(m->version_set, 3u);
    EXPECT_EQ(m->core_slots[0], nullptr) << "t[0] is unused";
    EXPECT_EQ(m->core_table[kTableSize], nullptr) << "the sentinel stays";
    for (unsigned i = 1; i < kTableSize; ++i) {
      EXPECT_NE(m->core_slots[i], nullptr) << "CORE callback " << i;
      EXPECT_NE(m->core2_slots[i], nullptr) << "CORE2 callback " << i;
    }
  }
  // Idempotent: attaching a module again writes the same handlers.
  na::FunctionPointer before = app.core_slots[na::core::kRangePushA];
  ASSERT_EQ(AttachModule(app), 1);
  EXPECT_EQ(app.core_slots[na::core::kRangePushA], before);
  EXPECT_EQ(nccl.core_slots[na::core::kRangePushA], before);
}

TEST(NvtxInjection, RefusesAnExportTableWithoutCallbacks) {
  EXPECT_EQ(InitializeInjectionNvtx2([](uint32_t) -> const void* { return nullptr; }), 0);
  EXPECT_EQ(InitializeInjectionNvtx2(nullptr), 0);
}

TEST(NvtxInjection, WithoutARuntimePushAndPopStillReturnDepthsAndNothingIsRecorded) {
  ProcessNvtxTool().UseRuntimeForTesting(nullptr);
  FakeModule app;
  ASSERT_EQ(AttachModule(app), 1);
  auto push = Slot<PushA>(app.core_slots[na::core::kRangePushA]);
  auto pop = Slot<Pop>(app.core_slots[na::core::kRangePop]);
  EXPECT_EQ(push("outer"), 0);
  EXPECT_EQ(push("inner"), 1);
  EXPECT_EQ(pop(), 1);
  EXPECT_EQ(pop(), 0);
  EXPECT_EQ(pop(), -1) << "a pop with nothing open is an error";
}

TEST(NvtxInjection, RangesMarksAndDomainsOfTwoModulesArriveWithNamesDepthsAndFields) {
  Runtime rt(TestConfig(), TestIdentity());
  ProcessNvtxTool().UseRuntimeForTesting(&rt);
  FakeModule app, lib;
  ASSERT_EQ(AttachModule(app), 1);
  ASSERT_EQ(AttachModule(lib), 1);
  auto push = Slot<PushA>(app.core_slots[na::core::kRangePushA]);
  auto lib_push = Slot<PushA>(lib.core_slots[na::core::kRangePushA]);
  auto lib_pop = Slot<Pop>(lib.core_slots[na::core::kRangePop]);
  auto pop = Slot<Pop>(app.core_slots[na::core::kRangePop]);
  auto push_ex = Slot<PushEx>(app.core_slots[na::core::kRangePushEx]);
  auto mark = Slot<MarkA>(app.core_slots[na::core::kMarkA]);
  auto create = Slot<DomainCreateA>(app.core2_slots[na::core2::kDomainCreateA]);
  auto reg = Slot<RegisterStringA>(app.core2_slots[na::core2::kDomainRegisterStringA]);
  auto dpush = Slot<DomainPushEx>(app.core2_slots[na::core2::kDomainRangePushEx]);
  auto dpop = Slot<DomainPop>(app.core2_slots[na::core2::kDomainRangePop]);

  const uint64_t t0 = rt.Now();
  EXPECT_EQ(push("outer"), 0);
  EXPECT_EQ(lib_push("from-lib"), 1) << "depth is per thread, whichever module pushes";
  na::EventAttributes a = Attributes();
  a.category = 7;
  a.color_type = na::kColorArgb;
  a.color = 0xFF00FF00u;
  a.payload_type = na::kPayloadI32;
  a.payload.i32 = -5;
  a.message_type = na::kMessageAscii;
  a.message.ascii = "attributed";
  EXPECT_EQ(push_ex(&a), 2);
  void* dom = create("MyDomain");
  EXPECT_EQ(dom, create("MyDomain")) << "one handle per domain name";
  const void* str = reg(dom, "registered-name");
  EXPECT_EQ(str, reg(dom, "registered-name"));
  na::EventAttributes d = Attributes();
  d.message_type = na::kMessageRegistered;
  d.message.registered = str;
  EXPECT_EQ(dpush(dom, &d), 0) << "a domain counts its own depth";
  mark("checkpoint");
  EXPECT_EQ(dpop(dom), 0);
  EXPECT_EQ(pop(), 2);
  EXPECT_EQ(lib_pop(), 1);
  EXPECT_EQ(pop(), 0);
  const uint64_t t1 = rt.Now();

  std::map<std::string, commprof_event> by_name;
  for (const auto& e : Drain(rt)) by_name[NameOf(rt, e.name_id)] = e;
  ASSERT_EQ(by_name.size(), 5u);
  for (const char* n : {"outer", "from-lib", "attributed", "registered-name"}) {
    const commprof_event& e = by_name.at(n);
    EXPECT_EQ(e.kind, COMMPROF_KIND_NVTX_RANGE) << n;
    EXPECT_EQ(e.subtype, 0) << n;
    EXPECT_GE(e.start_ns, t0) << n;
    EXPECT_LE(e.end_ns, t1) << n;
    EXPECT_LE(e.start_ns, e.end_ns) << n;
  }
  EXPECT_EQ(by_name.at("outer").seq, 0u);
  EXPECT_EQ(by_name.at("from-lib").seq, 1u);
  const commprof_event& at = by_name.at("attributed");
  EXPECT_EQ(at.seq, 2u);
  EXPECT_EQ(at.peer, 7) << "category";
  EXPECT_EQ(at.correlation, 0xFF00FF00u) << "color";
  EXPECT_EQ(at.datatype, COMMPROF_DT_INT32);
  EXPECT_EQ(static_cast<int64_t>(at.bytes), -5);
  EXPECT_EQ(at.comm_id, COMMPROF_NO_COMM_ID) << "default domain";
  const commprof_event& dr = by_name.at("registered-name");
  EXPECT_EQ(dr.seq, 0u);
  EXPECT_EQ(NameOf(rt, static_cast<uint32_t>(dr.comm_id)), "MyDomain");
  const commprof_event& m = by_name.at("checkpoint");
  EXPECT_EQ(m.kind, COMMPROF_KIND_NVTX_MARK);
  EXPECT_EQ(m.start_ns, m.end_ns);
  EXPECT_GE(m.start_ns, dr.start_ns);
  EXPECT_LE(m.start_ns, dr.end_ns);
  EXPECT_GE(by_name.at("from-lib").start_ns, by_name.at("outer").start_ns);
  EXPECT_LE(by_name.at("from-lib").end_ns, by_name.at("outer").end_ns);
  ProcessNvtxTool().UseRuntimeForTesting(nullptr);
}

TEST(NvtxInjection, RangeEndedOnAnotherThreadBelongsToTheStartingThread) {
  Runtime rt(TestConfig(), TestIdentity());
  ProcessNvtxTool().UseRuntimeForTesting(&rt);
  FakeModule app;
  ASSERT_EQ(AttachModule(app), 1);
  auto start = Slot<StartA>(app.core_slots[na::core::kRangeStartA]);
  auto end = Slot<End>(app.core_slots[na::core::kRangeEnd]);
  auto mark = Slot<MarkA>(app.core_slots[na::core::kMarkA]);
  mark("main-thread");  // gives the main thread its index
  // The process tool's counters are process totals: compare with their value now.
  const uint64_t unbalanced_before = CountersOf(rt).at("nvtx_unbalanced");
  const uint64_t id = start("handed-over");
  ASSERT_NE(id, 0u);
  uint32_t ender_index = 0;
  std::thread t([&] {
    mark("ender-thread");
    ender_index = rt.Thread()->index;
    end(id);
  });
  t.join();
  end(id);  // a second end of the same id: unknown now, counted
  std::map<std::string, commprof_event> by_name;
  for (const auto& e : Drain(rt)) by_name[NameOf(rt, e.name_id)] = e;
  const commprof_event& r = by_name.at("handed-over");
  EXPECT_EQ(r.kind, COMMPROF_KIND_NVTX_RANGE);
  EXPECT_EQ(r.subtype, 1) << "start/end range";
  EXPECT_EQ(r.thread_id, by_name.at("main-thread").thread_id);
  EXPECT_NE(r.thread_id, ender_index);
  EXPECT_EQ(by_name.at("ender-thread").thread_id, ender_index);
  EXPECT_EQ(CountersOf(rt).at("nvtx_unbalanced"), unbalanced_before + 1);
  ProcessNvtxTool().UseRuntimeForTesting(nullptr);
}

TEST(NvtxTool, MoreOpenStartEndRangesThanTableSlotsAllEndWithTheirOwnNames) {
  Runtime rt(TestConfig(), TestIdentity());
  NvtxTool tool;
  tool.UseRuntimeForTesting(&rt);
  const int n = static_cast<int>(NvtxRangeTable::kSlots) + 100;
  std::vector<uint64_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(tool.StartText(("r" + std::to_string(i)).c_str()));
  for (int i = n - 1; i >= 0; --i) tool.End(ids[static_cast<size_t>(i)]);
  std::vector<std::string> names;
  for (const auto& e : Drain(rt)) names.push_back(NameOf(rt, e.name_id));
  ASSERT_EQ(names.size(), static_cast<size_t>(n));
  std::sort(names.begin(), names.end());
  EXPECT_TRUE(std::adjacent_find(names.begin(), names.end()) == names.end()) << "each range once";
  EXPECT_EQ(CountersOf(rt).count("nvtx_unbalanced") ? CountersOf(rt).at("nvtx_unbalanced") : 0u, 0u);
}

TEST(NvtxTool, NvtxActivityOffRecordsNothing) {
  Runtime rt(TestConfig(kActivityMpi), TestIdentity());
  NvtxTool tool;
  tool.UseRuntimeForTesting(&rt);
  EXPECT_EQ(tool.PushText("x"), 0);
  tool.MarkText("m");
  EXPECT_EQ(tool.Pop(nullptr), 0);
  EXPECT_TRUE(Drain(rt).empty());
}

// ---- NCCL's ranges (payload values as the real libnccl passes them)

// What NCCL 2.28 passes for one call: the "NCCL" domain, the registered name, one EXT payload.
struct NcclCall {
  NvtxTool& tool;
  NvtxDomain* domain;
  int Push(const char* fn, const void* payload, size_t size, uint64_t schema) {
    data = {schema, size, payload};
    na::EventAttributes a = Attributes();
    a.payload_type = na::kPayloadExt;
    a.reserved0 = 1;
    a.payload.u64 = reinterpret_cast<uint64_t>(&data);
    a.message_type = na::kMessageRegistered;
    a.message.registered = tool.RegisterString(domain, fn);
    return tool.Push(domain, &a);
  }
  na::PayloadData data{};
};

struct AllReducePayload {
  uint64_t comm;
  size_t bytes;
  int32_t op;
};
struct SendPayload {
  uint64_t comm;
  size_t bytes;
  int32_t peer;
};
struct ReducePayload {
  uint64_t comm;
  size_t bytes;
  int32_t root;
  int32_t op;
};
constexpr uint64_t kStatic = na::kPayloadSchemaIdStaticStart;

TEST(NvtxNccl, RangesBecomeNcclApiEventsWithThePayloadDecoded) {
  Runtime rt(TestConfig(), TestIdentity());
  NvtxTool tool;
  tool.UseRuntimeForTesting(&rt);
  NcclCall call{tool, tool.CreateDomain("NCCL")};
  const AllReducePayload ar{0xABCDEF0123ull, 16 * sizeof(float), 0 /* ncclSum */};
  const SendPayload send{0xABCDEF0123ull, 32 * sizeof(int64_t), 3};
  const ReducePayload red{0x77ull, 1000, 2, 2 /* ncclMax */};
  ASSERT_EQ(call.Push("ncclAllReduce", &ar, sizeof(ar), kStatic + 5), 0);
  ASSERT_EQ(tool.Pop(call.domain), 0);
  ASSERT_EQ(call.Push("ncclSend", &send, sizeof(send), kStatic + 9), 0);
  ASSERT_EQ(tool.Pop(call.domain), 0);
  ASSERT_EQ(call.Push("ncclReduce", &red, sizeof(red), kStatic + 8), 0);
  ASSERT_EQ(tool.Pop(call.domain), 0);
  ASSERT_EQ(call.Push("ncclGroupStart", nullptr, 0, 0), 0);
  ASSERT_EQ(tool.Pop(call.domain), 0);
  std::map<std::string, commprof_event> by_name;
  for (const auto& e : Drain(rt)) by_name[NameOf(rt, e.name_id)] = e;
  ASSERT_EQ(by_name.size(), 4u);
  for (const auto& [n, e] : by_name) {
    EXPECT_EQ(e.kind, COMMPROF_KIND_NCCL_API) << n;
    EXPECT_EQ(e.flags, COMMPROF_FLAG_FROM_NVTX) << n;
  }
  const commprof_event& a = by_name.at("ncclAllReduce");
  EXPECT_EQ(a.subtype, COMMPROF_OP_ALLREDUCE);
  EXPECT_EQ(a.comm_id, 0xABCDEF0123ull);
  EXPECT_EQ(a.bytes, 64u);
  EXPECT_EQ(a.reduce_op, COMMPROF_RED_SUM);
  EXPECT_EQ(a.peer, COMMPROF_NO_PEER);
  const commprof_event& s = by_name.at("ncclSend");
  EXPECT_EQ(s.subtype, COMMPROF_OP_SEND);
  EXPECT_EQ(s.bytes, 256u);
  EXPECT_EQ(s.peer, 3);
  const commprof_event& r = by_name.at("ncclReduce");
  EXPECT_EQ(r.subtype, COMMPROF_OP_REDUCE);
  EXPECT_EQ(r.comm_id, 0x77u);
  EXPECT_EQ(r.peer, 2);
  EXPECT_EQ(r.reduce_op, COMMPROF_RED_MAX);
  const commprof_event& g = by_name.at("ncclGroupStart");
  EXPECT_EQ(g.subtype, 0);
  EXPECT_EQ(g.bytes, 0u);
}

TEST(NvtxNccl, ShortPayloadIsNotDecoded) {
  NcclCallFields f;
  f.bytes = 99;
  const AllReducePayload ar{1, 2, 3};
  EXPECT_FALSE(DecodeNcclPayload(NcclFunctionFromName("ncclAllReduce"), &ar, 16, f));
  EXPECT_EQ(f.bytes, 99u) << "untouched";
  EXPECT_TRUE(DecodeNcclPayload(NcclFunctionFromName("ncclAllGather"), &ar, 16, f));
  EXPECT_EQ(f.bytes, 2u);
  EXPECT_EQ(NcclFunctionFromName("ncclCommInitRank").op, 0);
  EXPECT_EQ(ReduceOpFromNccl(4), COMMPROF_RED_AVG);
  EXPECT_EQ(ReduceOpFromNccl(9), COMMPROF_RED_USER);
}

TEST(NvtxNccl, WhileThePluginIsAttachedItsCallsAreRecordedOnceAndCounted) {
  Runtime rt(TestConfig(), TestIdentity());
  NvtxTool tool;
  tool.UseRuntimeForTesting(&rt);
  NcclCall call{tool, tool.CreateDomain("NCCL")};
  const AllReducePayload ar{42, 64, 0};
  ASSERT_EQ(call.Push("ncclAllReduce", &ar, sizeof(ar), kStatic + 5), 0);  // before: recorded
  ASSERT_EQ(tool.Pop(call.domain), 0);
  tool.NoteNcclPluginAttached();
  // The same call once more, as the plugin records it, and as NCCL's NVTX range reports it.
  commprof_event plugin{};
  plugin.kind = COMMPROF_KIND_NCCL_API;
  plugin.subtype = COMMPROF_OP_ALLREDUCE;
  plugin.comm_id = 42;
  plugin.bytes = 64;
  ASSERT_EQ(call.Push("ncclAllReduce", &ar, sizeof(ar), kStatic + 5), 0);
  rt.Record(plugin);
  ASSERT_EQ(tool.Pop(call.domain), 0);
  ASSERT_EQ(call.Push("ncclGroupStart", nullptr, 0, 0), 0);  // not a call the plugin records
  ASSERT_EQ(tool.Pop(call.domain), 0);
  int api_allreduce = 0, from_nvtx = 0, group = 0;
  for (const auto& e : Drain(rt)) {
    if (e.kind == COMMPROF_KIND_NCCL_API && e.subtype == COMMPROF_OP_ALLREDUCE) ++api_allreduce;
    if (e.flags & COMMPROF_FLAG_FROM_NVTX) ++from_nvtx;
    if (NameOf(rt, e.name_id) == "ncclGroupStart") ++group;
  }
  EXPECT_EQ(api_allreduce, 2) << "one before the plugin attached, one from the plugin";
  EXPECT_EQ(from_nvtx, 2) << "the AllReduce before the attach and the GroupStart";
  EXPECT_EQ(group, 1);
  EXPECT_EQ(CountersOf(rt).at("nvtx_nccl_deduplicated"), 1u);
}

TEST(NvtxNccl, OnlyTheNcclPluginsAttachMarksTheProcessAsHavingThePlugin) {
  // The plugin's real way in (commprof_internal_attach, collector/c_api.cc) with a process runtime
  // made from the environment, in a child process so that the process tool's flag cannot leak
  // into other tests run in this one.
  test_support::TempDir dir("commprof-nvtx-attach");
  ASSERT_FALSE(dir.path().empty());
  EXPECT_EXIT(
      {
        ::setenv("COMMPROF_SPOOL_DIR", dir.path().c_str(), 1);
        ::setenv("COMMPROF_ACTIVITIES", "all", 1);
        ::setenv("COMMPROF_CLOCK_SYNC", "off", 1);
        ::unsetenv("COMMPROF_AGGREGATOR");
        const int mpi = commprof_internal_attach(kActivityMpi);
        const bool after_mpi = ProcessNvtxTool().nccl_plugin_attached();
        const int nccl = commprof_internal_attach(kActivityNccl);
        const bool after_nccl = ProcessNvtxTool().nccl_plugin_attached();
        ShutdownRuntime();
        std::_Exit(mpi == 1 && !after_mpi && nccl == 1 && after_nccl ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace commprof
