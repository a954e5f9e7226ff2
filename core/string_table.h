// String interning for event names (events carry a name id, not text).
//
// Writers on many threads intern the same few names over and over, so the hot path is a
// thread-local direct-mapped cache keyed by the text's hash; only a miss takes the table's mutex
// (once per thread per distinct name). Ids are dense from 0 in first-seen order, which is also the
// order in which the shipper sends them, so a reader rebuilds the table by appending.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace commprof {

class StringTable {
 public:
  // Beyond this many distinct strings, Intern returns kOverflowId and counts the overflow: a
  // program that puts unbounded text (e.g. a counter) into names cannot exhaust memory.
  static constexpr uint32_t kMaxStrings = 1u << 20;
  static constexpr uint32_t kNoNameId = 0;    // id 0 is always "" (an event without a name)
  static constexpr uint32_t kOverflowId = 1;  // id 1 is always "<overflow>"

  StringTable();

  uint32_t Intern(std::string_view text);  // thread-safe
  // Copies of the strings with id >= first_id (for the shipper); thread-safe.
  std::vector<std::string_view> Since(uint32_t first_id) const;
  std::string_view View(uint32_t id) const;  // the stored text; empty if id is unknown
  uint32_t size() const;
  uint64_t overflow_count() const;

 private:
  mutable std::mutex mu_;
  std::deque<std::string> storage_;  // stable addresses: views stay valid
  std::unordered_map<std::string_view, uint32_t> ids_;
  uint64_t overflow_ = 0;
};

// FNV-1a: short names, no setup cost.
inline uint64_t HashText(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

// Per-thread front of a StringTable: a hit costs one hash and one compare.
class StringCache {
 public:
  uint32_t Intern(StringTable& table, std::string_view text);

 private:
  struct Slot {
    const StringTable* table = nullptr;
    uint64_t hash = 0;
    std::string_view text;  // points into the table's storage
    uint32_t id = 0;
  };
  Slot slots_[256];
};

}  // namespace commprof
