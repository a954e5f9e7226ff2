#include "collector/nvtx_tool.h"

#include <cstring>
#include <cwchar>

#include "collector/event_builder.h"
#include "collector/runtime.h"
#include "core/config.h"

namespace commprof {

namespace {

// The per-thread push/pop stack. Allocated on a thread's first push (its only allocation) and
// freed when the thread exits; the TLS itself is one pointer (this library may be dlopen'ed).
struct NvtxThreadStack {
  static constexpr int kCapacity = 64;
  int size = 0;
  int overflow = 0;  // pushes beyond kCapacity, not stored (counted)
  NvtxOpenRange entries[kCapacity];
};

// The hot path reads only the raw pointer (a plain initial-exec TLS load); the owner, whose
// destructor frees the stack at thread exit, is touched once, when the stack is allocated.
thread_local NvtxThreadStack* t_stack = nullptr;
struct StackOwner {
  std::unique_ptr<NvtxThreadStack> stack;
  ~StackOwner() { t_stack = nullptr; }
};
thread_local StackOwner t_stack_owner;

NvtxThreadStack& Stack() {
  if (t_stack != nullptr) {
    [[likely]] return *t_stack;
  }
  t_stack_owner.stack = std::make_unique<NvtxThreadStack>();
  t_stack = t_stack_owner.stack.get();
  return *t_stack;
}

// wchar_t (UTF-32 on Linux) to UTF-8, truncated to the buffer: NVTX's W entry points.
const char* ToUtf8(const wchar_t* text, char (&buf)[256]) {
  size_t n = 0;
  for (const wchar_t* p = text; p != nullptr && *p != 0; ++p) {
    // wchar_t is a 32-bit UTF-32 code unit on Linux, not a char: no sign-extension trap here.
    auto c = static_cast<uint32_t>(*p);  // NOLINT(bugprone-signed-char-misuse)
    char tmp[4];
    size_t len;
    if (c < 0x80) {
      tmp[0] = static_cast<char>(c);
      len = 1;
    } else if (c < 0x800) {
      tmp[0] = static_cast<char>(0xC0 | (c >> 6));
      tmp[1] = static_cast<char>(0x80 | (c & 0x3F));
      len = 2;
    } else if (c < 0x10000) {
      tmp[0] = static_cast<char>(0xE0 | (c >> 12));
      tmp[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      tmp[2] = static_cast<char>(0x80 | (c & 0x3F));
      len = 3;
    } else if (c < 0x110000) {
      tmp[0] = static_cast<char>(0xF0 | (c >> 18));
      tmp[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      tmp[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      tmp[3] = static_cast<char>(0x80 | (c & 0x3F));
      len = 4;
    } else {
      tmp[0] = '?';
      len = 1;
    }
    if (n + len >= sizeof(buf)) {
      break;
    }
    std::memcpy(buf + n, tmp, len);
    n += len;
  }
  buf[n] = '\0';
  return buf;
}

// An NVTX scalar payload as (bits, enum commprof_datatype).
void ScalarPayload(const nvtx_abi::EventAttributes* a, NvtxOpenRange& r) {
  switch (a->payload_type) {
    case nvtx_abi::kPayloadU64:
      r.payload = a->payload.u64;
      r.payload_type = COMMPROF_DT_UINT64;
      break;
    case nvtx_abi::kPayloadI64:
      r.payload = a->payload.u64;
      r.payload_type = COMMPROF_DT_INT64;
      break;
    case nvtx_abi::kPayloadDouble:
      r.payload = a->payload.u64;
      r.payload_type = COMMPROF_DT_FLOAT64;
      break;
    case nvtx_abi::kPayloadU32:
      r.payload = a->payload.u32;
      r.payload_type = COMMPROF_DT_UINT32;
      break;
    case nvtx_abi::kPayloadI32:
      r.payload = static_cast<uint64_t>(static_cast<int64_t>(a->payload.i32));
      r.payload_type = COMMPROF_DT_INT32;
      break;
    case nvtx_abi::kPayloadFloat: {
      uint32_t bits;
      std::memcpy(&bits, &a->payload.f32, sizeof(bits));
      r.payload = bits;
      r.payload_type = COMMPROF_DT_FLOAT32;
      break;
    }
    default:
      break;  // none, or an extended payload (decoded for NCCL only)
  }
}

constexpr size_t kAttrMessageEnd = offsetof(nvtx_abi::EventAttributes, message) + sizeof(void*);

}  // namespace

// ---- NvtxRangeTable

uint64_t NvtxRangeTable::Start(const NvtxOpenRange& r) {
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  Slot& s = slots_[id % kSlots];
  uint64_t expected = 0;
  if (s.id.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) {
    s.range = r;
    s.id.store(id, std::memory_order_release);
    return id;
  }
  // More than kSlots ranges open (or one left open kSlots ids ago): the slow path keeps it.
  std::lock_guard<std::mutex> lock(overflow_mu_);
  overflow_.emplace(id, r);
  overflow_open_.fetch_add(1, std::memory_order_release);
  overflowed_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

bool NvtxRangeTable::End(uint64_t id, NvtxOpenRange& out) {
  if (id == 0 || id == kBusy) {
    return false;
  }
  Slot& s = slots_[id % kSlots];
  if (s.id.load(std::memory_order_acquire) == id) {
    out = s.range;
    s.id.store(0, std::memory_order_release);
    return true;
  }
  if (overflow_open_.load(std::memory_order_acquire) == 0) {
    return false;
  }
  std::lock_guard<std::mutex> lock(overflow_mu_);
  auto it = overflow_.find(id);
  if (it == overflow_.end()) {
    return false;
  }
  out = it->second;
  overflow_.erase(it);
  overflow_open_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

// ---- NvtxTool

NvtxTool& ProcessNvtxTool() {
  static NvtxTool* tool = new NvtxTool();  // never destroyed (see the header)
  return *tool;
}

Runtime* NvtxTool::RecordingRuntime() {
  Runtime* rt = test_runtime_;
  if (!testing_) {
    rt = ActiveRuntime();
    if (rt == nullptr) {
      rt = EnsureRuntime(-1, -1);  // NVTX before MPI_Init: as the C API does
    }
  }
  if (rt == nullptr || !rt->Records(kActivityNvtx)) {
    return nullptr;
  }
  if (counters_exported_to_.load(std::memory_order_relaxed) != rt) {
    ExportCounters(rt);
  }
  return rt;
}

void NvtxTool::ExportCounters(Runtime* rt) {
  rt->ExportCounter("nvtx_nccl_deduplicated", &nccl_deduplicated_);
  rt->ExportCounter("nvtx_unbalanced", &unbalanced_);
  rt->ExportCounter("dropped_nvtx_range_depth", &depth_overflow_);
  rt->ExportCounter("nvtx_threads_named", &threads_named_);
  counters_exported_to_.store(rt, std::memory_order_relaxed);
}

NvtxOpenRange NvtxTool::Open(Runtime* rt, const NvtxDomain* domain, uint32_t name_id) {
  NvtxOpenRange r;
  r.domain = domain;
  r.name_id = name_id;
  r.nccl = domain != nullptr && domain->nccl;
  if (rt != nullptr) {
    r.recorded = true;
    r.start_ns = rt->Now();
  }
  return r;
}

void NvtxTool::FromAttributes(Runtime* rt, const nvtx_abi::EventAttributes* a, NvtxOpenRange& r, bool range) {
  if (a == nullptr || a->size < kAttrMessageEnd) {
    return;  // not a v2 (or later) attribute struct
  }
  r.category = a->category;
  if (a->color_type == nvtx_abi::kColorArgb) {
    r.color = a->color;
  }
  ScalarPayload(a, r);
  const char* text = nullptr;
  char wide_buf[256];
  const NvtxString* registered = nullptr;
  switch (a->message_type) {
    case nvtx_abi::kMessageAscii:
      text = a->message.ascii;
      break;
    case nvtx_abi::kMessageUnicode:
      text = rt != nullptr || r.nccl ? ToUtf8(a->message.unicode, wide_buf) : nullptr;
      break;
    case nvtx_abi::kMessageRegistered:
      registered = static_cast<const NvtxString*>(a->message.registered);
      if (registered != nullptr) {
        text = registered->text.c_str();
      }
      break;
    default:
      break;
  }
  if (rt != nullptr && text != nullptr) {
    r.name_id = rt->Intern(text);
  }
  if (!r.nccl) {
    if (range) {
      MaybeBeginStep(rt, text, r.start_ns);
    }
    return;
  }
  // NCCL's ranges: the call from the (registered) name, its fields from the extended payload.
  NcclApiFunction fn = registered != nullptr ? registered->nccl : NcclFunctionFromName(text != nullptr ? text : "");
  r.nccl_op = fn.op;
  if (a->payload_type == nvtx_abi::kPayloadExt && a->reserved0 >= 1 && a->payload.u64 != 0) {
    // NVTX hands the payload's address as a 64-bit integer field of the attributes.
    const auto* data =
        reinterpret_cast<const nvtx_abi::PayloadData*>(a->payload.u64);  // NOLINT(performance-no-int-to-ptr)
    if (data->schema_id >= nvtx_abi::kPayloadSchemaIdStaticStart) {
      (void)DecodeNcclPayload(fn, data->payload, data->size, r.nccl_fields);
    }
  }
}

void NvtxTool::MaybeBeginStep(Runtime* rt, const char* name, uint64_t start_ns) {
  uint64_t step = 0;
  if (rt == nullptr || !StepFromRangeName(name, rt->config().capture.step_range,
                                          next_range_step_.load(std::memory_order_relaxed), step)) {
    return;
  }
  next_range_step_.store(step + 1, std::memory_order_relaxed);
  rt->BeginStep(step, COMMPROF_STEP_NVTX, start_ns);
}

NvtxOpenRange* NvtxTool::Reserve(Runtime* rt, const NvtxDomain* domain, int& depth) {
  NvtxThreadStack& s = Stack();
  if (s.size == NvtxThreadStack::kCapacity || s.overflow > 0) {
    ++s.overflow;  // keep pushes and pops balanced; the range itself is not recorded
    depth_overflow_.fetch_add(1, std::memory_order_relaxed);
    depth = s.size + s.overflow - 1;
    return nullptr;
  }
  // Depth within the domain: one more than the nearest open range of the same domain.
  depth = 0;
  for (int i = s.size - 1; i >= 0; --i) {
    if (s.entries[i].domain == domain) {
      depth = s.entries[i].depth + 1;
      break;
    }
  }
  // Filled in place: no copy of the range on the push path.
  NvtxOpenRange& r = s.entries[s.size++];
  r = NvtxOpenRange{};
  r.domain = domain;
  r.depth = depth;
  r.nccl = domain != nullptr && domain->nccl;
  if (rt != nullptr) {
    r.recorded = true;
    r.start_ns = rt->Now();
  }
  return &r;
}

int NvtxTool::Push(const NvtxDomain* domain, const nvtx_abi::EventAttributes* attr) {
  Runtime* rt = RecordingRuntime();
  int depth;
  if (NvtxOpenRange* r = Reserve(rt, domain, depth)) {
    FromAttributes(rt, attr, *r);
  }
  return depth;
}

int NvtxTool::PushText(const char* text) {
  Runtime* rt = RecordingRuntime();
  int depth;
  NvtxOpenRange* r = Reserve(rt, nullptr, depth);
  if (r != nullptr && rt != nullptr) {
    r->name_id = rt->Intern(text);
    MaybeBeginStep(rt, text, r->start_ns);
  }
  return depth;
}

int NvtxTool::PushWide(const wchar_t* text) {
  Runtime* rt = RecordingRuntime();
  int depth;
  NvtxOpenRange* r = Reserve(rt, nullptr, depth);
  if (r != nullptr && rt != nullptr) {
    char buf[256];
    r->name_id = rt->Intern(ToUtf8(text, buf));
    MaybeBeginStep(rt, buf, r->start_ns);
  }
  return depth;
}

int NvtxTool::PushPayload(const NvtxDomain* domain, const nvtx_abi::PayloadData* data, size_t count) {
  Runtime* rt = RecordingRuntime();
  int depth;
  NvtxOpenRange* r = Reserve(rt, domain, depth);
  if (r != nullptr && r->nccl && data != nullptr && count >= 1 && data->size >= sizeof(uint64_t) &&
      data->payload != nullptr) {
    std::memcpy(&r->nccl_fields.comm_hash, data->payload, sizeof(uint64_t));
  }
  return depth;
}

int NvtxTool::Pop(const NvtxDomain* domain, const nvtx_abi::PayloadData* pop_payload, size_t count) {
  NvtxThreadStack& s = Stack();
  if (s.overflow > 0) {
    --s.overflow;
    return s.size + s.overflow;
  }
  int i = s.size - 1;
  while (i >= 0 && s.entries[i].domain != domain) {
    --i;
  }
  if (i < 0) {
    unbalanced_.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  NvtxOpenRange& r = s.entries[i];
  const int depth = r.depth;
  if (r.recorded) {
    Runtime* rt = RecordingRuntime();
    if (rt != nullptr) {
      // NCCL's init/finalize calls hand over their payload at the pop, not at the push.
      if (r.nccl && pop_payload != nullptr && count >= 1 && pop_payload->payload != nullptr &&
          pop_payload->size >= sizeof(uint64_t) && r.nccl_fields.comm_hash == 0) {
        std::memcpy(&r.nccl_fields.comm_hash, pop_payload->payload, sizeof(uint64_t));
      }
      RecordRange(rt, r, rt->Now(), 0, false);
    }
  }
  // Ranges of different domains may close out of order: close the gap.
  for (int j = i; j + 1 < s.size; ++j) {
    s.entries[j] = s.entries[j + 1];
  }
  --s.size;
  return depth;
}

void NvtxTool::RecordRange(Runtime* rt, const NvtxOpenRange& r, uint64_t end_ns, uint8_t subtype, bool cross_thread) {
  if (r.nccl) {
    // An NCCL API call. The plugin, once attached, records the collective and point-to-point
    // calls itself: keep one copy (docs/nvtx.md, dedupe).
    if (r.nccl_op != 0 && nccl_plugin_attached()) {
      nccl_deduplicated_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    commprof_event e = BlankEvent(COMMPROF_KIND_NCCL_API, r.start_ns, end_ns);
    e.name_id = r.name_id;
    e.subtype = r.nccl_op;
    e.comm_id = r.nccl_fields.comm_hash;
    e.bytes = r.nccl_fields.bytes;
    e.peer = r.nccl_fields.peer;
    e.reduce_op = r.nccl_fields.reduce_op;
    e.flags = COMMPROF_FLAG_FROM_NVTX;
    if (cross_thread) {
      rt->RecordAs(e, r.thread_index);
    } else {
      rt->Record(e);
    }
    return;
  }
  commprof_event e = BlankEvent(COMMPROF_KIND_NVTX_RANGE, r.start_ns, end_ns);
  e.name_id = r.name_id;
  e.subtype = subtype;
  e.seq = subtype == 0 ? static_cast<uint64_t>(r.depth) : 0;
  e.comm_id = r.domain != nullptr ? rt->Intern(r.domain->name.c_str()) : COMMPROF_NO_COMM_ID;
  e.peer = static_cast<int32_t>(r.category);
  e.correlation = r.color;
  e.bytes = r.payload;
  e.datatype = r.payload_type;
  if (cross_thread) {
    rt->RecordAs(e, r.thread_index);
  } else {
    rt->Record(e);
  }
}

uint64_t NvtxTool::Start(const NvtxDomain* domain, const nvtx_abi::EventAttributes* attr) {
  Runtime* rt = RecordingRuntime();
  NvtxOpenRange r = Open(rt, domain, 0);
  FromAttributes(rt, attr, r);
  if (rt != nullptr) {
    r.thread_index = rt->Thread()->index;
  }
  return ranges_.Start(r);
}

uint64_t NvtxTool::StartText(const char* text) {
  Runtime* rt = RecordingRuntime();
  NvtxOpenRange r = Open(rt, nullptr, rt != nullptr ? rt->Intern(text) : 0);
  if (rt != nullptr) {
    r.thread_index = rt->Thread()->index;
    MaybeBeginStep(rt, text, r.start_ns);
  }
  return ranges_.Start(r);
}

uint64_t NvtxTool::StartWide(const wchar_t* text) {
  char buf[256];
  Runtime* rt = RecordingRuntime();
  NvtxOpenRange r = Open(rt, nullptr, rt != nullptr ? rt->Intern(ToUtf8(text, buf)) : 0);
  if (rt != nullptr) {
    r.thread_index = rt->Thread()->index;
    MaybeBeginStep(rt, buf, r.start_ns);
  }
  return ranges_.Start(r);
}

void NvtxTool::End(uint64_t id) {
  NvtxOpenRange r;
  if (!ranges_.End(id, r)) {
    unbalanced_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!r.recorded) {
    return;
  }
  if (Runtime* rt = RecordingRuntime()) {
    RecordRange(rt, r, rt->Now(), 1, true);
  }
}

void NvtxTool::Mark(const NvtxDomain* domain, const nvtx_abi::EventAttributes* attr) {
  Runtime* rt = RecordingRuntime();
  if (rt == nullptr) {
    return;
  }
  NvtxOpenRange r = Open(rt, domain, 0);
  FromAttributes(rt, attr, r, false);
  commprof_event e = BlankEvent(COMMPROF_KIND_NVTX_MARK, r.start_ns, r.start_ns);
  e.name_id = r.name_id;
  e.comm_id = domain != nullptr ? rt->Intern(domain->name.c_str()) : COMMPROF_NO_COMM_ID;
  e.peer = static_cast<int32_t>(r.category);
  e.correlation = r.color;
  e.bytes = r.payload;
  e.datatype = r.payload_type;
  rt->Record(e);
}

void NvtxTool::MarkText(const char* text) {
  Runtime* rt = RecordingRuntime();
  if (rt == nullptr) {
    return;
  }
  const uint64_t now = rt->Now();
  commprof_event e = BlankEvent(COMMPROF_KIND_NVTX_MARK, now, now);
  e.name_id = rt->Intern(text);
  e.peer = 0;  // no category
  rt->Record(e);
}

void NvtxTool::MarkWide(const wchar_t* text) {
  char buf[256];
  MarkText(ToUtf8(text, buf));
}

NvtxDomain* NvtxTool::CreateDomain(std::string_view name) {
  std::lock_guard<std::mutex> lock(names_mu_);
  std::string key(name);
  if (auto it = domain_by_name_.find(key); it != domain_by_name_.end()) {
    return it->second;
  }
  NvtxDomain& d = domains_.emplace_back();
  d.name = key;
  d.nccl = name == "NCCL";
  domain_by_name_.emplace(std::move(key), &d);
  return &d;
}

NvtxString* NvtxTool::RegisterString(const NvtxDomain* domain, std::string_view text) {
  // The key is the domain pointer's own bytes (domains are interned), then the text.
  std::string key(reinterpret_cast<const char*>(&domain), sizeof(domain));  // NOLINT(bugprone-sizeof-expression)
  key.append(text);
  std::lock_guard<std::mutex> lock(names_mu_);
  if (auto it = string_by_key_.find(key); it != string_by_key_.end()) {
    return it->second;
  }
  NvtxString& s = strings_.emplace_back();
  s.text = std::string(text);
  s.domain = domain;
  if (domain != nullptr && domain->nccl) {
    s.nccl = NcclFunctionFromName(text);
  }
  string_by_key_.emplace(std::move(key), &s);
  return &s;
}

void NvtxTool::NameOsThread(uint32_t os_tid, const char* name) {
  threads_named_.fetch_add(1, std::memory_order_relaxed);
  Runtime* rt = RecordingRuntime();
  if (rt == nullptr || name == nullptr) {
    return;
  }
  // Stored as a mark of subtype 1 on the calling thread: bytes = the OS thread id it names.
  const uint64_t now = rt->Now();
  commprof_event e = BlankEvent(COMMPROF_KIND_NVTX_MARK, now, now);
  e.subtype = 1;
  e.name_id = rt->Intern(name);
  e.bytes = os_tid;
  e.peer = 0;
  rt->Record(e);
}

uint64_t NvtxTool::RegisterSchema(const nvtx_abi::PayloadSchemaAttr* attr) {
  // Static schemas (NCCL's) carry their own id; hand it back. Others get one of ours.
  if (attr != nullptr && attr->schema_id >= nvtx_abi::kPayloadSchemaIdStaticStart && attr->schema_id < (1ull << 32)) {
    return attr->schema_id;
  }
  return next_dynamic_schema_.fetch_add(1, std::memory_order_relaxed);
}

uint64_t NvtxTool::RegisterEnum(const nvtx_abi::PayloadEnumAttr* attr) {
  if (attr != nullptr && attr->schema_id >= nvtx_abi::kPayloadSchemaIdStaticStart && attr->schema_id < (1ull << 32)) {
    return attr->schema_id;
  }
  return next_dynamic_schema_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace commprof
