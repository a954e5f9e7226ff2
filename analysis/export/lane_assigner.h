// Greedy lane assignment for the slices of one timeline track (docs/chrome-trace.md, "Lanes").
//
// Trace viewers draw the complete slices of one thread as a stack: two slices on a thread must
// either nest or be disjoint, and Perfetto drops a slice that crosses the end of another. Recorded
// events do not always obey that: a non-blocking operation spans issue to completion and may
// cross the end of another call the same thread made meanwhile. The assigner splits such a track
// into lanes, each of which nests properly.
//
// Views: the exact ns times are not the only ones that matter. Perfetto converts a JSON
// microsecond value to ns by truncating a double, so it may see a time 1 ns early, and two slices
// that end on the same ns (a request and the MPI_Test that completed it) can cross by a ns or two
// in its view. Each slice therefore carries its interval in several views (exact, and as each
// known reader computes it); a placement must be valid in all of them.
//
// Operation: slices arrive sorted by exact start, and for equal starts by exact end descending
// (an enclosing slice before what it encloses); every view is a non-decreasing function of the
// exact time for starts, so the order holds in all views. Each lane keeps the stack of its open
// slices (their ends per view, innermost last). A new slice first drops, on every lane it looks
// at, the slices that ended at or before its start in every view (touching counts as disjoint);
// it then fits a lane whose stack is empty or whose innermost open slice ends at or after its end
// in every view (it nests inside). It takes the lowest lane that fits, opening a new lane when
// none does. Lane 0 is the track itself, so a track whose slices already nest in every view keeps
// all of them on lane 0.
//
// Example (one view): [0,10] -> lane 0; [2,4] nests -> lane 0; [5,20] crosses 10 -> lane 1;
// [12,14]: lane 0's [0,10] has ended -> lane 0.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace commprof {

// One slice as each reader of the trace sees it; view 0 is the exact time.
struct LaneSlice {
  static constexpr std::size_t kViews = 3;
  std::array<int64_t, kViews> start{};
  std::array<int64_t, kViews> end{};
  // A slice every reader sees exactly.
  static LaneSlice Exact(int64_t s, int64_t e) {
    LaneSlice x;
    x.start.fill(s);
    x.end.fill(e);
    return x;
  }
};

class LaneAssigner {
 public:
  // The lane of `s` (end >= start in every view). Calls must come in the order above (the caller
  // sorts the track first); the guarantee holds only then.
  uint32_t Place(const LaneSlice& s);
  uint32_t Place(int64_t start, int64_t end) { return Place(LaneSlice::Exact(start, end)); }

  // Lanes opened so far (at least 1 once a slice was placed).
  uint32_t lanes() const { return static_cast<uint32_t>(open_.size()); }

  // Forgets every lane, for the next track.
  void Reset() { open_.clear(); }

 private:
  using Ends = std::array<int64_t, LaneSlice::kViews>;
  std::vector<std::vector<Ends>> open_;  // per lane: ends of its open slices, innermost last
};

}  // namespace commprof
