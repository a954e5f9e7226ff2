// The REAL nvtx3 loader (the toolkit's header-only NVTX v3) drives our injection in-process: the
// unit test binary defines InitializeInjectionNvtx2_fnptr / InitializeInjectionNvtxExtension_fnptr
// (the loader's injection step, see nvtx_test.cc), so the headers' own init code
// hands us its real export table and payload module info. Also checks our ABI declarations
// (collector/nvtx_abi.h) against the headers' layouts.
#include <gtest/gtest.h>

#if COMMPROF_HAVE_NVTX3
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "collector/nvtx_abi.h"
#include "collector/nvtx_tool.h"
#include "collector/runtime.h"

namespace commprof {
namespace {

namespace na = nvtx_abi;

// Our declarations against the real ones (field order and offsets, not only sizes).
static_assert(sizeof(na::EventAttributes) == sizeof(nvtxEventAttributes_t));
static_assert(offsetof(na::EventAttributes, category) == offsetof(nvtxEventAttributes_t, category));
static_assert(offsetof(na::EventAttributes, color) == offsetof(nvtxEventAttributes_t, color));
static_assert(offsetof(na::EventAttributes, payload_type) == offsetof(nvtxEventAttributes_t, payloadType));
static_assert(offsetof(na::EventAttributes, reserved0) == offsetof(nvtxEventAttributes_t, reserved0));
static_assert(offsetof(na::EventAttributes, payload) == offsetof(nvtxEventAttributes_t, payload));
static_assert(offsetof(na::EventAttributes, message_type) == offsetof(nvtxEventAttributes_t, messageType));
static_assert(offsetof(na::EventAttributes, message) == offsetof(nvtxEventAttributes_t, message));
static_assert(sizeof(na::PayloadData) == sizeof(nvtxPayloadData_t));
static_assert(offsetof(na::PayloadData, payload) == offsetof(nvtxPayloadData_t, payload));
static_assert(offsetof(na::PayloadSchemaAttr, schema_id) == offsetof(nvtxPayloadSchemaAttr_t, schemaId));
static_assert(offsetof(na::PayloadEnumAttr, schema_id) == offsetof(nvtxPayloadEnumAttr_t, schemaId));
static_assert(sizeof(na::ExtModuleInfo) == sizeof(nvtxExtModuleInfo_t));
static_assert(offsetof(na::ExtModuleInfo, segments) == offsetof(nvtxExtModuleInfo_t, segments));
static_assert(na::kPayloadExt == NVTX_PAYLOAD_TYPE_EXT);
static_assert(na::kPayloadSchemaIdStaticStart == NVTX_PAYLOAD_SCHEMA_ID_STATIC_START);
static_assert(na::core::kRangePushA == NVTX_CBID_CORE_RangePushA &&
              na::core::kNameOsThreadW == NVTX_CBID_CORE_NameOsThreadW);
static_assert(na::core2::kDomainCreateA == NVTX_CBID_CORE2_DomainCreateA &&
              na::core2::kInitialize == NVTX_CBID_CORE2_Initialize);
static_assert(na::payload::kRangePopPayload == NVTX3EXT_CBID_nvtxRangePopPayload);
static_assert(na::kModuleCore2 == NVTX_CB_MODULE_CORE2);

Config LoaderConfig() {
  Config c;
  c.job_id = "job-nvtx-loader";
  c.spool_dir = "/nonexistent-unused";
  c.buffer_events = 4096;
  c.memory_mb = 16;
  c.request_slots = 16;
  return c;
}

struct NcclLikePayload {
  uint64_t comm;
  size_t bytes;
  int32_t op;
};

TEST(NvtxRealLoader, HeadersOwnInitInstallsOurHandlersAndEveryCallIsRecorded) {
  ::unsetenv("NVTX_INJECTION64_PATH");  // the loader must take the static pointer, not dlopen
  Identity id;
  id.pid = static_cast<uint32_t>(::getpid());
  Runtime rt(LoaderConfig(), id);
  ProcessNvtxTool().UseRuntimeForTesting(&rt);

  EXPECT_EQ(nvtxRangePushA("outer"), 0);
  EXPECT_EQ(nvtxRangePushA("inner"), 1);
  nvtxMarkA("mark");
  EXPECT_EQ(nvtxRangePop(), 1);
  nvtxRangeId_t rid = nvtxRangeStartA("crossing");
  EXPECT_NE(rid, 0u);
  std::thread([rid] { nvtxRangeEnd(rid); }).join();
  EXPECT_EQ(nvtxRangePop(), 0);
  nvtxNameOsThreadA(static_cast<uint32_t>(::gettid()), "main-thread");

  // NCCL's way: the "NCCL" domain, a static schema, a registered name, one EXT payload.
  nvtxDomainHandle_t nccl = nvtxDomainCreateA("NCCL");
  nvtxPayloadSchemaAttr_t schema{};
  schema.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
  schema.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  schema.schemaId = NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 5;
  EXPECT_EQ(nvtxPayloadSchemaRegister(nccl, &schema), NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 5);
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = nvtxDomainRegisterStringA(nccl, "ncclAllReduce");
  NcclLikePayload p{0x1234, 1024 * sizeof(float), 2 /* ncclMax */};
  nvtxPayloadData_t pd;
  NVTX_PAYLOAD_EVTATTR_SET_DATA(a, &pd, NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 5, &p, sizeof(p))
  EXPECT_EQ(nvtxDomainRangePushEx(nccl, &a), 0);
  EXPECT_EQ(nvtxDomainRangePop(nccl), 0);
  // A CommInit-style range: pushed plain, ended by nvtxRangePopPayload (NCCL hands the payload at the pop).
  nvtxEventAttributes_t init{};
  init.version = NVTX_VERSION;
  init.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  init.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  init.message.registered = nvtxDomainRegisterStringA(nccl, "ncclCommInitRank");
  EXPECT_EQ(nvtxDomainRangePushEx(nccl, &init), 0);
  uint64_t init_payload[2] = {0x9999, 0};
  nvtxPayloadData_t ipd{NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 0, sizeof(init_payload), init_payload};
  EXPECT_EQ(nvtxRangePopPayload(nccl, &ipd, 1), 0);

  std::map<std::string, commprof_event> by_name;
  commprof_event scratch[64];
  rt.DrainAll(scratch, 64, [&](const commprof_event* ev, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) by_name[std::string(rt.strings().View(ev[i].name_id))] = ev[i];
  });
  ProcessNvtxTool().UseRuntimeForTesting(nullptr);
  ASSERT_EQ(by_name.size(), 7u);
  EXPECT_EQ(by_name.at("outer").kind, COMMPROF_KIND_NVTX_RANGE);
  EXPECT_EQ(by_name.at("outer").seq, 0u);
  EXPECT_EQ(by_name.at("inner").seq, 1u);
  EXPECT_EQ(by_name.at("mark").kind, COMMPROF_KIND_NVTX_MARK);
  EXPECT_EQ(by_name.at("crossing").subtype, 1);
  EXPECT_EQ(by_name.at("crossing").thread_id, by_name.at("outer").thread_id) << "the starting thread";
  EXPECT_EQ(by_name.at("main-thread").subtype, 1) << "thread name";
  EXPECT_EQ(by_name.at("main-thread").bytes, static_cast<uint64_t>(::gettid()));
  const commprof_event& ar = by_name.at("ncclAllReduce");
  EXPECT_EQ(ar.kind, COMMPROF_KIND_NCCL_API);
  EXPECT_EQ(ar.flags, COMMPROF_FLAG_FROM_NVTX);
  EXPECT_EQ(ar.subtype, COMMPROF_OP_ALLREDUCE);
  EXPECT_EQ(ar.comm_id, 0x1234u);
  EXPECT_EQ(ar.bytes, 4096u);
  EXPECT_EQ(ar.reduce_op, COMMPROF_RED_MAX);
  const commprof_event& ci = by_name.at("ncclCommInitRank");
  EXPECT_EQ(ci.kind, COMMPROF_KIND_NCCL_API);
  EXPECT_EQ(ci.comm_id, 0x9999u) << "commHash from the pop payload";
}

}  // namespace
}  // namespace commprof

#else
TEST(NvtxRealLoader, HeadersOwnInitInstallsOurHandlersAndEveryCallIsRecorded) {
  GTEST_SKIP() << "nvtx3 headers not found (looked for nvtx3/nvToolsExt.h under /usr/local/cuda/include and the "
                  "CUDA toolkit's include directory)";
}
#endif
