// The NVTX tool: what our injection's handlers do with each NVTX call (docs/nvtx.md).
//
// Purpose: turn NVTX ranges and marks of every module of the process (the program, libnccl, ...)
// into NVTX_RANGE / NVTX_MARK events, and NCCL's own "NCCL"-domain ranges into NCCL API events.
// Concepts:
// - Domains and registered strings are handles the tool hands out (NvtxDomain*, NvtxString*);
//   they live as long as the process, because any module may hold them at any time. Creating or
//   registering the same name twice returns the same handle.
// - Push/pop ranges: a per-thread stack (allocated on the thread's first push, never again), so a
//   push or pop takes no lock and allocates nothing. Depth is per domain, as NVTX defines it.
// - Start/end ranges may end on another thread: NvtxRangeTable maps the id we return to what the
//   start carried, lock-free for up to kSlots open ranges; the event is attributed to the thread
//   that started the range.
// - The runtime is looked up on every call: without one, or with the `nvtx` activity off, the
//   handlers still keep depths (so Push/Pop answer correctly) but record nothing.
// - Steps: a push or start of a range named ProfilerStep#N (torch's name), or --step-range NAME
//   (auto-numbered) / NAME#N, begins step N (Runtime::BeginStep); other names cost a prefix compare.
// - Dedupe with the NCCL profiler plugin: once the plugin has attached (it records the same API
//   calls itself), NCCL ranges of collective and point-to-point calls are dropped and counted.
// Ownership: one tool per process (ProcessNvtxTool), never destroyed: NVTX calls may arrive from
// static destructors and threads that outlive main.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "collector/nvtx_abi.h"
#include "collector/nvtx_nccl.h"
#include "commprof/event.h"

namespace commprof {

class Runtime;

struct NvtxDomain {
  std::string name;
  bool nccl = false;  // the "NCCL" domain: its ranges are NCCL API calls
};

struct NvtxString {
  std::string text;
  const NvtxDomain* domain = nullptr;
  NcclApiFunction nccl;  // the call it names, for strings of the NCCL domain
};

// What a range carries from its push (or start) to its pop (or end).
struct NvtxOpenRange {
  uint64_t start_ns = 0;
  const NvtxDomain* domain = nullptr;  // null: the default domain
  uint64_t payload = 0;                // the scalar payload's bits
  NcclCallFields nccl_fields;
  uint32_t name_id = 0;
  uint32_t thread_index = 0;  // start/end ranges: the thread that started it
  uint32_t category = 0;
  uint32_t color = 0;  // ARGB, 0 = none
  int32_t depth = 0;
  uint8_t payload_type = COMMPROF_DT_NONE;  // how to read `payload` (enum commprof_datatype)
  uint8_t nccl_op = 0;
  bool recorded = false;  // a runtime recording NVTX saw the push
  bool nccl = false;      // a range of the NCCL domain
};

// Start/end ranges by id. Lock-free while at most kSlots ranges are open at once (the slot is
// id % kSlots); a range whose slot is still taken goes to a mutex-guarded overflow map, so nothing
// is lost, only slower.
class NvtxRangeTable {
 public:
  static constexpr uint64_t kSlots = 4096;
  uint64_t Start(const NvtxOpenRange& r);     // the new range's id, never 0
  bool End(uint64_t id, NvtxOpenRange& out);  // false: unknown id (counted by the caller)
  uint64_t overflowed() const { return overflowed_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint64_t kBusy = ~0ull;
  struct Slot {
    std::atomic<uint64_t> id{0};  // 0 free, kBusy being written, else the open range's id
    NvtxOpenRange range;
  };
  std::atomic<uint64_t> next_id_{1};
  std::unique_ptr<Slot[]> slots_ = std::make_unique<Slot[]>(kSlots);
  std::mutex overflow_mu_;
  std::unordered_map<uint64_t, NvtxOpenRange> overflow_;  // guarded by overflow_mu_
  std::atomic<uint64_t> overflow_open_{0};
  std::atomic<uint64_t> overflowed_{0};
};

class NvtxTool {
 public:
  NvtxTool() = default;
  NvtxTool(const NvtxTool&) = delete;
  NvtxTool& operator=(const NvtxTool&) = delete;

