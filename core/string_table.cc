#include "core/string_table.h"

namespace commprof {

StringTable::StringTable() {
  storage_.emplace_back("");
  ids_.emplace(storage_.back(), kNoNameId);
  storage_.emplace_back("<overflow>");
  ids_.emplace(storage_.back(), kOverflowId);
}

uint32_t StringTable::Intern(std::string_view text) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(text);
  if (it != ids_.end()) {
    return it->second;
  }
  if (storage_.size() >= kMaxStrings) {
    ++overflow_;
    return kOverflowId;
  }
  storage_.emplace_back(text);
  auto id = static_cast<uint32_t>(storage_.size() - 1);
  ids_.emplace(storage_.back(), id);
  return id;
}

std::vector<std::string_view> StringTable::Since(uint32_t first_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string_view> out;
  for (size_t i = first_id; i < storage_.size(); ++i) {
    out.emplace_back(storage_[i]);
  }
  return out;
}

std::string_view StringTable::View(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id < storage_.size() ? std::string_view(storage_[id]) : std::string_view();
}

uint32_t StringTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(storage_.size());
}

uint64_t StringTable::overflow_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return overflow_;
}

uint32_t StringCache::Intern(StringTable& table, std::string_view text) {
  uint64_t h = HashText(text);
  Slot& slot = slots_[h & 255];
  if (slot.table == &table && slot.hash == h && slot.text == text) {
    return slot.id;
  }
  uint32_t id = table.Intern(text);
  if (id == StringTable::kOverflowId) {
    return id;  // not cached: overflow must be counted each time
  }
  slot = Slot{&table, h, table.View(id), id};  // the stored copy: stable for the table's life
  return id;
}

}  // namespace commprof
