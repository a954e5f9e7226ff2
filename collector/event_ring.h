// Single-producer / single-consumer ring of events: the thread that records is the only
// producer, the shipper thread the only consumer. Push is a bounds check, a 64-byte copy and one
// release store: no lock, no allocation, no system call, no atomic read-modify-write.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "commprof/event.h"

namespace commprof {

class EventRing {
 public:
  // capacity is rounded up to a power of two.
  static uint32_t RoundedCapacity(uint32_t capacity) {
    uint32_t c = 16;
    while (c < capacity && c < (1u << 31)) {
      c <<= 1;
    }
    return c;
  }

  explicit EventRing(uint32_t capacity) {
    uint32_t c = RoundedCapacity(capacity);
    capacity_ = c;
    mask_ = c - 1;
    // Not zeroed: a slot is read only after it was written, and zeroing 4 MiB (the default) cost
    // every rank a millisecond or two of page faults at MPI_Init, in series with the job's start.
    slots_.reset(Allocate(static_cast<size_t>(c) * sizeof(commprof_event)));
  }

  // Producer side. Returns false (and counts the drop) when the ring is full.
  bool Push(const commprof_event& e) {
    uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ >= capacity_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ >= capacity_) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return false;
      }
    }
    slots_[head & mask_] = e;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Producer side: whether a Push now would find a free slot (for a producer that may wait).
  bool HasRoom() {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ < capacity_) {
      return true;
    }
    tail_cache_ = tail_.load(std::memory_order_acquire);
    return head - tail_cache_ < capacity_;
  }

  // Consumer side: moves up to `max` events into `out`, oldest first.
  uint32_t Drain(commprof_event* out, uint32_t max) {
    uint64_t tail = tail_.load(std::memory_order_relaxed);
    uint64_t head = head_.load(std::memory_order_acquire);
    uint64_t n = head - tail;
    if (n > max) {
      n = max;
    }
    for (uint64_t i = 0; i < n; ++i) {
      out[i] = slots_[(tail + i) & mask_];
    }
    tail_.store(tail + n, std::memory_order_release);
    return static_cast<uint32_t>(n);
  }

  uint64_t pushed() const { return head_.load(std::memory_order_acquire); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint32_t capacity() const { return capacity_; }
  const void* slots() const { return slots_.get(); }  // where the ring's memory is (tests)

 private:
  // Producer and consumer indices on separate cache lines: no false sharing.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;  // producer's last view of tail_
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) uint32_t capacity_ = 0;
  uint32_t mask_ = 0;
  struct FreeSlots {
    void operator()(commprof_event* p) const { std::free(p); }
  };
  // A ring of 2 MiB or more is 2 MiB-aligned and offered to the kernel for transparent huge pages
  // (madvise; nothing happens where THP is off): the recording thread then takes 2 page faults for
  // a 4 MiB ring instead of 1024, and it takes them inside the job's loop, the first time it writes
  // there (bench/README.md: a small gain for a tight allreduce loop with ranks = cores). The
  // price: a thread's first event makes 2 MiB resident, not 4 KiB. Smaller rings are plain memory.
  static commprof_event* Allocate(size_t bytes) {
    constexpr size_t kHugePage = size_t{2} << 20;
    void* p = nullptr;
    if (bytes >= kHugePage) {
      const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
      p = std::aligned_alloc(kHugePage, rounded);
      if (p != nullptr) {
        (void)::madvise(p, rounded, MADV_HUGEPAGE);
      }
    }
    if (p == nullptr) {
      p = std::malloc(bytes);
    }
    if (p == nullptr) {
      throw std::bad_alloc();
    }
    return static_cast<commprof_event*>(p);
  }
  std::unique_ptr<commprof_event[], FreeSlots> slots_;
};

}  // namespace commprof
