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

#include "collector/inflight.h"
#include "commprof/event.h"

namespace commprof {

class RequestTable {
 public:
  // The slots (about 90 bytes each, 65536 by default) are allocated at the first Insert: a program
  // that never starts a non-blocking operation does not pay for zeroing them at MPI_Init (a few
  // milliseconds of page faults per rank, in series with the job's start).
  explicit RequestTable(uint32_t slots) {
    uint32_t c = 64;
    while (c < slots) {
      c <<= 1;
    }
    mask_ = c - 1;
  }
  ~RequestTable() { delete[] slots_.load(std::memory_order_acquire); }
  RequestTable(const RequestTable&) = delete;
  RequestTable& operator=(const RequestTable&) = delete;

  // `stack`: the issuing call's call-site stack id (--stacks), kept for the in-flight view.
  bool Insert(uintptr_t key, const commprof_event& e, uint32_t stack = 0) {
    if (key <= kBusy) {
      return false;
    }
    Slot* slots = Allocated();
    for (uint32_t i = 0; i < kProbe; ++i) {
      Slot& s = slots[(Hash(key) + i) & mask_];
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
    Slot* slots = slots_.load(std::memory_order_acquire);
    if (key <= kBusy || slots == nullptr) {
      return false;
    }
    for (uint32_t i = 0; i < kProbe; ++i) {
      Slot& s = slots[(Hash(key) + i) & mask_];
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
    const Slot* slots = slots_.load(std::memory_order_acquire);
    for (uint32_t i = 0; slots != nullptr && i <= mask_; ++i) {
      const Slot& s = slots[i];
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
    Slot* slots = slots_.load(std::memory_order_acquire);
    for (uint32_t i = 0; slots != nullptr && i <= mask_; ++i) {
      Slot& s = slots[i];
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

  // The slots, made by the first Insert; threads racing to make them keep the first one made.
  Slot* Allocated() {
    Slot* slots = slots_.load(std::memory_order_acquire);
    if (slots != nullptr) {
      return slots;
    }
    Slot* made = new Slot[static_cast<size_t>(mask_) + 1]();
    if (slots_.compare_exchange_strong(slots, made, std::memory_order_acq_rel)) {
      return made;
    }
    delete[] made;
    return slots;  // the winner's
  }

  uint32_t mask_ = 0;
  std::atomic<Slot*> slots_{nullptr};
  std::atomic<uint64_t> overflow_{0};
};

}  // namespace commprof
