#include "analysis/export/lane_assigner.h"

namespace commprof {

uint32_t LaneAssigner::Place(const LaneSlice& s) {
  auto ended = [&](const Ends& e) {
    for (std::size_t v = 0; v < LaneSlice::kViews; ++v) {
      if (e[v] > s.start[v]) {
        return false;
      }
    }
    return true;
  };
  auto encloses = [&](const Ends& e) {
    for (std::size_t v = 0; v < LaneSlice::kViews; ++v) {
      if (e[v] < s.end[v]) {
        return false;
      }
    }
    return true;
  };
  for (std::size_t lane = 0; lane < open_.size(); ++lane) {
    std::vector<Ends>& stack = open_[lane];
    // Open slices nest in every view, so their ends do not increase towards the top in any view:
    // the ones that ended in every view are all on top.
    while (!stack.empty() && ended(stack.back())) {
      stack.pop_back();
    }
    if (stack.empty() || encloses(stack.back())) {
      stack.push_back(s.end);
      return static_cast<uint32_t>(lane);
    }
  }
  open_.push_back({s.end});
  return static_cast<uint32_t>(open_.size() - 1);
}

}  // namespace commprof
