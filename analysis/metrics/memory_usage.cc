#include "analysis/metrics/memory_usage.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace commprof {

void MemoryUsageBuilder::Add(std::span<const commprof_event> events) {
  for (const commprof_event& e : events) {
    if (e.kind != COMMPROF_KIND_MEM_ALLOC && e.kind != COMMPROF_KIND_MEM_FREE) {
      continue;
    }
    records_.push_back({clock_.ToReference(static_cast<int64_t>(e.start_ns)), records_.size(), e.seq, e.bytes, e.device,
                        e.subtype, e.kind == COMMPROF_KIND_MEM_ALLOC});
  }
}

std::vector<MemorySeries> MemoryUsageBuilder::Finish() {
  std::stable_sort(records_.begin(), records_.end(), [](const Record& a, const Record& b) {
    return std::tie(a.time, a.order) < std::tie(b.time, b.order);
  });
  struct State {
    MemorySeries series;
    std::unordered_map<uint64_t, uint64_t> live;  // address -> bytes allocated there
  };
  std::map<std::pair<uint16_t, uint8_t>, State> by_key;
  for (const Record& r : records_) {
    State& st = by_key[{r.device, r.memory_kind}];
    MemorySeries& s = st.series;
    int64_t delta = 0;
    if (r.alloc) {
      ++s.allocs;
      // An address allocated again without a free in between: the old block is gone (its free was
      // not recorded); replace it rather than count it twice.
      auto [it, added] = st.live.try_emplace(r.address, r.bytes);
      if (!added) {
        delta -= static_cast<int64_t>(it->second);
        it->second = r.bytes;
      }
      delta += static_cast<int64_t>(r.bytes);
    } else {
      ++s.frees;
      auto it = st.live.find(r.address);
      if (it == st.live.end()) {
        ++s.unmatched_frees;
      } else {
        delta = -static_cast<int64_t>(it->second);
        st.live.erase(it);
      }
    }
    const int64_t in_use = (s.points.empty() ? 0 : s.points.back().bytes_in_use) + delta;
    s.points.push_back({r.time, in_use, delta});
    if (in_use > s.peak_bytes) {
      s.peak_bytes = in_use;
      s.peak_time_ns = r.time;
    }
  }
  std::vector<MemorySeries> out;
  for (auto& [key, st] : by_key) {
    st.series.rank = rank_;
    st.series.device = key.first;
    st.series.memory_kind = key.second;
    st.series.final_bytes = st.series.points.empty() ? 0 : st.series.points.back().bytes_in_use;
    out.push_back(std::move(st.series));
  }
  records_.clear();
  return out;
}

Result<std::vector<MemorySeries>> ComputeMemoryUsage(const ProfileReader& reader) {
  std::vector<MemorySeries> all;
  for (const RankInfo& r : reader.info().ranks) {
    MemoryUsageBuilder b(r.rank, r.clock_model());
    COMMPROF_RETURN_IF_ERROR(
        reader.ForEachEventChunk(r.rank, [&](std::span<const commprof_event> chunk) { b.Add(chunk); }));
    for (MemorySeries& s : b.Finish()) {
      all.push_back(std::move(s));
    }
  }
  return all;
}

}  // namespace commprof
