#pragma once
// CollectiveKeyIndex: the collective identities (communicator, sequence, type) of a job, each given
// a dense number in the order first seen.
//
// The matching, the screening and the exporters look up one key per collective event: tens of
// millions in a large job. A node-based std::unordered_map allocates (and later frees) a node per
// key and rehashes through every doubling; this table is one flat array of (key, number) slots with
// linear probing, so a lookup is a multiply, a shift and usually one cache line, and the numbers
// index plain vectors the caller keeps (its values stay contiguous and in first-seen order, which
// also makes iterating them deterministic).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "analysis/match/collective_instances.h"

namespace commprof {

class CollectiveKeyIndex {
 public:
  // `expected`: keys the caller expects (a hint; the table grows past it). The table is zeroed at
  // once, 48 to 96 bytes per expected key: callers cap a hint taken from a rank's event count.
  explicit CollectiveKeyIndex(size_t expected = 0) { Rebuild(CapacityFor(expected)); }

  // The number of `key`, given the next one (size() before the call) when it is new; `.second`
  // says whether it was.
  std::pair<uint32_t, bool> FindOrInsert(const CollectiveKey& key) {
    if ((size_ + 1) * 2 > slots_.size()) {  // load factor at most 1/2: probes stay short
      Rebuild(slots_.size() * 2);
    }
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.number == kEmpty) {
        s = Slot{key.comm_id, key.seq, key.type, static_cast<uint32_t>(size_++)};
        return {s.number, true};
      }
      if (s.Holds(key)) {
        return {s.number, false};
      }
    }
  }

  std::optional<uint32_t> Find(const CollectiveKey& key) const {
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.number == kEmpty) {
        return std::nullopt;
      }
      if (s.Holds(key)) {
        return s.number;
      }
    }
  }

  size_t size() const { return size_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  // 24 bytes: the number sits where CollectiveKey would pad.
  struct Slot {
    uint64_t comm_id = 0;
    uint64_t seq = 0;
    uint32_t type = 0;
    uint32_t number = kEmpty;
    bool Holds(const CollectiveKey& k) const { return comm_id == k.comm_id && seq == k.seq && type == k.type; }
  };
  static_assert(sizeof(Slot) == 24);

  static size_t CapacityFor(size_t keys) {
    size_t c = 16;
    while (c < keys * 2) {
      c <<= 1;
    }
    return c;
  }

  // Sequence numbers are consecutive, so the low bits of the key alone would fill runs of slots:
  // the key is mixed (a 64-bit finalizer) before the table's bits are taken. But every rank reads
  // its collectives in sequence order, one lookup each: a home anywhere in the table would be a
  // cache miss per lookup (a large job's table is tens of MB; the misses were a quarter of an
  // export's time). So only the page, 16 consecutive sequence numbers of one communicator and type,
  // is mixed; the low 4 bits of the sequence pick the slot within the page's 16 slots (6 cache
  // lines), and consecutive lookups stay on the same lines. Pages are aligned, so two pages either
  // share their slots or not at all; a page that finds its slots taken probes on into the next.
  static constexpr size_t kPageBits = 4;
  static constexpr uint64_t kPageMask = (uint64_t{1} << kPageBits) - 1;
  size_t Home(const CollectiveKey& k) const { return Home(k.comm_id, k.seq, k.type); }
  size_t Home(uint64_t comm_id, uint64_t seq, uint32_t type) const {
    uint64_t h = comm_id * 0x9E3779B97F4A7C15ull + (seq >> kPageBits);
    h ^= static_cast<uint64_t>(type) * 0xD6E8FEB86659FD93ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return ((static_cast<size_t>(h) << kPageBits) | static_cast<size_t>(seq & kPageMask)) & mask_;
  }

  void Rebuild(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.number == kEmpty) {
        continue;
      }
      size_t i = Home(s.comm_id, s.seq, s.type);
      while (slots_[i].number != kEmpty) {
        i = (i + 1) & mask_;
      }
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace commprof
