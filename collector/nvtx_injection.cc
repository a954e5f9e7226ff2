// The NVTX injection entry points of libcommprof.so (the nvtx3 headers' injection ABI): NVTX's loader in
// each module that uses NVTX (the program, libnccl.so.2, ...) dlopens NVTX_INJECTION64_PATH on that
// module's first NVTX call and calls InitializeInjectionNvtx2 with the module's export table; we
// write our handlers into that module's CORE and CORE2 slots. Every call only fills slots, so it
// is idempotent and any number of modules can attach. The payload extension is offered the same
// way, per module, through InitializeInjectionNvtxExtension. The handlers forward to the process's
// one NvtxTool (collector/nvtx_tool.h).
#include "collector/nvtx_injection.h"

#include "collector/nvtx_abi.h"
#include "collector/nvtx_tool.h"

namespace na = commprof::nvtx_abi;
using commprof::NvtxDomain;
using commprof::NvtxString;
using commprof::ProcessNvtxTool;

namespace {

// Handles are our own objects; NVTX passes them back as opaque pointers.
const NvtxDomain* D(const void* handle) { return static_cast<const NvtxDomain*>(handle); }

// ---- CORE
void MarkEx(const na::EventAttributes* a) { ProcessNvtxTool().Mark(nullptr, a); }
void MarkA(const char* m) { ProcessNvtxTool().MarkText(m); }
void MarkW(const wchar_t* m) { ProcessNvtxTool().MarkWide(m); }
uint64_t RangeStartEx(const na::EventAttributes* a) { return ProcessNvtxTool().Start(nullptr, a); }
uint64_t RangeStartA(const char* m) { return ProcessNvtxTool().StartText(m); }
uint64_t RangeStartW(const wchar_t* m) { return ProcessNvtxTool().StartWide(m); }
void RangeEnd(uint64_t id) { ProcessNvtxTool().End(id); }
int RangePushEx(const na::EventAttributes* a) { return ProcessNvtxTool().Push(nullptr, a); }
int RangePushA(const char* m) { return ProcessNvtxTool().PushText(m); }
int RangePushW(const wchar_t* m) { return ProcessNvtxTool().PushWide(m); }
int RangePop() { return ProcessNvtxTool().Pop(nullptr); }
void NameCategoryA(uint32_t, const char*) {}  // category names are not stored (docs/nvtx.md)
void NameCategoryW(uint32_t, const wchar_t*) {}
void NameOsThreadA(uint32_t tid, const char* name) { ProcessNvtxTool().NameOsThread(tid, name); }
void NameOsThreadW(uint32_t tid, const wchar_t* name) {
  // Thread names are short; wide ones are stored as their ASCII part.
  char buf[64];
  size_t n = 0;
  for (; name != nullptr && name[n] != 0 && n + 1 < sizeof(buf); ++n) {
    buf[n] = name[n] < 0x80 ? static_cast<char>(name[n]) : '?';
  }
  buf[n] = '\0';
  ProcessNvtxTool().NameOsThread(tid, buf);
}

// ---- CORE2 (domains)
void DomainMarkEx(const void* d, const na::EventAttributes* a) { ProcessNvtxTool().Mark(D(d), a); }
uint64_t DomainRangeStartEx(const void* d, const na::EventAttributes* a) { return ProcessNvtxTool().Start(D(d), a); }
void DomainRangeEnd(const void*, uint64_t id) { ProcessNvtxTool().End(id); }
int DomainRangePushEx(const void* d, const na::EventAttributes* a) { return ProcessNvtxTool().Push(D(d), a); }
int DomainRangePop(const void* d) { return ProcessNvtxTool().Pop(D(d)); }
void* DomainResourceCreate(const void*, const void*) { return nullptr; }  // resources: not recorded
void DomainResourceDestroy(void*) {}
void DomainNameCategoryA(const void*, uint32_t, const char*) {}
void DomainNameCategoryW(const void*, uint32_t, const wchar_t*) {}
const void* DomainRegisterStringA(const void* d, const char* s) {
  return ProcessNvtxTool().RegisterString(D(d), s != nullptr ? s : "");
}
const void* DomainRegisterStringW(const void* d, const wchar_t* s) {
  char buf[256];
  size_t n = 0;
  for (; s != nullptr && s[n] != 0 && n + 1 < sizeof(buf); ++n) {
    buf[n] = s[n] < 0x80 ? static_cast<char>(s[n]) : '?';
  }
  buf[n] = '\0';
  return ProcessNvtxTool().RegisterString(D(d), buf);
}
void* DomainCreateA(const char* name) { return ProcessNvtxTool().CreateDomain(name != nullptr ? name : ""); }
void* DomainCreateW(const wchar_t* name) {
  char buf[256];
  size_t n = 0;
  for (; name != nullptr && name[n] != 0 && n + 1 < sizeof(buf); ++n) {
    buf[n] = name[n] < 0x80 ? static_cast<char>(name[n]) : '?';
  }
  buf[n] = '\0';
  return ProcessNvtxTool().CreateDomain(buf);
}
void DomainDestroy(void*) {}  // handles stay valid: another thread or module may still use them
void Initialize(const void*) {}

// ---- payload extension
uint64_t SchemaRegister(const void*, const na::PayloadSchemaAttr* a) { return ProcessNvtxTool().RegisterSchema(a); }
uint64_t EnumRegister(const void*, const na::PayloadEnumAttr* a) { return ProcessNvtxTool().RegisterEnum(a); }
int RangePushPayload(const void* d, const na::PayloadData* p, size_t n) {
  return ProcessNvtxTool().PushPayload(D(d), p, n);
}
int RangePopPayload(const void* d, const na::PayloadData* p, size_t n) { return ProcessNvtxTool().Pop(D(d), p, n); }

template <typename F>
na::FunctionPointer Fn(F* f) {
  return reinterpret_cast<na::FunctionPointer>(f);
}

struct Handler {
  unsigned id;
  na::FunctionPointer fn;
};

// Writes each handler into its slot of one module table: t[0] is unused, t[size] the NULL
// sentinel, a NULL t[i] a callback the module does not have.
bool InstallModule(const na::ExportTableCallbacks* cb, int module, std::initializer_list<Handler> handlers) {
  na::FunctionTable table = nullptr;
  unsigned size = 0;
  if (cb->GetModuleFunctionTable(module, &table, &size) == 0 || table == nullptr) {
    return false;
  }
  for (const Handler& h : handlers) {
    if (h.id < size && table[h.id] != nullptr) {
      *table[h.id] = h.fn;
    }
  }
  return true;
}

}  // namespace

