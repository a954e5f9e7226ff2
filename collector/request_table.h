// In-flight non-blocking operations (Iallreduce, Isend, ...), keyed by their MPI_Request handle
// value, so the completing Wait/Test can emit one event spanning issue to completion.
//
// A fixed open-addressed table allocated once: inserting and removing are a few compare-and-swaps,
// no lock and no allocation. Each key probes a window of kProbe slots; a full window means the
// request is not tracked, and that is counted (never silent).
//
// The shipper may look at what is parked (a hang-query, a signal's last flush) while application
// threads insert and take: each slot's event sits behind a seqlock (collector/inflight.h), so the
// look never changes a slot's key and a Take can never fail because of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "collector/inflight.h"
#include "commprof/event.h"

namespace commprof {

class RequestTable {
 public:
  // The slots (about 90 bytes each, 65536 by default) come zeroed from calloc, which takes a block
  // this large straight from mmap: the kernel's zero pages, faulted in only where a request lands.
  // Zeroing them here (new Slot[n]()) cost every rank a few milliseconds of page faults at MPI_Init,
  // in series with the job's start. All-zero bytes are the empty table: every key kEmpty (0) and
  // every seqlock word 0, as for lock-free atomics in shared memory (asserted below).
  explicit RequestTable(uint32_t slots) {
    uint32_t c = 64;
    while (c < slots) {
      c <<= 1;
    }
    mask_ = c - 1;
    slots_ = static_cast<Slot*>(std::calloc(c, sizeof(Slot)));
    if (slots_ == nullptr) {
      mask_ = 0;  // no memory: every request overflows (counted), none is tracked
    }
  }
  ~RequestTable() { std::free(slots_); }
  RequestTable(const RequestTable&) = delete;
  RequestTable& operator=(const RequestTable&) = delete;

  // `stack`: the issuing call's call-site stack id (--stacks), kept for the in-flight view.
  bool Insert(uintptr_t key, const commprof_event& e, uint32_t stack = 0) {
    if (key <= kBusy) {
      return false;
    }
    for (uint32_t i = 0; slots_ != nullptr && i < kProbe; ++i) {
      Slot& s = slots_[(Hash(key) + i) & mask_];
      uintptr_t expect = kEmpty;
      if (s.key.compare_exchange_strong(expect, kBusy, std::memory_order_acquire)) {
        s.event.Store(e, stack);
        s.key.store(key, std::memory_order_release);
        return true;
      }
    }
    overflow_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  // Removes the entry for `key`; false when it was never tracked (not ours, or it overflowed).
  bool Take(uintptr_t key, commprof_event& out) {
    if (key <= kBusy || slots_ == nullptr) {
      return false;
    }
    for (uint32_t i = 0; i < kProbe; ++i) {
      Slot& s = slots_[(Hash(key) + i) & mask_];
      uintptr_t expect = key;
      if (s.key.compare_exchange_strong(expect, kBusy, std::memory_order_acquire)) {
        out = s.event.Load();
        s.event.Clear();
        s.key.store(kEmpty, std::memory_order_release);
        return true;
      }
    }
    return false;
  }

  // Calls fn(event, stack) for every operation parked now, without taking it. Read-only: an entry
  // inserted or taken meanwhile may be missed or seen once more, never torn.
  template <typename Fn>
  void ForEachPending(Fn&& fn) const {
    for (uint32_t i = 0; slots_ != nullptr && i <= mask_; ++i) {
      const Slot& s = slots_[i];
      if (s.key.load(std::memory_order_acquire) <= kBusy) {
        continue;
      }
      commprof_event e;
      uint32_t stack = 0;
      if (s.event.Read(e, stack) == EventSeqlock::ReadResult::kCopied) {
        fn(e, stack);
      }
    }
  }

  uint64_t overflow() const { return overflow_.load(std::memory_order_relaxed); }

  // Removes every entry still parked (at shutdown: operations never seen to complete).
  template <typename Fn>
  void TakeAll(Fn&& fn) {
    for (uint32_t i = 0; slots_ != nullptr && i <= mask_; ++i) {
      Slot& s = slots_[i];
      uintptr_t key = s.key.load(std::memory_order_acquire);
      if (key <= kBusy) {
        continue;
      }
      if (s.key.compare_exchange_strong(key, kBusy, std::memory_order_acquire)) {
        commprof_event e = s.event.Load();
        s.event.Clear();
        s.key.store(kEmpty, std::memory_order_release);
        fn(e);
      }
    }
  }

 private:
  static constexpr uint32_t kProbe = 16;
  static constexpr uintptr_t kEmpty = 0;
  static constexpr uintptr_t kBusy = 1;

  struct Slot {
    std::atomic<uintptr_t> key{kEmpty};
    EventSeqlock event;
  };

  static uint64_t Hash(uintptr_t k) { return (static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull) >> 20; }

  static_assert(std::atomic<uintptr_t>::is_always_lock_free && std::is_trivially_destructible_v<Slot>,
                "the table is zeroed memory from calloc, freed with free");

  uint32_t mask_ = 0;
  Slot* slots_ = nullptr;
  std::atomic<uint64_t> overflow_{0};
};

}  // namespace commprof
