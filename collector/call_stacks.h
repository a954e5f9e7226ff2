// Call sites (`commprof run --stacks[=DEPTH]`, docs/cli.md): the calling stack of an API call,
// captured in the PMPI wrapper (or the NCCL plugin's API start), interned per process.
//
// Purpose: name the user's source line that issued each MPI/NCCL call, like torch.profiler's
// with_stack, at a cost a hot loop can pay.
// Operation: Capture() unwinds with libgcc's _Unwind_Backtrace (eh_frame: correct without frame
// pointers), about 2 us for 18 frames, so repeated stacks are answered from a per-thread cache:
// a small direct-mapped table keyed by (return address into the capturing caller, its frame
// address). An entry keeps, for every frame it unwound, the address of the slot holding that
// frame's pc as its callee's return address (the callee's CFA - 8 on x86-64, from
// _Unwind_GetCFA) and the value found there. A hit re-reads those
// slots: when each still holds the cached return address, every frame is the same function at the
// same pc with the same frame size, so the stack is the cached one (sound for frames whose size is
// fixed at a given pc; a caller whose frame size varies with alloca or a VLA may, in a rare
// coincidence of equal slots, be given a stale stack of the same call chain). A miss unwinds.
// Frames: the leading frames inside commprof, the MPI library (libmpi, open-pal, open-rte) and NCCL
// (libnccl, its profiler plugin) are dropped, so depth 0 is the user's call site; at most `depth`
// frames are kept from there.
// Interning: a stack id per unique frame list (from 1), in a lock-free open-addressed table:
// a repeat is found without a lock; the first use of a stack takes a mutex and allocates. Beyond
// max_stacks unique stacks Capture returns 0 and counts the drop.
// At process end ForEachStack gives every stack for the kind 32 STACK_FRAME events
// (docs/file-format.md).
#pragma once

#include <unwind.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace commprof {

struct StackOptions {
  uint32_t depth = 16;  // frames kept from the call site (1..kMaxStackDepth)
  // Modules whose file name starts with one of these lead the stack and are dropped.
  std::vector<std::string> skip_prefixes;
  bool skip_self = true;           // also drop frames in the module holding this code (libcommprof.so)
  uint32_t max_stacks = 1u << 16;  // unique stacks kept; more are counted as dropped
};

// What `commprof run` drops: commprof, the MPI library and NCCL.
StackOptions CollectorStackOptions(uint32_t depth);

// One loaded module's executable ranges, from dl_iterate_phdr.
struct ModuleRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool skip = false;
};

// An immutable snapshot of the process's modules; a pc in none of them makes a new snapshot.
class ModuleMap {
 public:
  static std::unique_ptr<ModuleMap> Load(const StackOptions& options);
  // The range holding `pc`, or null.
  const ModuleRange* Find(uintptr_t pc) const;

 private:
  std::vector<ModuleRange> ranges_;  // sorted by begin
};

// A thread's cache of recent stacks (Capture's argument); made on the thread's first capture.
class StackCache {
 public:
  static constexpr uint32_t kEntries = 32;
  static constexpr uint32_t kMaxRaw = 96;  // frames unwound at most: skipped ones plus the kept

  struct Entry {
    uintptr_t ra = 0;  // key: return address into the capturing caller
    uintptr_t fp = 0;  // key: Capture's frame address
    uint32_t id = 0;
    uint32_t checks = 0;
    uintptr_t slot[kMaxRaw] = {};   // where frame i's return address lives
    uintptr_t value[kMaxRaw] = {};  // and what it was
  };

 private:
  friend class CallStacks;
  Entry entries_[kEntries];
};

class CallStacks {
 public:
  explicit CallStacks(StackOptions options);
  ~CallStacks();
  CallStacks(const CallStacks&) = delete;
  CallStacks& operator=(const CallStacks&) = delete;

  // The stack id of the calling thread's stack as seen from the caller of Capture (its frame is
  // the innermost one considered), 0 when nothing outside the skipped modules is on the stack or
  // the table is full. Not inlined: its own frame is the cache key.
  __attribute__((noinline)) uint32_t Capture(StackCache& cache);

  // Every unique stack, by id: its return addresses, the call site first.
  template <typename Fn>
  void ForEachStack(Fn&& fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Record* r : records_) {
      fn(r->id, std::span<const uintptr_t>(r->pcs, r->depth));
    }
  }
  uint32_t unique() const { return next_id_.load(std::memory_order_relaxed) - 1; }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  const StackOptions& options() const { return options_; }

 private:
  struct Record {
    uint64_t hash = 0;
    uint32_t id = 0;
    uint32_t depth = 0;
    uintptr_t pcs[64];  // the first `depth` (kMaxStackDepth at most)
  };
  // Not inlined: the frames it reports start with its own, then Capture's, then the caller's.
  __attribute__((noinline)) uint32_t Unwind(StackCache::Entry& entry, uintptr_t ra, uintptr_t fp);
  struct UnwindState;
  static _Unwind_Reason_Code CollectFrame(struct _Unwind_Context* ctx, void* arg);
  uint32_t Intern(const uintptr_t* pcs, uint32_t depth);
  const ModuleRange* FindModule(uintptr_t pc);

  const StackOptions options_;
  std::atomic<const ModuleMap*> modules_{nullptr};
  std::unique_ptr<std::atomic<const Record*>[]> table_;
  uint32_t mask_ = 0;
  mutable std::mutex mu_;  // first use of a stack, module refresh, ForEachStack
  std::vector<const Record*> records_;
  std::vector<std::unique_ptr<const ModuleMap>> module_maps_;  // every snapshot, kept for lock-free readers
  std::atomic<uint32_t> next_id_{1};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> misses_{0};
};

// Where a return address lies, for the STACK_FRAME events: the module's path (the main program's
// from /proc/self/exe), the address relative to the module's load bias of the call instruction
// (return address - 1, what `addr2line -e MODULE` takes) and the nearest dynamic symbol (empty when
// none).
struct FrameOrigin {
  std::string module;
  uint64_t offset = 0;
  std::string symbol;
};
FrameOrigin ResolveFrame(uintptr_t return_address);

// One line for a stack of return addresses (call site first), for a hang-state's call sites:
// "symbol (module+0xOFF) <- caller (module+0xOFF) <- ...", `?` for a frame without a symbol, the
// module by its file name, the offset as in ResolveFrame; cut at `max_len` bytes.
std::string CallSiteText(std::span<const uintptr_t> pcs, size_t max_len);

}  // namespace commprof