namespace commprof {

int InstallNvtxHandlers(nvtx_abi::GetExportTableFunc get_export_table) {
  if (get_export_table == nullptr) {
    return 0;
  }
  const auto* cb = static_cast<const na::ExportTableCallbacks*>(get_export_table(na::kEtidCallbacks));
  if (cb == nullptr || cb->struct_size < sizeof(na::ExportTableCallbacks) || cb->GetModuleFunctionTable == nullptr) {
    return 0;
  }
  namespace c = na::core;
  namespace c2 = na::core2;
  bool core = InstallModule(cb, na::kModuleCore,
                            {{c::kMarkEx, Fn(MarkEx)},
                             {c::kMarkA, Fn(MarkA)},
                             {c::kMarkW, Fn(MarkW)},
                             {c::kRangeStartEx, Fn(RangeStartEx)},
                             {c::kRangeStartA, Fn(RangeStartA)},
                             {c::kRangeStartW, Fn(RangeStartW)},
                             {c::kRangeEnd, Fn(RangeEnd)},
                             {c::kRangePushEx, Fn(RangePushEx)},
                             {c::kRangePushA, Fn(RangePushA)},
                             {c::kRangePushW, Fn(RangePushW)},
                             {c::kRangePop, Fn(RangePop)},
                             {c::kNameCategoryA, Fn(NameCategoryA)},
                             {c::kNameCategoryW, Fn(NameCategoryW)},
                             {c::kNameOsThreadA, Fn(NameOsThreadA)},
                             {c::kNameOsThreadW, Fn(NameOsThreadW)}});
  bool core2 = InstallModule(cb, na::kModuleCore2,
                             {{c2::kDomainMarkEx, Fn(DomainMarkEx)},
                              {c2::kDomainRangeStartEx, Fn(DomainRangeStartEx)},
                              {c2::kDomainRangeEnd, Fn(DomainRangeEnd)},
                              {c2::kDomainRangePushEx, Fn(DomainRangePushEx)},
                              {c2::kDomainRangePop, Fn(DomainRangePop)},
                              {c2::kDomainResourceCreate, Fn(DomainResourceCreate)},
                              {c2::kDomainResourceDestroy, Fn(DomainResourceDestroy)},
                              {c2::kDomainNameCategoryA, Fn(DomainNameCategoryA)},
                              {c2::kDomainNameCategoryW, Fn(DomainNameCategoryW)},
                              {c2::kDomainRegisterStringA, Fn(DomainRegisterStringA)},
                              {c2::kDomainRegisterStringW, Fn(DomainRegisterStringW)},
                              {c2::kDomainCreateA, Fn(DomainCreateA)},
                              {c2::kDomainCreateW, Fn(DomainCreateW)},
                              {c2::kDomainDestroy, Fn(DomainDestroy)},
                              {c2::kInitialize, Fn(Initialize)}});
  if (const auto* vi = static_cast<const na::ExportTableVersionInfo*>(get_export_table(na::kEtidVersionInfo));
      vi != nullptr && vi->struct_size >= sizeof(na::ExportTableVersionInfo) &&
      vi->SetInjectionNvtxVersion != nullptr) {
    vi->SetInjectionNvtxVersion(3);
  }
  return core || core2 ? 1 : 0;
}

int InstallNvtxPayloadExtension(nvtx_abi::ExtModuleInfo* info) {
  if (info == nullptr || info->module_id != na::kExtModulePayload || info->segments_count < 1 ||
      info->segments == nullptr) {
    return 0;  // other extensions (memory, counters): not handled, NVTX disables them
  }
  na::ExtModuleSegment& seg = info->segments[0];
  if (seg.function_slots == nullptr || seg.slot_count <= na::payload::kRangePopPayload) {
    return 0;
  }
  seg.function_slots[na::payload::kSchemaRegister] = reinterpret_cast<intptr_t>(&SchemaRegister);
  seg.function_slots[na::payload::kEnumRegister] = reinterpret_cast<intptr_t>(&EnumRegister);
  seg.function_slots[na::payload::kRangePushPayload] = reinterpret_cast<intptr_t>(&RangePushPayload);
  seg.function_slots[na::payload::kRangePopPayload] = reinterpret_cast<intptr_t>(&RangePopPayload);
  return 1;
}

}  // namespace commprof

extern "C" {

COMMPROF_NVTX_EXPORT int InitializeInjectionNvtx2(commprof::nvtx_abi::GetExportTableFunc get_export_table) {
  return commprof::InstallNvtxHandlers(get_export_table);
}

COMMPROF_NVTX_EXPORT int InitializeInjectionNvtxExtension(commprof::nvtx_abi::ExtModuleInfo* info) {
  return commprof::InstallNvtxPayloadExtension(info);
}

}  // extern "C"
