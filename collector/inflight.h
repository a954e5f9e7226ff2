// What a rank is blocked in right now, readable by the shipper thread while the application thread
// sits inside MPI (docs/hangs.md): the hang watchdog's query is answered from here.
//
// Purpose: every blocking MPI wrapper publishes the event it is about to record (as BeginEvent
// built it) and its call-site stack before the PMPI call, and clears it after, storing its exit time
// as the thread's last completion. The shipper copies the slots of all threads when the aggregator
// asks (a hang-query) and when a signal ends the process (the in-flight calls become INCOMPLETE
// events).
// Concepts: a seqlock. The writer (the owning thread only) makes the generation odd, stores the
// fields, makes it even again; a reader copies the fields between two reads of the generation and
// keeps the copy only when both reads are the same even value. The fields are relaxed atomics, so
// a copy taken while the writer works is merely discarded, never undefined behaviour (TSan clean).
// The writer never waits for a reader; a reader that keeps losing the race (the thread is making
// calls back to back, so it is not blocked) gives up after a few tries.
// Cost: publish and clear are a dozen relaxed stores and two release stores each, no lock, no
// allocation, no system call (bench/README.md "In-flight record").
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "commprof/event.h"

namespace commprof {

// One commprof_event behind a seqlock, with a small tag (the call-site stack id) and an
// "occupied" bit. Single writer; any number of readers.
class EventSeqlock {
 public:
  static constexpr int kWords = sizeof(commprof_event) / sizeof(uint64_t);
  static_assert(sizeof(commprof_event) % sizeof(uint64_t) == 0, "commprof_event is a whole number of words");

  // Writer only.
  void Store(const commprof_event& e, uint32_t tag) {
    uint64_t w[kWords];
    std::memcpy(w, &e, sizeof w);
    const uint32_t g = gen_.load(std::memory_order_relaxed);
    gen_.store(g + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // the odd generation is seen before any field
    for (int i = 0; i < kWords; ++i) {
      words_[i].store(w[i], std::memory_order_relaxed);
    }
    tag_.store(tag, std::memory_order_relaxed);
    occupied_.store(true, std::memory_order_relaxed);
    gen_.store(g + 2, std::memory_order_release);
  }
  // Writer only.
  void Clear() {
    const uint32_t g = gen_.load(std::memory_order_relaxed);
    gen_.store(g + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    occupied_.store(false, std::memory_order_relaxed);
    gen_.store(g + 2, std::memory_order_release);
  }

  // A writer's own read (or one holding the writer's exclusivity another way): no retry needed.
  commprof_event Load() const {
    uint64_t w[kWords];
    for (int i = 0; i < kWords; ++i) {
      w[i] = words_[i].load(std::memory_order_relaxed);
    }
    commprof_event e;
    std::memcpy(&e, w, sizeof w);
    return e;
  }

  enum class ReadResult { kEmpty, kCopied, kBusy };
  // A consistent copy, or kBusy when the writer kept changing it for `tries` attempts.
  ReadResult Read(commprof_event& out, uint32_t& tag, int tries = 64) const {
    for (int t = 0; t < tries; ++t) {
      const uint32_t g1 = gen_.load(std::memory_order_acquire);
      if ((g1 & 1u) != 0) {
        continue;
      }
      const bool occupied = occupied_.load(std::memory_order_relaxed);
      uint64_t w[kWords];
      for (int i = 0; i < kWords; ++i) {
        w[i] = words_[i].load(std::memory_order_relaxed);
      }
      const uint32_t tg = tag_.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);  // the fields are read before the check below
      if (gen_.load(std::memory_order_relaxed) != g1) {
        continue;
      }
      if (!occupied) {
        return ReadResult::kEmpty;
      }
      std::memcpy(&out, w, sizeof w);
      tag = tg;
      return ReadResult::kCopied;
    }
    return ReadResult::kBusy;
  }

 private:
  std::atomic<uint32_t> gen_{0};  // odd while the writer is changing the fields
  std::atomic<bool> occupied_{false};
  std::atomic<uint32_t> tag_{0};
  std::atomic<uint64_t> words_[kWords] = {};
};

// A thread's blocking call in flight, and the end of its last one.
class InflightSlot {
 public:
  // Before the PMPI call. False (and nothing published) when a call of this thread is already
  // published: a wrapper reached from inside another (a Fortran binding, MPI calling itself back)
  // leaves the outer call, the one the application is blocked in, in place.
  bool Publish(const commprof_event& e, uint32_t stack) {
    if (busy_) {
      return false;
    }
    busy_ = true;
    slot_.Store(e, stack);
    return true;
  }
  // After the PMPI call returned at `end_ns` (only when Publish returned true). `progressed`: the
  // call completed communication (an MPI_Test* that found nothing did not: a rank polling in a
  // loop is as stuck as one blocked in a wait).
  void Clear(uint64_t end_ns, bool progressed = true) {
    slot_.Clear();
    if (progressed) {
      last_completion_ns_.store(end_ns, std::memory_order_relaxed);
    }
    busy_ = false;
  }
  // From any thread.
  EventSeqlock::ReadResult Read(commprof_event& out, uint32_t& stack) const { return slot_.Read(out, stack); }
  uint64_t last_completion_ns() const { return last_completion_ns_.load(std::memory_order_relaxed); }

 private:
  EventSeqlock slot_;
  std::atomic<uint64_t> last_completion_ns_{0};
  bool busy_ = false;  // owning thread only
};

}  // namespace commprof
