#pragma once
// FlatNumbering: gives each distinct key a dense number (0, 1, 2, ...) in the order first seen.
//
// The analysis looks up a key per event or per message: tens of millions in a large job. A
// node-based std::unordered_map allocates (and later frees) a node per key and rehashes through
// every doubling; this table is one flat array of (key, number) slots with linear probing, so a
// lookup is a multiply, a shift and usually one cache line, and the numbers index plain vectors the
// caller keeps (its values stay contiguous and in first-seen order, which also makes iterating them
// deterministic, whatever the hash).
//
// `Traits` says how a key sits in a slot and where its probe starts:
//   using Key = ...; struct Slot { ...; uint32_t number; };   // number == kEmpty: a free slot
//   static Slot Make(const Key&, uint32_t number);
//   static bool Holds(const Slot&, const Key&);
//   static size_t Home(const Key&);        // the table keeps the low bits
//   static size_t HomeOf(const Slot&);     // Home of the key a slot holds (for growing)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace commprof {

inline constexpr uint32_t kFlatNumberingEmpty = UINT32_MAX;

template <typename Traits>
class FlatNumbering {
 public:
  using Key = typename Traits::Key;
  using Slot = typename Traits::Slot;

  // `expected`: keys the caller expects (a hint; the table grows past it). The table is zeroed at
  // once, two slots per expected key: callers cap a hint taken from an event count.
  explicit FlatNumbering(size_t expected = 0) { Rebuild(CapacityFor(expected)); }

  // The number of `key`, given the next one (size() before the call) when it is new; `.second`
  // says whether it was.
  std::pair<uint32_t, bool> FindOrInsert(const Key& key) {
    if ((size_ + 1) * 2 > slots_.size()) {  // load factor at most 1/2: probes stay short
      Rebuild(slots_.size() * 2);
    }
    for (size_t i = Traits::Home(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.number == kFlatNumberingEmpty) {
        s = Traits::Make(key, static_cast<uint32_t>(size_++));
        return {s.number, true};
      }
      if (Traits::Holds(s, key)) {
        return {s.number, false};
      }
    }
  }

  std::optional<uint32_t> Find(const Key& key) const {
    for (size_t i = Traits::Home(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.number == kFlatNumberingEmpty) {
        return std::nullopt;
      }
      if (Traits::Holds(s, key)) {
        return s.number;
      }
    }
  }

  size_t size() const { return size_; }

 private:
  static size_t CapacityFor(size_t keys) {
    size_t c = 16;
    while (c < keys * 2) {
      c <<= 1;
    }
    return c;
  }

  void Rebuild(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.number == kFlatNumberingEmpty) {
        continue;
      }
      size_t i = Traits::HomeOf(s) & mask_;
      while (slots_[i].number != kFlatNumberingEmpty) {
        i = (i + 1) & mask_;
      }
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// The 64-bit finalizer of SplitMix64: spreads every input bit over the whole word, so that keys
// that differ only in their low bits (consecutive ranks, times) land far apart.
inline uint64_t SpreadBits(uint64_t h) {
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return h;
}

// Traits for plain 64-bit keys (a caller packs two 32-bit numbers into one).
struct U64KeyTraits {
  using Key = uint64_t;
  struct Slot {
    uint64_t key = 0;
    uint32_t number = kFlatNumberingEmpty;
  };
  static Slot Make(uint64_t key, uint32_t number) { return Slot{key, number}; }
  static bool Holds(const Slot& s, uint64_t key) { return s.key == key; }
  static size_t Home(uint64_t key) { return static_cast<size_t>(SpreadBits(key * 0x9E3779B97F4A7C15ull)); }
  static size_t HomeOf(const Slot& s) { return Home(s.key); }
};

// Sums of doubles per 64-bit key, in the order the keys were first seen. The key added to last is
// checked first: sums are mostly added to the same key several times in a row (one root cause of
// many waits).
class FlatSums {
 public:
  double& operator[](uint64_t key) {
    if (last_ < entries_.size() && entries_[last_].first == key) {
      return entries_[last_].second;
    }
    const auto [number, fresh] = index_.FindOrInsert(key);
    if (fresh) {
      entries_.emplace_back(key, 0.0);
    }
    last_ = number;
    return entries_[number].second;
  }
  const std::vector<std::pair<uint64_t, double>>& entries() const { return entries_; }

 private:
  FlatNumbering<U64KeyTraits> index_;
  std::vector<std::pair<uint64_t, double>> entries_;
  size_t last_ = SIZE_MAX;
};

}  // namespace commprof
