#include "core/clock_tree.h"

#include <algorithm>
#include <bit>
#include <unordered_map>

namespace commprof {

int ClockTreeRound(int j) { return j <= 0 ? -1 : static_cast<int>(std::bit_width(static_cast<unsigned>(j))) - 1; }

int ClockTreeParent(int j) { return j <= 0 ? -1 : j - (1 << ClockTreeRound(j)); }

std::vector<int> ClockTreeChildren(int j, int count) {
  std::vector<int> out;
  for (int r = ClockTreeRound(j) + 1; r < 31; ++r) {
    const int64_t child = static_cast<int64_t>(j) + (int64_t{1} << r);
    if (child >= count) {
      break;
    }
    out.push_back(static_cast<int>(child));
  }
  return out;
}

int ClockTreeRounds(int count) {
  return count <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<unsigned>(count - 1)));
}

ClockHosts GroupByClockDomain(std::span<const uint64_t> keys) {
  ClockHosts h;
  h.leader_of.resize(keys.size());
  h.leader_index.resize(keys.size());
  std::unordered_map<uint64_t, int> index_of_key;
  for (size_t r = 0; r < keys.size(); ++r) {
    auto [it, added] = index_of_key.try_emplace(keys[r], static_cast<int>(h.leaders.size()));
    if (added) {
      h.leaders.push_back(static_cast<int>(r));
    }
    h.leader_index[r] = it->second;
    h.leader_of[r] = h.leaders[static_cast<size_t>(it->second)];
  }
  return h;
}

bool EstimateEpochThroughParent(std::span<const ClockSample> samples, int64_t parent_error_ns, ClockPoint& out) {
  if (!EstimateEpoch(samples, out)) {
    return false;
  }
  out.half_rtt_ns += parent_error_ns;
  return true;
}

int64_t ParentReadingErrorNs(const ClockPoint& newest, int64_t now_ns, bool is_reference) {
  return newest.half_rtt_ns + (is_reference ? 0 : DriftAllowanceNs(now_ns - newest.local_ns));
}

bool KeepEpochPoint(std::span<const ClockPoint> kept, const ClockPoint& p) {
  if (kept.empty()) {
    return true;
  }
  std::vector<int64_t> halves;
  halves.reserve(kept.size());
  for (const ClockPoint& k : kept) {
    halves.push_back(k.half_rtt_ns);
  }
  auto mid = halves.begin() + static_cast<std::ptrdiff_t>(halves.size() / 2);
  std::nth_element(halves.begin(), mid, halves.end());
  return p.half_rtt_ns <= std::max(kEpochOutlierFactor * *mid, kEpochOutlierFloorNs);
}

}  // namespace commprof
