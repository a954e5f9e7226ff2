// Our own declarations of the NVTX v3 injection ABI (the tool side), so libcommprof.so builds
// without the CUDA toolkit and never includes nvtx3 headers. Every value and layout below is a
// fact of the NVTX v3 injection ABI as the toolkit's nvtx3 headers define it (ids, tables,
// nvtxEventAttributes_t v2, the payload extension's module info) or of the toolkit's
// nvToolsExtPayload.h (nvtxPayloadData_t, the schema
// attributes); tests/unit/collector/nvtx_abi_test.cc checks each layout against the real nvtx3
// headers where the toolkit is installed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace commprof::nvtx_abi {

// ---- export tables (nvtxTypes.h)
using FunctionPointer = void (*)();
using FunctionTable = FunctionPointer**;  // t[i] points at the module's slot for callback id i
using GetExportTableFunc = const void* (*)(uint32_t export_table_id);

constexpr uint32_t kEtidCallbacks = 1;
constexpr uint32_t kEtidVersionInfo = 3;

struct ExportTableCallbacks {
  size_t struct_size;
  int (*GetModuleFunctionTable)(int callback_module, FunctionTable* out_table, unsigned* out_size);
};

struct ExportTableVersionInfo {
  size_t struct_size;
  uint32_t version;
  uint32_t reserved0;
  void (*SetInjectionNvtxVersion)(uint32_t version);
};

// ---- callback modules and ids
constexpr int kModuleCore = 1;
constexpr int kModuleCore2 = 5;

namespace core {
constexpr unsigned kMarkEx = 1, kMarkA = 2, kMarkW = 3, kRangeStartEx = 4, kRangeStartA = 5, kRangeStartW = 6,
                   kRangeEnd = 7, kRangePushEx = 8, kRangePushA = 9, kRangePushW = 10, kRangePop = 11,
                   kNameCategoryA = 12, kNameCategoryW = 13, kNameOsThreadA = 14, kNameOsThreadW = 15;
}  // namespace core
namespace core2 {
constexpr unsigned kDomainMarkEx = 1, kDomainRangeStartEx = 2, kDomainRangeEnd = 3, kDomainRangePushEx = 4,
                   kDomainRangePop = 5, kDomainResourceCreate = 6, kDomainResourceDestroy = 7, kDomainNameCategoryA = 8,
                   kDomainNameCategoryW = 9, kDomainRegisterStringA = 10, kDomainRegisterStringW = 11,
                   kDomainCreateA = 12, kDomainCreateW = 13, kDomainDestroy = 14, kInitialize = 15;
}  // namespace core2

// ---- nvtxEventAttributes_t, version 2
constexpr int kMessageAscii = 1, kMessageUnicode = 2, kMessageRegistered = 3;
constexpr int kPayloadU64 = 1, kPayloadI64 = 2, kPayloadDouble = 3, kPayloadU32 = 4, kPayloadI32 = 5, kPayloadFloat = 6;
constexpr int32_t kPayloadExt = static_cast<int32_t>(0xDFBD0009u);  // NVTX_PAYLOAD_TYPE_EXT
constexpr int kColorArgb = 1;

struct EventAttributes {
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type;
  int32_t reserved0;  // with kPayloadExt: the number of PayloadData entries
  union {
    uint64_t u64;
    int64_t i64;
    double f64;
    uint32_t u32;
    int32_t i32;
    float f32;
  } payload;
  int32_t message_type;
  union {
    const char* ascii;
    const wchar_t* unicode;
    const void* registered;  // a string handle the tool returned from DomainRegisterString
  } message;
};

// With kPayloadExt, payload.u64 points at `reserved0` of these.
struct PayloadData {
  uint64_t schema_id;
  size_t size;
  const void* payload;
};

constexpr uint64_t kPayloadSchemaIdStaticStart = 1ull << 24;

// nvtxPayloadSchemaAttr_t: only the fields a tool needs to answer the registration.
struct PayloadSchemaAttr {
  uint64_t field_mask;
  const char* name;
  uint64_t type;
  uint64_t flags;
  const void* entries;
  size_t num_entries;
  size_t payload_static_size;
  size_t pack_align;
  uint64_t schema_id;
  void* extension;
};
// nvtxPayloadEnumAttr_t (the same habit: the id is what the tool must hand back).
struct PayloadEnumAttr {
  uint64_t field_mask;
  const char* name;
  const void* entries;
  size_t num_entries;
  size_t size_of_enum;
  uint64_t schema_id;
  void* extension;
};

// ---- extension modules (nvtxExtTypes.h)
struct ExtModuleSegment {
  size_t segment_id;
  size_t slot_count;
  intptr_t* function_slots;
};
struct ExtModuleInfo {
  uint16_t nvtx_ver;
  uint16_t struct_size;
  uint16_t module_id;
  uint16_t compat_id;
  size_t segments_count;
  ExtModuleSegment* segments;
  void* get_export_function;
  const void* ext_info;
};

constexpr uint16_t kExtModulePayload = 2;
namespace payload {
constexpr unsigned kSchemaRegister = 0, kEnumRegister = 1, kMarkPayload = 2, kRangePushPayload = 3,
                   kRangePopPayload = 4, kRangeStartPayload = 5, kRangeEndPayload = 6, kDomainIsEnabled = 7;
}  // namespace payload

}  // namespace commprof::nvtx_abi
