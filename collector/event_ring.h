// Single-producer / single-consumer ring of events: the thread that records is the only
// producer, the shipper thread the only consumer. Push is a bounds check, a 64-byte copy and one
// release store: no lock, no allocation, no system call, no atomic read-modify-write.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

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
    // Untouched pages cost nothing; a thread that records little never faults most of them in.
    slots_ = std::make_unique_for_overwrite<commprof_event[]>(c);
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

 private:
  // Producer and consumer indices on separate cache lines: no false sharing.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;  // producer's last view of tail_
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) uint32_t capacity_ = 0;
  uint32_t mask_ = 0;
  std::unique_ptr<commprof_event[]> slots_;
};

}  // namespace commprof
