// CUPTI activity records -> commprof events (docs/file-format.md "Meaning per kind", docs/cupti.md).
//
// Purpose: the one place that knows how a CUPTI 13.0 record maps onto our 64-byte event. It
// depends only on the CUPTI *header* struct types, never on a live libcupti, so tests feed it
// synthetic buffers of the real structs, walked by the same WalkActivityBuffer as live buffers.
// Concepts: a record's `kind` header selects the struct; each translation fills every field we
// keep and leaves the rest zero. Strings (kernel and API names) and CUPTI thread ids go through a
// TranslationContext, called only on a cache miss, so translating a buffer costs no lock, no
// allocation and no system call per record once the names of a run have been seen.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

#include "commprof/event.h"

namespace commprof {

// What the translator asks of its surroundings (the Runtime in live use).
class TranslationContext {
 public:
  virtual ~TranslationContext() = default;
  virtual uint32_t Intern(const char* text) = 0;
  // Our thread index for a CUPTI host thread id (docs/cupti.md "Host threads").
  virtual uint32_t HostThread(uint32_t cupti_thread_id) = 0;
  // The API function name of `cbid` in the domain of `api_kind` (RUNTIME, DRIVER), or null.
  virtual const char* ApiName(CUpti_ActivityKind api_kind, uint32_t cbid) = 0;
};

// thread_id of a host event whose thread CUPTI does not name (synchronization records): the
// foreign-thread bit with id 0, never a thread index of ours (Runtime::kForeignThread).
constexpr uint32_t kUnknownHostThread = 0x80000000u;

// Whether a kernel name (mangled or not) is one of NCCL's (`ncclKernel_*`, `ncclDevKernel_*`).
bool IsNcclKernelName(const char* name);

// Kernel launch geometry packing (docs/file-format.md, kinds 10/11).
inline uint64_t PackGrid(uint32_t x, uint32_t y, uint32_t z) {
  return static_cast<uint64_t>(x) | (static_cast<uint64_t>(y & 0xFFFFu) << 32) |
         (static_cast<uint64_t>(z & 0xFFFFu) << 48);
}
inline int32_t PackBlock(uint32_t x, uint32_t y, uint32_t z) {
  return static_cast<int32_t>((x & 0x7FFu) | ((y & 0x7FFu) << 11) | ((z & 0x7Fu) << 22));
}

class CuptiTranslator {
 public:
  explicit CuptiTranslator(TranslationContext& context) : context_(context) {}

  // Fills `out` from one record; false when the record is of a kind we do not store.
  bool Translate(const CUpti_Activity* record, commprof_event& out);

 private:
  // Interned id of a string whose pointer stays valid and unchanged (CUPTI-owned names, literals).
  uint32_t CachedName(const char* name);
  uint32_t ApiNameId(CUpti_ActivityKind kind, uint32_t cbid);
  uint32_t Thread(uint32_t cupti_thread_id);

  TranslationContext& context_;
  // Direct-mapped caches. CUPTI hands the same name pointer for every launch of a kernel (it owns
  // the string), so the pointer is the key; a collision only costs one more Intern.
  struct NameSlot {
    const char* key = nullptr;
    uint32_t id = 0;
  };
  NameSlot names_[512];
  static constexpr uint32_t kApiSlots = 1024;  // cbids of 13.0 stay below 1024 in both domains
  uint32_t runtime_names_[kApiSlots] = {};     // 0 = not looked up yet (id 0 is never a name)
  uint32_t driver_names_[kApiSlots] = {};
  struct ThreadSlot {
    uint32_t cupti_id = 0;
    uint32_t index = 0;
    bool used = false;
  };
  ThreadSlot threads_[64];
};

// Counts of one walked buffer.
struct BufferStats {
  uint64_t records = 0;     // records in the buffer
  uint64_t translated = 0;  // turned into events
  uint64_t ignored = 0;     // of kinds we do not store
};

using NextRecordFn = CUptiResult (*)(uint8_t*, size_t, CUpti_Activity**);

// Walks a completed buffer with CUPTI's own iterator (live and in tests: the real libcupti's
// cuptiActivityGetNextRecord works without a GPU) and hands each event to `sink`.
template <typename Sink>
BufferStats WalkActivityBuffer(NextRecordFn next, uint8_t* buffer, size_t valid_bytes, CuptiTranslator& translator,
                               Sink&& sink) {
  BufferStats stats;
  CUpti_Activity* record = nullptr;
  // Stops at CUPTI_ERROR_MAX_LIMIT_REACHED (end of buffer) or INVALID_KIND (corrupt record).
  while (next(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    ++stats.records;
    commprof_event e;
    if (translator.Translate(record, e)) {
      ++stats.translated;
      sink(e);
    } else {
      ++stats.ignored;
    }
  }
  return stats;
}

}  // namespace commprof
