#include "analysis/load/event_screen.h"

#include <unordered_map>
#include <unordered_set>

#include "analysis/match/collective_instances.h"
#include "core/schema/enums.h"

namespace commprof {

size_t ScreenEventRows(ProfileReader& reader) {
  // The collectives of the ranks accepted so far: (key) -> (op, first rank), so a later rank that
  // recorded another operation under the same identity is the one left out (the matching would
  // otherwise refuse the whole file; docs/metrics.md §1).
  std::unordered_map<CollectiveKey, std::pair<uint8_t, uint32_t>, CollectiveKeyHash> accepted;
  std::vector<std::pair<uint32_t, std::string>> bad;
  const ProfileInfo& info = reader.info();
  for (const RankInfo& r : info.ranks) {
    const std::string where = info.path + ": /ranks/" + std::to_string(r.rank) + "/events row ";
    std::unordered_map<CollectiveKey, std::pair<uint8_t, uint64_t>, CollectiveKeyHash> mine;  // -> (op, row)
    if (auto strings = reader.Strings(r.rank); !strings.ok()) {
      bad.emplace_back(r.rank, strings.status().message());
      continue;
    }
    std::string fault;
    uint64_t row = 0;
    Status st = reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) {
      for (const commprof_event& e : chunk) {
        const uint64_t at = row++;
        if (!fault.empty()) {
          return;
        }
        if (e.end_ns < e.start_ns) {
          fault = where + std::to_string(at) + ": " + schema::KindName(e.kind) + " ends before it starts (end_ns " +
                  std::to_string(e.end_ns) + " < start_ns " + std::to_string(e.start_ns) + ")";
          return;
        }
        if (!IsMatchableCollective(e) && !IsMatchableNonblockingCollective(e)) {
          continue;
        }
        auto [it, inserted] = mine.emplace(KeyOf(e), std::make_pair(e.subtype, at));
        if (!inserted) {
          fault = where + std::to_string(at) + ": a second " + schema::CollectiveOpName(e.subtype) +
                  " with communicator " + std::to_string(e.comm_id) + " sequence " + std::to_string(e.seq) +
                  " on the same rank (row " + std::to_string(it->second.second) +
                  " has it; sequence numbers are unique per communicator)";
          return;
        }
      }
    });
    if (!st.ok()) {
      bad.emplace_back(r.rank, st.message());
      continue;
    }
    uint64_t first_row = UINT64_MAX;  // the earliest disagreeing row, so the message is deterministic
    for (const auto& [key, op_row] : mine) {
      if (!fault.empty() && first_row == UINT64_MAX) {
        break;  // a row fault of the stream itself
      }
      auto other = accepted.find(key);
      if (other != accepted.end() && other->second.first != op_row.first && op_row.second < first_row) {
        first_row = op_row.second;
        fault = where + std::to_string(op_row.second) + ": " + schema::CollectiveOpName(op_row.first) +
                " with communicator " + std::to_string(key.comm_id) + " sequence " + std::to_string(key.seq) +
                ", but rank " + std::to_string(other->second.second) + " recorded " +
                schema::CollectiveOpName(other->second.first) + " for the same call";
      }
    }
    if (!fault.empty()) {
      bad.emplace_back(r.rank, std::move(fault));
      continue;
    }
    for (const auto& [key, op_row] : mine) {
      accepted.emplace(key, std::make_pair(op_row.first, r.rank));
    }
  }
  for (auto& [rank, message] : bad) {
    reader.MarkUnreadable(rank, std::move(message));
  }
  return bad.size();
}

}  // namespace commprof
