#include "analysis/load/event_screen.h"

#include <algorithm>
#include <optional>

#include "analysis/match/collective_instances.h"
#include "analysis/match/collective_key_index.h"
#include "core/schema/enums.h"

namespace commprof {

size_t UnreadableStringTables(const ProfileReader& reader) {
  size_t bad = 0;
  for (const RankInfo& r : reader.info().ranks) {
    bad += reader.Strings(r.rank).ok() ? 0 : 1;
  }
  return bad;
}

size_t ScreenEventRows(ProfileReader& reader) {
  // The collectives of the ranks accepted so far: (key) -> (op, first rank), so a later rank that
  // recorded another operation under the same identity is the one left out (the matching would
  // otherwise refuse the whole file; docs/metrics.md §1).
  CollectiveKeyIndex accepted;
  std::vector<std::pair<uint8_t, uint32_t>> accepted_by;  // by the index's number: (op, first rank)
  std::vector<std::pair<uint32_t, std::string>> bad;
  const ProfileInfo& info = reader.info();
  for (const RankInfo& r : info.ranks) {
    const std::string where = info.path + ": /ranks/" + std::to_string(r.rank) + "/events row ";
    struct Mine {
      CollectiveKey key;
      uint8_t op = 0;
      uint64_t row = 0;
    };
    CollectiveKeyIndex mine_index(static_cast<size_t>(std::min<uint64_t>(r.event_count, uint64_t{1} << 14)));
    std::vector<Mine> mine;  // by the index's number, so in row order
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
        const CollectiveKey key = KeyOf(e);
        const auto [number, inserted] = mine_index.FindOrInsert(key);
        if (!inserted) {
          fault = where + std::to_string(at) + ": a second " + schema::CollectiveOpName(e.subtype) +
                  " with communicator " + std::to_string(e.comm_id) + " sequence " + std::to_string(e.seq) +
                  " on the same rank (row " + std::to_string(mine[number].row) +
                  " has it; sequence numbers are unique per communicator)";
          return;
        }
        mine.push_back({key, e.subtype, at});
      }
    });
    if (!st.ok()) {
      bad.emplace_back(r.rank, st.message());
      continue;
    }
    // In row order: the first disagreement is the earliest row, so the message is deterministic.
    if (fault.empty()) {
      for (const Mine& m : mine) {
        const std::optional<uint32_t> other = accepted.Find(m.key);
        if (other && accepted_by[*other].first != m.op) {
          fault = where + std::to_string(m.row) + ": " + schema::CollectiveOpName(m.op) + " with communicator " +
                  std::to_string(m.key.comm_id) + " sequence " + std::to_string(m.key.seq) + ", but rank " +
                  std::to_string(accepted_by[*other].second) + " recorded " +
                  schema::CollectiveOpName(accepted_by[*other].first) + " for the same call";
          break;
        }
      }
    }
    if (!fault.empty()) {
      bad.emplace_back(r.rank, std::move(fault));
      continue;
    }
    for (const Mine& m : mine) {
      if (accepted.FindOrInsert(m.key).second) {
        accepted_by.emplace_back(m.op, r.rank);
      }
    }
  }
  for (auto& [rank, message] : bad) {
    reader.MarkUnreadable(rank, std::move(message));
  }
  return bad.size();
}

std::vector<RankFault> ScreenEventRowsLeftOut(ProfileReader& reader) {
  const size_t before = reader.info().faults.size();
  ScreenEventRows(reader);
  const std::vector<RankFault>& all = reader.info().faults;
  return {all.begin() + static_cast<std::ptrdiff_t>(before), all.end()};
}

}  // namespace commprof
