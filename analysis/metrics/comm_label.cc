#include "analysis/metrics/comm_label.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "commprof/event.h"

namespace commprof {

std::string CommIdText(uint64_t comm_id) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(comm_id));
  return hex;
}

std::string CommName(uint64_t comm_id, bool nccl) {
  if (!nccl && comm_id == COMMPROF_COMM_WORLD_ID) {
    return "MPI_COMM_WORLD";
  }
  return std::string(nccl ? "NCCL communicator " : "MPI communicator ") + CommIdText(comm_id);
}

std::string MemberRanks(std::vector<int64_t> ranks, size_t max_ranges) {
  if (ranks.empty()) {
    return "members unknown";
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.size() == 1) {
    return "rank " + std::to_string(ranks[0]);
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t r : ranks) {
    if (!ranges.empty() && ranges.back().second + 1 == r) {
      ranges.back().second = r;
    } else {
      ranges.emplace_back(r, r);
    }
  }
  std::string out = "ranks ";
  size_t shown = 0, counted = 0;
  for (const auto& [first, last] : ranges) {
    if (shown == max_ranges) {
      break;
    }
    out += (shown++ > 0 ? "," : "") + std::to_string(first);
    if (last != first) {
      out += "-" + std::to_string(last);
    }
    counted += static_cast<size_t>(last - first + 1);
  }
  if (counted < ranks.size()) {
    out += ", ... " + std::to_string(ranks.size() - counted) + " more";
  }
  return out;
}

}  // namespace commprof