  // Range push/pop: the 0-based depth of the range pushed / popped in its domain, or -1 for a
  // pop with nothing open. `pop_payload`: the payload nvtxRangePopPayload carries (or null).
  int Push(const NvtxDomain* domain, const nvtx_abi::EventAttributes* attr);
  int PushText(const char* text);
  int PushWide(const wchar_t* text);
  int PushPayload(const NvtxDomain* domain, const nvtx_abi::PayloadData* data, size_t count);
  int Pop(const NvtxDomain* domain, const nvtx_abi::PayloadData* pop_payload = nullptr, size_t count = 0);

  uint64_t Start(const NvtxDomain* domain, const nvtx_abi::EventAttributes* attr);
  uint64_t StartText(const char* text);
  uint64_t StartWide(const wchar_t* text);
  void End(uint64_t id);

  void Mark(const NvtxDomain* domain, const nvtx_abi::EventAttributes* attr);
  void MarkText(const char* text);
  void MarkWide(const wchar_t* text);

  NvtxDomain* CreateDomain(std::string_view name);
  NvtxString* RegisterString(const NvtxDomain* domain, std::string_view text);
  void NameOsThread(uint32_t os_tid, const char* name);
  uint64_t RegisterSchema(const nvtx_abi::PayloadSchemaAttr* attr);
  uint64_t RegisterEnum(const nvtx_abi::PayloadEnumAttr* attr);

  // The NCCL profiler plugin attached in this process (commprof_internal_attach(kActivityNccl)).
  void NoteNcclPluginAttached() { nccl_plugin_attached_.store(true, std::memory_order_relaxed); }
  bool nccl_plugin_attached() const { return nccl_plugin_attached_.load(std::memory_order_relaxed); }

  // Tests: record into `rt` instead of the process runtime (null: record nothing).
  void UseRuntimeForTesting(Runtime* rt) {
    test_runtime_ = rt;
    testing_ = true;
    counters_exported_to_.store(nullptr);  // a new runtime may sit at the last one's address
  }

 private:
  Runtime* RecordingRuntime();
  void ExportCounters(Runtime* rt);
  // Fills name, category, color and payload of `r` from `attr` (messages interned in `rt`); for a
  // `range` (not a mark), a name that begins a step begins it (MaybeBeginStep).
  void FromAttributes(Runtime* rt, const nvtx_abi::EventAttributes* attr, NvtxOpenRange& r, bool range = true);
  // A range named ProfilerStep#N, or --step-range NAME / NAME#N, begins a step at its start.
  void MaybeBeginStep(Runtime* rt, const char* name, uint64_t start_ns);
  // The new range's stack slot, filled with its domain, depth and start, or null beyond the
  // stack's capacity (counted). `depth` is what the push returns.
  NvtxOpenRange* Reserve(Runtime* rt, const NvtxDomain* domain, int& depth);
  void RecordRange(Runtime* rt, const NvtxOpenRange& r, uint64_t end_ns, uint8_t subtype, bool cross_thread);
  NvtxOpenRange Open(Runtime* rt, const NvtxDomain* domain, uint32_t name_id);

  std::atomic<bool> nccl_plugin_attached_{false};
  Runtime* test_runtime_ = nullptr;
  bool testing_ = false;
  std::atomic<Runtime*> counters_exported_to_{nullptr};

  NvtxRangeTable ranges_;

  std::mutex names_mu_;  // domain and string registration (rare: once per name)
  std::deque<NvtxDomain> domains_;
  std::deque<NvtxString> strings_;
  std::unordered_map<std::string, NvtxDomain*> domain_by_name_;
  std::unordered_map<std::string, NvtxString*> string_by_key_;  // domain pointer bytes + text
  std::atomic<uint64_t> next_dynamic_schema_{1ull << 32};       // NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START
  std::atomic<uint64_t> next_range_step_{0};                    // the step a range named NAME begins

  // Counted on the hot path, reported in the bye (Runtime::ExportCounter).
  std::atomic<uint64_t> nccl_deduplicated_{0};  // NCCL ranges dropped: the plugin recorded the call
  std::atomic<uint64_t> unbalanced_{0};         // pops with nothing open, ends of unknown ids
  std::atomic<uint64_t> depth_overflow_{0};     // pushes beyond the per-thread stack
  std::atomic<uint64_t> threads_named_{0};
};

NvtxTool& ProcessNvtxTool();

}  // namespace commprof
